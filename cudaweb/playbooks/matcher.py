"""One matcher for both sources: an agent check (signatures, metrics, evidence) and free text (a log).

A playbook scores the sum of what selected it: 1.0 per agent signature it names, 0.6 per metric condition
met, each log pattern's weight (once per pattern), and the knowledge tables' entries of its category that the
text names (knowledge.py; at most KNOWLEDGE_CAP). Playbooks at MIN_SCORE or above are matches; CONFIDENT and
above is the line the UI calls confident. With several failures in one log, the cause leads and the rest follow
as "then": an OOM on rank 3 before the watchdog timeout it caused on rank 0 is an OOM, then a timeout. Text that
no rule names is compared with the labelled examples (similarity.py) and answered as "similar to <source>",
always below MIN_SCORE, together with the rules' near misses ("candidates").
"""

import dataclasses
from dataclasses import dataclass, field

from cudaweb.playbooks import facts as facts_module
from cudaweb.playbooks import knowledge, linear, similarity
from cudaweb.playbooks import library
from cudaweb.playbooks.library import load

MIN_SCORE = 0.6
CONFIDENT = 1.0
SIGNATURE_WEIGHT = 1.0
METRIC_WEIGHT = 0.6
KNOWLEDGE_CAP = 1.5
MAX_EVIDENCE_LINES = 8
MAX_LINE = 400
SIMILAR_SHOWN = 3
SIMILAR_TOP = 0.55  # the score shown for the most similar category: under MIN_SCORE, never "confident"
ADVISORY = frozenset({"performance"})  # advice never leads a failure in a log that has one
CONSEQUENCES = frozenset({"nccl_timeout", "nccl_network", "rendezvous"})  # what one rank's failure does to the rest


@dataclass
class Match:
    playbook: object
    score: float
    evidence: list = field(default_factory=list)  # the input lines that matched, in input order
    signatures: list = field(default_factory=list)
    metrics: list = field(default_factory=list)
    knowledge: list = field(default_factory=list)  # knowledge.Hit, in text order
    first: object = None  # (byte) offset of the earliest matched line in the text
    basis: str = "rules"  # "rules"; below MIN_SCORE "partial" (a near-miss rule) or "similar" (the fallback)
    similar_to: object = None  # similarity.Similar for the fallback
    then: bool = False  # a later failure in the same log, after the one that leads
    kinds: list = field(default_factory=list)  # what the text's numbers show (OOM kinds), most likely first
    pattern_fixes: list = field(default_factory=list)  # the fixes its matched patterns name, in text order

    @property
    def fixes(self):
        """The playbook's fixes, the one answering what selected it first (library.Playbook.fixes_for)."""
        return self.playbook.fixes_for(list(self.signatures) + list(self.kinds), self.pattern_fixes)

    @property
    def confident(self):
        return self.basis == "rules" and self.score >= CONFIDENT

    def as_dict(self):
        out = {"id": self.playbook.id, "category": self.playbook.category, "title": self.playbook.title,
               "severity": self.playbook.severity, "score": round(self.score, 3), "basis": self.basis,
               "confident": self.confident, "then": self.then, "evidence": self.evidence,
               "signatures": self.signatures, "metrics": self.metrics,
               "knowledge": [hit.as_dict() for hit in self.knowledge], "similar_to": None,
               "first_fix": self.fixes[0] if self.playbook.fixes else ""}
        if self.similar_to is not None:
            doc = self.similar_to.document
            out["similar_to"] = {"id": doc.id, "source": doc.source, "similarity": self.similar_to.score}
        return out


@dataclass
class Triage:
    playbooks: list  # Match, the answer: rule matches (leader first, then "then", then the rest), then similar
    candidates: list  # rule scores below MIN_SCORE: shown as "closest", never as the answer
    facts: dict
    oom_kinds: list

    @property
    def matched(self):
        """A rule answer (MIN_SCORE or above), not only partial matches or similar examples."""
        return any(m.basis == "rules" for m in self.playbooks)

    @property
    def sequence(self):
        """The failures of a log in the order they happened: the leader, then its consequences."""
        return [m for m in self.playbooks if m.basis == "rules" and (m is self.playbooks[0] or m.then)]

    def as_dict(self):
        return {"playbooks": [m.as_dict() for m in self.playbooks],
                "candidates": [m.as_dict() for m in self.candidates], "facts": self.facts,
                "oom_kinds": self.oom_kinds}


