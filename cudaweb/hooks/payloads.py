"""What a hook says: a run's root cause, its URL, and the Slack-compatible message."""

from django.conf import settings

LAYER_ORDER = ("L0", "L1", "L2", "L3", "L4", "L5", "L6", "advisory")
HEADLINES = {
    "run_failed": ("failed validation", "#d00000"),
    "quarantined": ("was quarantined", "#d00000"),
    "drift": ("drifted from its baseline or its peers", "#e0a000"),
}


def root_cause(run):
    """The lowest failing check of the run (the run page's root cause), else why the run ended where it did."""
    rank = {layer: i for i, layer in enumerate(LAYER_ORDER)}
    failing = list(run.checks.filter(status__in=("fail", "error")).only("layer", "position", "check_id", "summary"))
    if failing:
        check = min(failing, key=lambda c: (rank.get(c.layer, len(rank)), c.position))
        return "%s %s: %s" % (check.layer, check.check_id, " ".join(check.summary.split())[:300])
    return " ".join(run.reason.split())[:300] or "run ended %s" % run.status


def drift_summary(run):
    """One line naming what drifted: metrics against the baseline and the peers, software changes."""
    drift = run.drift or {}
    parts = ["%s %.0f%% worse than its baseline" % (row.get("label") or row["metric"], row["worse_pct"])
             for row in drift.get("metrics", []) if row.get("drift") and row.get("worse_pct") is not None]
    parts += ["%s %.0f%% below its peers' median" % (row.get("label") or row["metric"], row["worse_pct"])
              for row in drift.get("peers", []) if row.get("below") and row.get("worse_pct") is not None]
    parts += ["%s %s -> %s" % (row["key"], row["from"], row["to"]) for row in drift.get("software", [])]
    return "; ".join(parts) or "drift"


def run_url(run):
    return settings.CUDAWEB_BASE_URL.rstrip("/") + run.get_absolute_url()


def message(*, event, node_name, run, cause):
    """Slack-compatible JSON: `text` for any receiver, one attachment with the fields for the ones that show them."""
    headline, color = HEADLINES[event]
    url = run_url(run)
    verdict = run.verdict or run.status
    text = "*%s* %s (%s): %s <%s|run>" % (node_name, headline, verdict, cause, url)
    return {
        "text": text,
        "attachments": [{
            "fallback": text, "color": color, "title": "%s %s" % (node_name, headline), "title_link": url,
            "fields": [
                {"title": "Node", "value": node_name, "short": True},
                {"title": "Verdict", "value": "%s (%s)" % (verdict, run.status), "short": True},
                {"title": "Root cause" if event != "drift" else "Drift", "value": cause, "short": False},
                {"title": "Run", "value": url, "short": False},
            ],
        }],
    }
