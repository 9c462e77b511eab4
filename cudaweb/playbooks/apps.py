from django.apps import AppConfig


class PlaybooksConfig(AppConfig):
    name = "cudaweb.playbooks"
    default_auto_field = "django.db.models.BigAutoField"
