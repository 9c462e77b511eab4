from django.apps import AppConfig


class HooksConfig(AppConfig):
    name = "cudaweb.hooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Hooks listen to the lower apps; none of them imports hooks (docs/adr/0008-hooks-and-production-settings.md).
        from cudaweb.hooks import services
        from cudaweb.nodes.signals import node_accepted, node_quarantined
        from cudaweb.validation.signals import run_drifted, run_finished

        run_finished.connect(services.on_run_finished, dispatch_uid="hooks.run_finished")
        run_finished.connect(services.on_run_finished_kubernetes, dispatch_uid="hooks.run_finished_kubernetes")
        run_drifted.connect(services.on_run_drifted, dispatch_uid="hooks.run_drifted")
        node_quarantined.connect(services.on_node_quarantined, dispatch_uid="hooks.node_quarantined")
        node_accepted.connect(services.on_node_accepted, dispatch_uid="hooks.node_accepted")
