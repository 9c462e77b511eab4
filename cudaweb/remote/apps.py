from django.apps import AppConfig


class RemoteConfig(AppConfig):
    name = "cudaweb.remote"
    default_auto_field = "django.db.models.BigAutoField"
