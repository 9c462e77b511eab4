from django.apps import AppConfig


class DriftConfig(AppConfig):
    name = "cudaweb.drift"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Drift listens to validation (a lower app) instead of validation calling drift.
        from cudaweb.drift.services import on_run_finished
        from cudaweb.validation.signals import run_finished

        run_finished.connect(on_run_finished, dispatch_uid="drift.run_summarize")
