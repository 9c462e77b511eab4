"""What the loop tells the apps above it, without importing them.

node_sent_to_rma(sender=NodeLoop, node_id=UUID, transition_id=int): the node went to rma (by the loop or an
operator), once the transition is committed. cudaweb.fleet attaches the evidence bundle (cudaweb/fleet/evidence.py)
to the transition (health.services_bundle.bundle_attach)."""

from django.dispatch import Signal

node_sent_to_rma = Signal()
