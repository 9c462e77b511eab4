"""What a hook says: a run's root cause, its URL, and the Slack-compatible message (host text made clean by
cudaweb.hooks.outbound)."""

from django.conf import settings

from cudaweb.hooks import outbound
from cudaweb.playbooks.root_cause import run_root_cause

HEADLINES = {
    "run_failed": ("failed validation", "#d00000"),
    "quarantined": ("was quarantined", "#d00000"),
    "drift": ("drifted from its baseline or its peers", "#e0a000"),
}
CAUSE_CAP = 300


def root_cause_data(run):
    """The run's root cause as data (cudaweb.playbooks.root_cause), None when it passed."""
    return run_root_cause(run=run)


def cause_line(cause, run):
    """One line for people and schedulers, the playbook ahead of the summary so that a cap keeps it:
    "L1 driver.gpu_health [gpu_hardware]: <summary>", or the reason of a run that never reached a verdict."""
    if cause is None:
        return " ".join(run.reason.split())[:CAUSE_CAP] or "run ended %s" % run.status
    if not cause["check"]:
        return cause["summary"][:CAUSE_CAP]
    playbook = " [%s]" % cause["playbook"]["id"] if cause.get("playbook") else ""
    return " ".join(("%s %s%s: %s" % (cause["layer"], cause["check"], playbook, cause["summary"])).split())[:CAUSE_CAP]


def root_cause(run):
    """The run's root cause as one line (the lowest failing check, else why the run ended where it did)."""
    return cause_line(root_cause_data(run), run)


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


def message(*, event, node_name, run, cause, root_cause=None):
    """Slack-compatible JSON: `text` for any receiver, one attachment with the fields for the ones that show them,
    and `root_cause` as data. Every text a host or an operator wrote (the node's name, the cause, a note) is one
    line that can neither mention, link nor format (outbound.slack_mrkdwn); our own bold name and link are markup."""
    headline, color = HEADLINES[event]
    url = run_url(run)
    verdict = outbound.slack_mrkdwn(run.verdict or run.status)
    name, cause = outbound.slack_mrkdwn(node_name), outbound.slack_mrkdwn(cause)
    text = "*%s* %s (%s): %s <%s|run>" % (name, headline, verdict, cause, url)
    fields = [
        {"title": "Node", "value": name, "short": True},
        {"title": "Verdict", "value": "%s (%s)" % (verdict, outbound.slack_mrkdwn(run.status)), "short": True},
        {"title": "Root cause" if event != "drift" else "Drift", "value": cause, "short": False},
    ]
    playbook = (root_cause or {}).get("playbook") if event != "drift" else None
    if playbook:
        value = outbound.webhook_text("%s: %s" % (playbook["title"], playbook["first_fix"]))  # ours: `code` stays
        fields.append({"title": "Playbook", "value": value, "short": False})
    fields.append({"title": "Run", "value": url, "short": False})
    return {
        "text": text,
        "attachments": [{"fallback": text, "color": color, "title": "%s %s" % (name, headline), "title_link": url,
                         "fields": fields}],
        "root_cause": outbound.webhook_data(root_cause) if event != "drift" else None,
    }


def loop_message(*, event, node_name, headline, cause, url):
    """The loop's webhook (cudaweb.health): a health event, a node's new state, the circuit breaker opening. The
    same Slack-compatible shape as `message`, with the node's page as its link and `loop` as data."""
    data = outbound.webhook_data({"event": event, "node": node_name, "headline": headline, "cause": cause})
    name, cause, headline = (outbound.slack_mrkdwn(text) for text in (node_name, cause, headline))
    text = "*%s* %s: %s <%s|node>" % (name, headline, cause, url)
    color = "#e0a000" if event == "health_event" else "#d00000"
    return {
        "text": text,
        "attachments": [{"fallback": text, "color": color, "title": "%s %s" % (name, headline), "title_link": url,
                         "fields": [{"title": "Node", "value": name, "short": True},
                                    {"title": "Why", "value": cause, "short": False}]}],
        "loop": data,
    }
