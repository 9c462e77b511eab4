"""Celery task: one try of a hook delivery, the next one scheduled with backoff."""

from celery import shared_task

from cudaweb.hooks import services


@shared_task
def sweep_deliveries():
    """Beat's entry: queue again the PENDING deliveries no task holds (services.deliveries_sweep)."""
    return services.deliveries_sweep()


@shared_task(bind=True, acks_late=True, max_retries=None, soft_time_limit=120, time_limit=150)
def deliver(self, delivery_id):
    wait_s = services.delivery_attempt(delivery_id=delivery_id)
    if wait_s is not None:
        # The number of tries is bounded by the delivery's row (CUDAWEB_HOOK_TRIES), not by Celery's counter.
        raise self.retry(countdown=wait_s)
