"""The loop's figures for /metrics (registered by cudaweb.api.metrics): nodes per loop state, events by class and
severity, the breaker."""

from django.db.models import Count, Sum
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from cudaweb.health import selectors
from cudaweb.health.models import HealthEvent


class LoopCollector:
    def collect(self):
        states = GaugeMetricFamily("cudaweb_loop_nodes", "nodes per loop state", labels=("state",))
        for state, n in selectors.state_counts().items():
            states.add_metric([state], n)
        yield states
        events = GaugeMetricFamily("cudaweb_health_events_open", "open health events", labels=("class", "severity"))
        sightings = CounterMetricFamily("cudaweb_health_event_sightings", "sightings of health events kept (an event "
                                        "seen again grows)", labels=("class", "severity"))
        rows = HealthEvent.objects.order_by().values("klass", "severity").annotate(n=Count("id"), seen=Sum("count"))
        open_rows = dict(((r["klass"], r["severity"]), r["n"]) for r in HealthEvent.objects.filter(open=True)
                         .order_by().values("klass", "severity").annotate(n=Count("id")))
        for row in rows:
            key = (row["klass"], row["severity"])
            events.add_metric(list(key), open_rows.get(key, 0))
            sightings.add_metric(list(key), row["seen"] or 0)
        yield events
        yield sightings
        breaker = selectors.breaker()
        gauge = GaugeMetricFamily("cudaweb_loop_breaker_open", "1 while the loop's circuit breaker is open")
        gauge.add_metric([], 1.0 if breaker is not None and breaker.is_open else 0.0)
        yield gauge
