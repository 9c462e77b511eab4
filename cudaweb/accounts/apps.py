from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "cudaweb.accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from cudaweb.accounts import signals  # noqa: F401  (logins and role changes go to the audit log)
