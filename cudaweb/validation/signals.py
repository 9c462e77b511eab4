"""What the validation app tells the apps above it, without importing them.

run_finished(sender=ValidationRun, run_id=UUID, status=str): sent once, when a run reaches its terminal state
(inside the caller's transaction; receivers run synchronously). cudaweb.drift connects run_summarize to it.
"""

from django.dispatch import Signal

run_finished = Signal()
