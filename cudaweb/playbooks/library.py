"""The knowledge base: one YAML file per playbook under library/, loaded and checked once per process."""

import functools
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from cudaweb.playbooks import linear

LIBRARY_DIR = Path(__file__).resolve().parent / "library"
CATEGORIES = (
    "driver_unreachable", "driver_runtime_mismatch", "torch_cpu_build", "device_access", "compute_mode_busy", "oom",
    "device_mismatch", "nccl_timeout", "nccl_network", "rendezvous", "amp_numerics", "gpu_hardware", "illegal_access",
    "performance", "cublas_cudnn", "cuda_fork", "ddp_unused_parameters", "checkpoint_device",
    "deterministic_algorithms", "fabric", "torch_missing",
)
REQUIRED = ("id", "title", "category", "severity", "summary", "symptoms", "causes", "diagnostics", "fixes", "match")


class PlaybookError(ValueError):
    """A playbook file that does not follow the format (raised at load, so a bad file fails loudly)."""


@dataclass(frozen=True)
class Pattern:
    regex: object  # a linear-time (RE2) pattern: see linear.py
    weight: float
    source: str = ""  # the pattern as written, for linear.Screen
    cited: str = ""  # where the wording comes from (a library source file, NVIDIA or PyTorch documentation)
    line: str = ""  # the line there that the pattern was written from, as printed (tests/playbooks/test_provenance)
    fix: int = -1  # the index of the playbook's fix that answers this wording, shown first when it matched


@dataclass(frozen=True)
class Playbook:
    id: str
    title: str
    category: str
    severity: str
    summary: str
    symptoms: list
    causes: list
    diagnostics: list
    fixes: list
    references: list
    signatures: frozenset
    patterns: tuple
    metric_conditions: tuple = field(default=())
    fix_for: dict = field(default_factory=dict)  # a signature or OOM kind -> the index of the fix that answers it

    def fixes_for(self, selected=(), indices=()):
        """The fixes, those answering what selected the playbook (signatures, OOM kinds, then the fixes its matched
        patterns name; in that order) first: the first fix shown follows what led to it, not the playbook's most
        common cause."""
        first = []
        for index in [self.fix_for.get(key) for key in selected] + list(indices):
            if index is not None and 0 <= index < len(self.fixes) and index not in first:
                first.append(index)
        return [self.fixes[i] for i in first] + [fix for i, fix in enumerate(self.fixes) if i not in first]


def parse(data, source="<playbook>"):
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise PlaybookError("%s: missing %s" % (source, ", ".join(missing)))
    if data["category"] not in CATEGORIES:
        raise PlaybookError("%s: unknown category %r" % (source, data["category"]))
    match = data["match"] or {}
    try:
        patterns = tuple(Pattern(linear.compile(p["regex"]), float(p["weight"]), p["regex"], p.get("source", ""),
                                 p.get("line", ""), int(p.get("fix", -1)))
                         for p in match.get("patterns") or [])
    except (linear.error, KeyError, TypeError, ValueError) as exc:
        raise PlaybookError("%s: bad pattern: %s" % (source, exc)) from exc
    if not patterns and not match.get("signatures"):
        raise PlaybookError("%s: selects nothing (no signatures, no patterns)" % source)
    fix_for = dict(data.get("fix_for") or {})
    named = list(fix_for.values()) + [p.fix for p in patterns if p.fix != -1]
    if any(not isinstance(i, int) or not 0 <= i < len(data["fixes"]) for i in named):
        raise PlaybookError("%s: fix_for names a fix that is not there" % source)
    return Playbook(
        id=data["id"], title=data["title"], category=data["category"], severity=data["severity"],
        summary=" ".join(str(data["summary"]).split()), symptoms=list(data["symptoms"]), causes=list(data["causes"]),
        diagnostics=list(data["diagnostics"]), fixes=list(data["fixes"]), references=list(data.get("references") or []),
        signatures=frozenset(match.get("signatures") or []), patterns=patterns,
        metric_conditions=tuple(match.get("metrics") or []), fix_for=fix_for,
    )


@functools.lru_cache(maxsize=1)
def load(directory=LIBRARY_DIR):
    """All playbooks by id, in file-name order."""
    books = {}
    for path in sorted(Path(directory).glob("*.yaml")):
        book = parse(yaml.safe_load(path.read_text()), path.name)
        if book.id in books:
            raise PlaybookError("%s: duplicate id %s" % (path.name, book.id))
        books[book.id] = book
    return books


@functools.lru_cache(maxsize=1)
def screen():
    """(linear.Screen over every playbook's patterns, the Pattern of each index)."""
    patterns = [pattern for book in load().values() for pattern in book.patterns]
    return linear.Screen([p.source for p in patterns]), patterns


def get(playbook_id):
    return load().get(playbook_id)
