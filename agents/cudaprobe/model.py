"""The report's vocabulary: check outcomes, statuses and bounds."""

PASS, WARN, FAIL, SKIP, ERROR = "pass", "warn", "fail", "skip", "error"
STATUSES = (PASS, WARN, FAIL, SKIP, ERROR)
LAYERS = ("L0", "L1", "L2", "L3", "L4", "L5", "L6", "L7", "advisory")
EVIDENCE_CAP = 4000


def bounded(text, cap=EVIDENCE_CAP):
    """Keep the head and tail of long output: errors tend to sit at either end."""
    text = text or ""
    if len(text) <= cap:
        return text
    half = cap // 2 - 20
    return text[:half] + "\n... [%d chars cut] ...\n" % (len(text) - 2 * half) + text[-half:]


class Outcome:
    """What a check function returns; the engine adds id, layer, title, timing and blocking."""

    def __init__(self, status, summary, metrics=None, evidence="", signatures=(), details=None, blocked_by=None,
                 gpus=None):
        assert status in STATUSES, status
        self.status = status
        self.summary = summary
        self.metrics = dict(metrics or {})
        self.evidence = evidence
        self.signatures = list(signatures)
        self.details = details
        self.blocked_by = blocked_by  # a skip caused by another check's finding: the checks above skip too
        self.gpus = list(gpus or [])  # per-GPU findings (gpu_identity.finding): which GPU, by UUID, said what


def passed(summary, **kw):
    return Outcome(PASS, summary, **kw)


def warned(summary, **kw):
    return Outcome(WARN, summary, **kw)


def failed(summary, **kw):
    return Outcome(FAIL, summary, **kw)


def skipped(summary, **kw):
    return Outcome(SKIP, summary, **kw)
