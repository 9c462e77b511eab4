"""One matcher for both sources: an agent check (signatures, metrics, evidence) and free text (a log).

Each playbook scores the sum of what selected it: 1.0 per agent signature it names, 0.6 per metric
condition met, and each log pattern's weight (once per pattern). Playbooks at MIN_SCORE or above are
matches, best first; below it they are only candidates, so unknown text gets "no match" rather
than a confident wrong answer.
"""

from dataclasses import dataclass, field

from cudaweb.playbooks import facts as facts_module
from cudaweb.playbooks.library import load

MIN_SCORE = 0.6
SIGNATURE_WEIGHT = 1.0
METRIC_WEIGHT = 0.6
MAX_EVIDENCE_LINES = 8
MAX_LINE = 400


@dataclass
class Match:
    playbook: object
    score: float
    evidence: list = field(default_factory=list)  # the input lines that matched, in input order
    signatures: list = field(default_factory=list)
    metrics: list = field(default_factory=list)

    def as_dict(self):
        return {"id": self.playbook.id, "category": self.playbook.category, "title": self.playbook.title,
                "severity": self.playbook.severity, "score": round(self.score, 3), "evidence": self.evidence,
                "signatures": self.signatures, "metrics": self.metrics}


@dataclass
class Triage:
    playbooks: list  # Match, best first, each at MIN_SCORE or above
    candidates: list  # Match below MIN_SCORE: shown as "closest", never as the answer
    facts: dict
    oom_kinds: list

    @property
    def matched(self):
        return bool(self.playbooks)

    def as_dict(self):
        return {"playbooks": [m.as_dict() for m in self.playbooks],
                "candidates": [m.as_dict() for m in self.candidates], "facts": self.facts,
                "oom_kinds": self.oom_kinds}


def _line_of(text, start):
    begin = text.rfind("\n", 0, start) + 1
    end = text.find("\n", start)
    return begin, text[begin:end if end != -1 else len(text)]


def _score(book, text, signatures, metrics):
    score, evidence, found_signatures, met = 0.0, {}, [], []
    for signature in sorted(book.signatures & set(signatures)):
        score += SIGNATURE_WEIGHT
        found_signatures.append(signature)
    for condition in book.metric_conditions:
        value = metrics.get(condition["metric"])
        if isinstance(value, (int, float)) and "below" in condition and value < condition["below"]:
            score += METRIC_WEIGHT
            met.append("%s %.3g < %.3g" % (condition["metric"], value, condition["below"]))
    for pattern in book.patterns:
        found = pattern.regex.search(text)
        if found:
            score += pattern.weight
            offset, line = _line_of(text, found.start())
            evidence.setdefault(offset, line.strip()[:MAX_LINE])
    lines = [evidence[k] for k in sorted(evidence)][:MAX_EVIDENCE_LINES]
    return Match(book, score, lines, found_signatures, met)


def triage(text="", signatures=(), metrics=None):
    """Rank every playbook against this input; the shared entry point of both sources."""
    text = text or ""
    scored = [_score(book, text, signatures, metrics or {}) for book in load().values()]
    scored = sorted((m for m in scored if m.score > 0), key=lambda m: (-m.score, m.playbook.id))
    found = facts_module.extract(text)
    matches = [m for m in scored if m.score >= MIN_SCORE]
    oom = facts_module.oom_kinds(found, signatures) if matches and matches[0].playbook.category == "oom" else []
    return Triage(matches, [m for m in scored if m.score < MIN_SCORE][:3], found, oom)


def triage_check(check):
    """Playbooks for one stored check result (a CheckResult or a report's check dict)."""
    get = check.get if isinstance(check, dict) else lambda key, default=None: getattr(check, key, default)
    text = "\n".join(part for part in (get("summary", ""), get("evidence", "")) if part)
    return triage(text, get("signatures") or (), get("metrics") or {})
