from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "cudaweb.health"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # The loop hears how a re-validation it asked for ended through validation's signal (no import goes down
        # to up: validation never imports health).
        from cudaweb.health import ingest, remediation
        from cudaweb.validation.signals import run_finished

        run_finished.connect(remediation.on_run_finished, dispatch_uid="health.run_finished")
        # a scheduled or operator's run's hardware findings are a look's (one node, one operational state)
        run_finished.connect(ingest.on_run_finished, dispatch_uid="health.run_findings")
        # an operator's quarantine (onboarding) is the loop's quarantine too, and their acceptance releases it
        from cudaweb.health import services
        from cudaweb.nodes.signals import node_accepted, node_quarantined

        node_quarantined.connect(services.on_node_quarantined, dispatch_uid="health.node_quarantined")
        node_accepted.connect(services.on_node_accepted, dispatch_uid="health.node_accepted")
