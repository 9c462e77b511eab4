"""What every management command exits with: 0 pass, 1 a warning or failure verdict, 2 a usage or input error,
3 a run that could not complete (README, "Exit codes")."""

from django.core.management.base import CommandError

EXIT_PASS, EXIT_FINDINGS, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3


class InputError(CommandError):
    """A usage or input error: exits 2 (Django's CommandError exits 1, which is a failure verdict here)."""

    def __init__(self, *args, returncode=EXIT_USAGE, **kwargs):
        super().__init__(*args, returncode=returncode, **kwargs)
