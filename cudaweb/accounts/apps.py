from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "cudaweb.accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from cudaweb.accounts import checks, signals  # noqa: F401  (startup checks; logins and role changes are audited)
