"""What happens to a node that the apps above may act on (hooks: webhook, Slurm drain, Kubernetes cordon), sent by
the app that records it, never by importing the listeners.

node_quarantined(sender=Node, node_id=UUID, run_id=UUID, note=str): an operator quarantined the node on the
evidence of run `run_id`. node_accepted(sender=Node, node_id=UUID, run_id=UUID, note=str): an operator accepted
it. Both are sent once the decision is committed (transaction.on_commit), so a rolled-back decision drains nothing.
"""

from django.dispatch import Signal

node_quarantined = Signal()
node_accepted = Signal()
