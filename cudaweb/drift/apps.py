from django.apps import AppConfig


class DriftConfig(AppConfig):
    name = "cudaweb.drift"
    default_auto_field = "django.db.models.BigAutoField"
