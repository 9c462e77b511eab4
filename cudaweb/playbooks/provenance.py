"""What each triage rule was written from: a development text it matches, or a source line it cites.

A rule (a playbook's log pattern) is honest when it matches something that is allowed to shape rules: a text of a
development split (`dev`, `dev-gpu`, the similarity fallback's examples), a canonical text of the catalogue
(catalogue.yaml, each with the library source, NVIDIA or PyTorch documentation it was read from), or the line it
cites itself (`source:` and `line:` beside its regex in the playbook). A rule that
matches none of those but matches held-out texts was written from the held-out texts: its split's figure is not
blind (issue 32: commit 823ed23 added 20 such patterns). Used by tests/playbooks/test_provenance.py and
bench/rule_provenance.py; it counts matches and never returns a held-out text.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from cudaweb.playbooks import linear, novelty

REPO = Path(__file__).resolve().parent.parent.parent
CORPORA = (REPO / "tests" / "data" / "triage_corpus.jsonl", REPO / "tests" / "data" / "triage_gpu_corpus.jsonl")
CATALOGUE_PATH = Path(__file__).resolve().parent / "catalogue.yaml"
DEVELOPMENT = frozenset({"dev", "dev-gpu", "holdout-gpu-e"})  # rules may be written from these (-e: once measured)


def corpus():
    return [json.loads(line) for path in CORPORA if path.exists()
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def is_held_out(entry):
    """Every text not of a development split, the near copies of held-out texts (`repeat`) included."""
    return entry["split"] not in DEVELOPMENT


def catalogue():
    return yaml.safe_load(CATALOGUE_PATH.read_text(encoding="utf-8")) or []


@dataclass
class Support:
    playbook: str
    regex: str
    development: int  # development texts it matches
    catalogue: int  # catalogue texts it matches
    held_out: int  # held-out texts it matches (counted, never shown)
    cited: str = ""  # the pattern's own citation (library.Pattern.cited) ...
    cited_line_matched: bool = False  # ... and whether the pattern matches the line it quotes from there

    @property
    def sourced(self):
        return self.development + self.catalogue > 0 or (self.cited.startswith("https://") and self.cited_line_matched)


def support(books, entries=None, rows=None):
    """Support of every pattern of `books` (library.load().values())."""
    entries = corpus() if entries is None else entries
    rows = catalogue() if rows is None else rows
    dev = [linear.utf8(e["text"]) for e in entries if not is_held_out(e)]
    held = [linear.utf8(e["text"]) for e in entries if is_held_out(e)]
    cat = [linear.utf8(r["text"]) for r in rows]
    found = []
    for book in books:
        for pattern in book.patterns:
            count = (lambda texts: sum(1 for t in texts if pattern.regex.search(t)))  # noqa: E731
            line_matched = bool(pattern.line) and pattern.regex.search(linear.utf8(pattern.line)) is not None
            found.append(Support(book.id, pattern.source, count(dev), count(cat), count(held), pattern.cited,
                                 line_matched))
    return found


def catalogue_copies_of_held_out(entries=None, rows=None):
    """(catalogue index, held-out id, similarity) of every catalogue text that is a near copy of a held-out text."""
    entries = corpus() if entries is None else entries
    rows = catalogue() if rows is None else rows
    held = [e for e in entries if is_held_out(e)]
    return [(i, held[j]["id"], s)
            for i, j, s in novelty.near_copies([r["text"] for r in rows], [e["text"] for e in held])]