def _line_of(data, start):
    """The line (str) around a byte offset of the UTF-8 text, and where it begins; of a long line (a log without
    newlines), the part around the match, cut between characters."""
    begin = data.rfind(b"\n", 0, start) + 1
    end = data.find(b"\n", start)
    end = len(data) if end == -1 else end
    if end - begin > MAX_LINE:
        begin, end = max(begin, start - MAX_LINE // 4), min(end, start + MAX_LINE * 3 // 4)
        while begin < start and 0x80 <= data[begin] < 0xC0:  # not inside a character
            begin += 1
        while start < end < len(data) and 0x80 <= data[end] < 0xC0:
            end -= 1
    return begin, linear.text_of(data[begin:end])


def _score(book, text, signatures, metrics, hits, present):
    score, evidence, found_signatures, met, used, fixes = 0.0, {}, [], [], [], []
    for signature in sorted(book.signatures & set(signatures)):
        score += SIGNATURE_WEIGHT
        found_signatures.append(signature)
    for condition in book.metric_conditions:
        value = metrics.get(condition["metric"])
        if isinstance(value, (int, float)) and "below" in condition and value < condition["below"]:
            score += METRIC_WEIGHT
            met.append("%s %.3g < %.3g" % (condition["metric"], value, condition["below"]))
    for order, pattern in enumerate(book.patterns):
        found = pattern.regex.search(text) if id(pattern) in present else None
        if found:
            score += pattern.weight
            offset, line = _line_of(text, found.start())
            evidence.setdefault(offset, line.strip()[:MAX_LINE])
            if pattern.fix != -1:  # at one place, the narrower wording (declared later) names its fix first
                fixes.append((found.start(), -order, pattern.fix))
    by_place = {}  # one place in the text counts once: "unknown error" is in three tables, not three errors
    for hit in hits:
        if hit.entry.category == book.category:
            by_place[hit.offset] = max(by_place.get(hit.offset, 0.0), hit.weight)
            used.append(hit)
            offset, line = _line_of(text, hit.offset)
            evidence.setdefault(offset, line.strip()[:MAX_LINE])
    score += min(sum(by_place.values()), KNOWLEDGE_CAP)
    lines = [evidence[k] for k in sorted(evidence)][:MAX_EVIDENCE_LINES]
    return Match(book, score, lines, found_signatures, met, used, min(evidence) if evidence else None,
                 pattern_fixes=[index for _, _, index in sorted(fixes)])


def _order(matches):
    """Best score first, except that a consequence never leads its cause: when the best is a communication
    failure (a watchdog timeout, a remote error, a store that lost a worker) and a confident failure of another
    kind comes earlier in the log, that one leads; failing that, the communication failure printed first leads
    (a watchdog timeout before the errors of the communicator it aborted). Advice (ADVISORY) never leads where a
    confident failure is found. The confident failures after the leader, and the communication failures anywhere,
    are its "then"."""
    matches = sorted(matches, key=lambda m: (-m.score, m.playbook.id))
    failures = [m for m in matches if m.confident and m.first is not None and m.playbook.category not in ADVISORY]
    if not failures:
        return matches
    leader = matches[0]
    if leader.playbook.category in ADVISORY:
        leader = failures[0]  # advice, however much of it a log prints, never leads its failure
    elif len(failures) < 2:
        return matches
    if leader.playbook.category in CONSEQUENCES and leader in failures:
        causes = [m for m in failures if m.playbook.category not in CONSEQUENCES and m.first < leader.first]
        earlier = [m for m in failures if m.playbook.category in CONSEQUENCES and m.first < leader.first]
        if causes:
            leader = min(causes, key=lambda m: (m.first, -m.score))
        elif earlier:  # among communication failures the first one printed: a timeout, then the abort's errors
            leader = min(earlier, key=lambda m: (m.first, -m.score))
    if leader not in failures:
        return matches
    for m in failures:  # what followed the leader, and the communication failures it explains wherever they are
        m.then = m is not leader and (m.first > leader.first or m.playbook.category in CONSEQUENCES)
    rest = [m for m in matches if m is not leader]
    return [leader] + [m for m in rest if m.then] + [m for m in rest if not m.then]


def _fallback(text, books, candidates, exclude, skip):
    """Below the rules' line: the rules' near misses and the most similar labelled examples, per category.

    A category scores its near-miss rule score plus its similarity (the most similar category SIMILAR_TOP, the
    others in proportion), capped under MIN_SCORE: an answer an operator can follow, never a confident one."""
    by_category = {book.category: book for book in books}
    ranked = {m.playbook.category: m for m in candidates if m.playbook.category not in skip}
    found = similarity.default_index().search(text, exclude=exclude)
    for near in found:
        if near.category in skip or near.category not in by_category:
            continue
        share = SIMILAR_TOP * near.score / found[0].score
        match = ranked.get(near.category)
        if match is None:
            match = ranked[near.category] = Match(by_category[near.category], 0.0, [], basis="similar")
        match.score += share
        match.similar_to = near
    for match in ranked.values():
        match.score = min(match.score, MIN_SCORE - 0.01)
    return sorted(ranked.values(), key=lambda m: (-m.score, m.playbook.id))


def triage(text="", signatures=(), metrics=None, exclude=(), similar=True):
    """Rank every playbook against this input; the shared entry point of both sources.

    `similar=False` gives the rules' matches only, no fallback (an agent check's own evidence is not a log to
    compare with issue threads); `exclude` leaves labelled examples out of it by id (leave-one-out figures)."""
    text = text or ""
    # CRLF (what a browser's form submits) becomes LF here, once for every source: `(?m)$` and the lines evidence
    # shows would otherwise differ, and so would the similar examples, between the page and the CLI or the API.
    data = linear.utf8(text).replace(b"\r\n", b"\n")  # encoded once; every pattern runs on these bytes
    books = list(load().values())
    hits = knowledge.load().hits(data)
    screen, patterns = library.screen()
    present = {id(patterns[i]) for i in screen.occurring(data)}  # one pass: which patterns occur at all
    scored = [_score(book, data, signatures, metrics or {}, hits, present) for book in books]
    matches = _order([m for m in scored if m.score >= MIN_SCORE])
    candidates = sorted((m for m in scored if 0 < m.score < MIN_SCORE), key=lambda m: (-m.score, m.playbook.id))
    if similar and text.strip() and len(matches) < SIMILAR_SHOWN:
        near = [dataclasses.replace(m, basis="partial") for m in candidates]
        below = _fallback(data, books, near, frozenset(exclude), {m.playbook.category for m in matches})
        matches += below[:SIMILAR_SHOWN - len(matches)] if matches else below[:SIMILAR_SHOWN]
    found = facts_module.extract(data)
    oom = facts_module.oom_kinds(found, signatures) if matches and matches[0].playbook.category == "oom" else []
    if oom:  # the specific diagnosis leads the generic list: the fix of what the numbers show comes first
        matches[0].kinds = [kind["kind"] for kind in oom if kind["shown"]]
    return Triage(matches, candidates[:3], found, oom)


def triage_check(check):
    """Playbooks for one stored check result (a CheckResult or a report's check dict)."""
    get = check.get if isinstance(check, dict) else lambda key, default=None: getattr(check, key, default)
    text = "\n".join(part for part in (get("summary", ""), get("evidence", "")) if part)
    return triage(text, get("signatures") or (), get("metrics") or {}, similar=False)


def warm_up():
    """Load and compile everything the matcher uses (the web process calls it at start)."""
    triage("CUDA out of memory")
