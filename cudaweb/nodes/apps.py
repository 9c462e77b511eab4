from django.apps import AppConfig


class NodesConfig(AppConfig):
    name = "cudaweb.nodes"
    default_auto_field = "django.db.models.BigAutoField"
