from django.apps import AppConfig


class FleetConfig(AppConfig):
    name = "cudaweb.fleet"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # The loop (cudaweb.health, below fleet) says a node went to rma; the evidence bundle is made here, where
        # the bundle's code lives (cudaweb/fleet/evidence.py).
        from cudaweb.fleet import evidence
        from cudaweb.health.signals import node_sent_to_rma

        node_sent_to_rma.connect(evidence.on_node_sent_to_rma, dispatch_uid="fleet.node_sent_to_rma")
