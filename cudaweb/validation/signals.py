"""What the validation app tells the apps above it, without importing them.

run_finished(sender=ValidationRun, run_id=UUID, status=str): sent once, when a run reaches its terminal state
(inside the transaction that ends it; receivers run synchronously; a dropped connection runs that transaction
again, receivers included), and once more if a report kept by a DASHBOARD_ERROR run is stored later (the reaper).
cudaweb.drift connects run_summarize to it.

run_drifted(sender=ValidationRun, run_id=UUID, node_id=UUID): the run's summary shows drift its node did not have
before (sent by cudaweb.drift once the summary is committed). cudaweb.hooks sends a webhook on it.
"""

from django.dispatch import Signal

run_finished = Signal()
run_drifted = Signal()
