from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "cudaweb.api"
    default_auto_field = "django.db.models.BigAutoField"
