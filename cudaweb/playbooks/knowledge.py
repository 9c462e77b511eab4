"""Knowledge tables beside the playbooks: the error names, numbers and messages of CUDA, cuBLAS, cuDNN, NCCL,
NVML, the Xid catalogue, torch.distributed, AMP loss scalers and container runtimes, each mapped to a category.

One YAML file per table under knowledge/ (table, title, sources, entries: name, number, message(s), category,
meaning, source), so a wording no hand-written pattern names still finds its playbook: `CUDA_ERROR_NO_DEVICE`,
`Return value 46 from cudaStreamCreate`, `NET/IB` WARN lines from net_ib.cc, `Xid ... 79`. A table may add
`sources_files` (NCCL: the source files its WARN lines name); number_contexts.yaml says how logs print each
table's numeric codes. Every pattern is linear (linear.py).
"""

import functools
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from cudaweb.common import numbers
from cudaweb.playbooks import linear

KNOWLEDGE_DIR = Path(__file__).resolve().parent / "knowledge"
NAME_WEIGHT = 1.0  # an identifier (cudaErrorNoDevice, CUDA_ERROR_OUT_OF_MEMORY, ncclSystemError) names one error
MESSAGE_WEIGHT = 0.8  # the library's own message, word for word
FRAMED_WEIGHT = 1.0  # a message in the frame its printer puts around it ("CUDA error: out of memory"): one error
SHORT_MESSAGE_WEIGHT = 0.5  # a message under SHORT characters ("out of memory") also appears in other contexts
NUMBER_WEIGHT = 0.8  # a numeric code in a context that says which table it belongs to
FILE_WEIGHT = 0.6  # an NCCL WARN line from a source file whose job is known
SHORT = 24
MIN_MESSAGE = 10  # messages shorter than this ("no error", "unknown") select nothing on their own
MAX_HITS = 16
MAX_SCAN = 2000  # matches of one pattern looked at: a log repeating one line 100,000 times says it once


@dataclass(frozen=True)
class Entry:
    table: str
    name: str
    number: object
    messages: tuple
    category: object
    meaning: str
    source: str
    action: str = ""
    pattern: object = None  # compiled, for entries a fixed message cannot name (nvidia-smi -q fields, prose)
    pattern_source: str = ""
    opens: object = None  # the playbook an operator opens first: the category, or `opens` where no rule scores it
    aliases: tuple = ()  # other identifiers printed for it (pynvml's exception class NVMLError_ResetRequired)



CONTEXTS_FILE = "number_contexts.yaml"
WORKFLOWS_FILE = "xid_workflows.yaml"
WORKFLOW_WEIGHT = 0.5  # an Xid the catalogue resolves by a workflow: the application's or the GPU's, never sure
_XID_ON_GPU = linear.compile(r"\bXid \(PCI:([0-9A-Fa-f:.]{4,24})\): (\d{1,3})\b", case_sensitive=True)


@dataclass(frozen=True)
class Hit:
    entry: Entry
    offset: int  # where in the text
    weight: float
    how: str  # "name", "message", "framed", "number", "pattern", "repeat" or "file"

    def as_dict(self):
        e = self.entry
        return {"table": e.table, "name": e.name, "number": e.number, "category": e.category,
                "meaning": e.meaning, "source": e.source, "how": self.how}


_PLACEHOLDER = re.compile(r"\{[^{}\n]{0,40}\}|%(?:l{0,2}|z)[sdiufgxpc]|\.\.\.")  # on the tables, not on input
MIN_FRAGMENT = 16


def _messages(value):
    """A message as logs print it; a format string ("connect to {}:{} - timed out") gives its long fixed parts."""
    if value is None:
        return ()
    out = []
    for message in (value if isinstance(value, list) else [value]):
        message = " ".join(str(message or "").split())
        if not message:
            continue
        if _PLACEHOLDER.search(message):
            out += [part.strip() for part in _PLACEHOLDER.split(message) if len(part.strip()) >= MIN_FRAGMENT]
        else:
            out.append(message)
    return tuple(out)


@dataclass
class Table:
    name: str
    title: str
    entries: list
    number_patterns: tuple  # (source, compiled)
    files: dict  # NCCL source file basename -> Entry
    patterned: tuple = ()  # entries with a category and a pattern


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{7,80}$")  # on the tables' names, not on input
_ERRORISH = re.compile(r"Error|Exception|ERROR|STATUS|Status|Timeout|^nccl[A-Z]|^ROBUST_CHANNEL|^NVLINK|^GSP|_ERR")
GENERIC = frozenset({"RuntimeError", "ValueError", "AssertionError", "KeyError", "OSError", "TypeError", "SystemError",
                     "Exception", "ChildFailedError", "NotImplementedError", "AttributeError", "IndexError",
                     "getNcclErrorDetailStr"})


