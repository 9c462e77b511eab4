from django.apps import AppConfig


class ValidationConfig(AppConfig):
    name = "cudaweb.validation"
    default_auto_field = "django.db.models.BigAutoField"
