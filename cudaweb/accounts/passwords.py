"""A password rule Django's validators leave out (settings.AUTH_PASSWORD_VALIDATORS)."""

from django.core.exceptions import ValidationError

SHORTEST_NAME_CHECKED = 3  # shorter user names turn up inside random passwords by chance


class UserNameInsideValidator:
    """Refuses a password that contains its user's name: Django's similarity measure lets "viewer1viewer1" through
    for viewer1 (the name is half of it, under its 0.7 ratio)."""

    def validate(self, password, user=None):
        name = (user.get_username() if user is not None else "").lower()
        if len(name) >= SHORTEST_NAME_CHECKED and name in password.lower():
            raise ValidationError("The password contains the user name.", code="password_contains_user_name")

    def get_help_text(self):
        return "Your password can't contain your user name."