def _names(entry):
    """The identifiers under which logs print this entry: an error name, not a module or a group label."""
    last = entry.name.rsplit(".", 1)[-1]
    return [name for name in {entry.name, last, *entry.aliases} if _IDENTIFIER.search(name) and _ERRORISH.search(name)
            and name not in GENERIC]


def _stem(path):
    """net_ib for transport/net_ib.cc and net_ib.cu (NCCL's sources were .cu before 2.9)."""
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()


# How torch, NCCL and TensorRT print a CUDA error string, right before it: c10/cuda/CUDAException.cpp "CUDA error: "
# + cudaGetErrorString, "CUDA driver error: " + cuGetErrorString, NCCL's CUDACHECK "Cuda failure 'STRING'" (2.19 and
# later "Cuda failure N 'STRING'"), torch 1.x THC "cuda runtime error (N) : STRING", TensorRT "Cuda Runtime (STRING)".
# The frame says which table a message belongs to: "out of memory" after "CUDA error: " is cudaErrorMemoryAllocation.
FRAMED_TABLES = frozenset({"cuda_runtime", "cuda_driver", "cuda_runtime_legacy"})
_FRAME = linear.compile(r"(?:cuda(?: driver)? error: |cuda failure (?:\d{1,4} )?'|cuda failure: "
                        r"|cuda runtime error \(\d{1,4}\) : |cuda runtime \()\z")
FRAME_LOOKBACK = 40


def _framed(text, start):
    return _FRAME.search(text[max(0, start - FRAME_LOOKBACK):start]) is not None  # bytes, as the matcher passes


def _boundary(literal):
    text = linear.escape(literal)
    return ("\\b" if literal[:1].isalnum() else "") + text + ("\\b" if literal[-1:].isalnum() else "")


class Knowledge:
    def __init__(self, tables, workflows=None):
        self.tables = tables
        workflows = workflows or {}
        self.workflow_xids = frozenset(int(x) for x in workflows.get("workflow_xids") or ())
        self.repeats = int(workflows.get("repeats_on_one_gpu") or 2)
        self.repeat_entry = Entry("xid", "Xid repeated on one GPU", None, (), "gpu_hardware",
                                  "the same Xid %s several times on one GPU: NVIDIA's catalogue says possibly the "
                                  "hardware; run DCGM diagnostics (dcgmi diag -r 3) on it" % "/".join(
                                      str(x) for x in sorted(self.workflow_xids)),
                                  (workflows.get("sources") or [""])[0])
        self.by_name, self.by_message, self.by_number = {}, {}, {}
        for table in tables:
            for entry in table.entries:
                if not entry.category:
                    continue
                for name in _names(entry):
                    self.by_name.setdefault(name.lower(), []).append(entry)
                for message in entry.messages:
                    if len(message) >= MIN_MESSAGE:
                        self.by_message.setdefault(message.lower().rstrip("."), []).append(entry)
                if entry.number is not None:
                    self.by_number[(table.name, int(entry.number))] = entry
        names = sorted(self.by_name, key=len, reverse=True)
        messages = sorted(self.by_message, key=len, reverse=True)
        self.names = linear.compile("|".join(_boundary(n) for n in names)) if names else None
        self.message_regex = linear.compile("|".join(_boundary(m) for m in messages)) if messages else None
        self.files = {stem: entry for table in tables for stem, entry in table.files.items()}
        self.file_regex = linear.compile(r"([A-Za-z_][\w/]{0,60}\.(?:cc|cu|h|cpp))[:(]\d{1,6}\)? NCCL WARN")
        self.checks = [("pattern", table, entry, entry.pattern) for table in tables for entry in table.patterned]
        self.checks += [("number", table, None, compiled) for table in tables for _, compiled in table.number_patterns]
        sources = [e.pattern_source for t in tables for e in t.patterned]
        sources += [source for t in tables for source, _ in t.number_patterns]
        self.screen = linear.Screen(sources)

    def hits(self, text):
        """Every entry the text (str or UTF-8 bytes) names, each once, in text order (at most MAX_HITS);
        offsets are byte offsets into linear.utf8(text)."""
        text = linear.utf8(text)
        found = {}

        def add(entry, offset, weight, how):
            key = (entry.table, entry.name)
            if key not in found or found[key].weight < weight:
                found[key] = Hit(entry, offset, weight, how)

        if self.names is not None:
            for match in itertools.islice(self.names.finditer(text), MAX_SCAN):
                for entry in self.by_name.get(linear.text_of(match.group(0)).lower(), ()):
                    add(entry, match.start(), NAME_WEIGHT, "name")
        if self.message_regex is not None:
            for match in itertools.islice(self.message_regex.finditer(text), MAX_SCAN):
                message = linear.text_of(match.group(0)).lower().rstrip(".")
                weight = MESSAGE_WEIGHT if len(message) >= SHORT else SHORT_MESSAGE_WEIGHT
                framed = _framed(text, match.start())
                for entry in self.by_message.get(message, ()):
                    if framed and entry.table in FRAMED_TABLES:
                        add(entry, match.start(), FRAMED_WEIGHT, "framed")
                    else:
                        add(entry, match.start(), weight, "message")
        for i in sorted(self.screen.occurring(text)):  # one pass: which of the patterns occur at all
            how, table, entry, compiled = self.checks[i]
            if how == "pattern":
                match = compiled.search(text)
                if match:
                    add(entry, match.start(), MESSAGE_WEIGHT, "pattern")
                continue
            for match in itertools.islice(compiled.finditer(text), MAX_SCAN):
                number = next((g for g in match.groups() if g), None)
                numbered = self.by_number.get((table.name, numbers.integer(number)))
                if numbered is not None:
                    weight = WORKFLOW_WEIGHT if table.name == "xid" and numbered.number in self.workflow_xids \
                        else NUMBER_WEIGHT
                    add(numbered, match.start(), weight, "number")
        if self.workflow_xids:
            seen = {}
            for match in itertools.islice(_XID_ON_GPU.finditer(text), MAX_SCAN):
                key = (match.group(1), numbers.integer(match.group(2)))
                if key[1] in self.workflow_xids:
                    seen.setdefault(key, []).append(match.start())
            repeated = sorted(offsets[self.repeats - 1] for offsets in seen.values() if len(offsets) >= self.repeats)
            if repeated:
                add(self.repeat_entry, repeated[0], NUMBER_WEIGHT, "repeat")
        if self.files:  # one pass over the WARN lines, whichever table names their source files
            for match in itertools.islice(self.file_regex.finditer(text), MAX_SCAN):
                entry = self.files.get(_stem(linear.text_of(match.group(1))))
                if entry is not None:
                    add(entry, match.start(), FILE_WEIGHT, "file")
        return sorted(found.values(), key=lambda h: h.offset)[:MAX_HITS]


def _table(path, contexts):
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    name = data["table"]
    entries = [Entry(name, str(e["name"]), e.get("number"), () if e.get("pattern") else _messages(e.get("message")),
                     e.get("category"), " ".join(str(e.get("meaning", "")).split()),
                     e.get("source") or (data.get("sources") or [""])[0], str(e.get("action") or ""),
                     linear.compile(e["pattern"]) if e.get("pattern") and e.get("category") else None,
                     e.get("pattern") or "", e.get("category") or e.get("opens"), tuple(e.get("aliases") or ()))
               for e in data.get("entries") or []]
    files = {}
    for item in data.get("sources_files") or []:
        if item.get("category"):
            entry = Entry(name, item["file"], None, (), item["category"], " ".join(str(item.get("does", "")).split()),
                          item.get("source", ""))
            for alias in [item["file"], *(item.get("aliases") or [])]:
                files[_stem(alias)] = entry
    patterns = tuple((p, linear.compile(p)) for p in contexts.get(name) or [])
    return Table(name, data.get("title", name), entries, patterns, files,
                 tuple(e for e in entries if e.pattern is not None))


@functools.lru_cache(maxsize=1)
def load(directory=KNOWLEDGE_DIR):
    directory = Path(directory)
    contexts = yaml.safe_load((directory / CONTEXTS_FILE).read_text(encoding="utf-8")) or {}
    tables = sorted(path for path in directory.glob("*.yaml") if path.name not in (CONTEXTS_FILE, WORKFLOWS_FILE))
    workflows = yaml.safe_load((directory / WORKFLOWS_FILE).read_text(encoding="utf-8")) or {}
    return Knowledge([_table(path, contexts) for path in tables], workflows)


def entries():
    return [entry for table in load().tables for entry in table.entries]
