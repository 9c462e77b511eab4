"""The fallback for text no rule names: rank the labelled examples by BM25 similarity to it.

The documents are the labelled real error texts of the corpus's dev split (knowledge/examples.jsonl, each with
its source), every playbook's own symptoms and causes, every knowledge-table entry, and the canonical messages of
catalogue.yaml as their libraries print them, each with its source, but those that are near copies of a holdout
text (bench/triage_fallback.py: the fallback alone on every holdout text, 53.5 -> 65.4 % top-1 on the GPU sets,
83.8 -> 84.2 % on the public ones, issue 23). A text that matches no
pattern is compared with them; each category is scored by its most similar document, and the answer is shown
as "similar to <source>", below the rules' confident line. BM25 in a few dozen lines, not a dependency:
the index is a few hundred short documents, and we need leave-one-out for honest figures (docs/adr/0007).
"""

import functools
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from cudaweb.playbooks import knowledge, linear
from cudaweb.playbooks.library import load

EXAMPLES_PATH = Path(__file__).resolve().parent / "knowledge" / "examples.jsonl"
CATALOGUE_PATH = Path(__file__).resolve().parent / "catalogue.yaml"
K1, B = 1.2, 0.75
MAX_QUERY_CHARS = 64 * 1024  # the head and the tail of a huge log: where errors are, and a bound on time
MIN_TERMS = 3  # a document must share at least this many distinct words with the text
MIN_SCORE = 6.0  # and reach this BM25 score, or the text is "no match" (random text is not "similar")
STOP = frozenset("""the a an and or of to in on at for is are was were be been it this that with as by from not no
    you your we our i my if else then than but so can could would should will do does did has have had there here
    line file self none true false return def import py lib site packages python local usr home""".split())
_WORD = linear.compile(r"[A-Za-z_][A-Za-z0-9_]{1,48}", case_sensitive=True)
_CAMEL = re.compile(r"[A-Z]+[a-z0-9]*|[a-z0-9]+")  # on one word of at most 49 characters
# A Python traceback's frame lines say where a program was, not what went wrong; every traceback has them, so a
# short example that is mostly frames was "similar" to any traceback (issue 23: the fallback's lean to one category).
_FRAMES = linear.compile(r"^[^\n]{0,40}?(Traceback \(most recent call last\):|File \"[^\"\n]{1,400}\", line \d+(, in [^\n]{1,200})?)[ \t]*$|^[ \t\[\]a-z0-9:]*[~^]{3,}[ \t~^]*$", case_sensitive=True)


# Lines torch and torchrun print whatever the cause (under every CUDA error; torchrun's failure summary and banner;
# ProcessGroupNCCL at exit): words every category's texts share say nothing about which one a new text is. Without
# them the fallback ranked the right category in the first three for 110 of the 127 GPU holdout texts, 104 with them
# (bench/triage_fallback.py, issue 23).
_BOILERPLATE = linear.compile(
    r"^[^\n]*(CUDA kernel errors might be asynchronously reported at some other API call|For debugging consider "
    r"passing CUDA_LAUNCH_BLOCKING=1|Compile with .TORCH_USE_CUDA_DSA. to enable device-side assertions|Setting "
    r"OMP_NUM_THREADS environment variable for each process|destroy_process_group\(\) was not called before program "
    r"exit|To enable traceback see: https://pytorch\.org/docs/stable/elastic/errors\.html|Root Cause \(first "
    r"observed failure\):|<NO_OTHER_FAILURES>)[^\n]*$|^[ \t]*(error_file|exitcode|host|time|rank|local_rank)[ \t]*:"
    r"[^\n]*$|^[ \t]*(={20,}|-{20,}|\*{20,})[ \t]*$", case_sensitive=True)


def _without_frames(data):
    """The text with traceback frame lines, caret lines and the lines printed whatever the cause blanked (same
    length: offsets do not matter here)."""
    spans = sorted((m.start(), m.end()) for pattern in (_FRAMES, _BOILERPLATE) for m in pattern.finditer(data))
    merged = []
    for start, end in spans:  # the two patterns may cover one line twice
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    spans = merged
    if not spans:
        return data
    out, last = [], 0
    for start, end in spans:
        out += [data[last:start], b" " * (end - start)]
        last = end
    out.append(data[last:])
    return b"".join(out)


def terms(text):
    """Lower-cased words and identifiers; an identifier also gives its parts (cudaErrorNoDevice -> no, device)."""
    out = []
    for match in _WORD.finditer(_without_frames(linear.utf8(text))):
        word = match.group(0).decode("ascii")
        lower = word.lower()
        if lower not in STOP:
            out.append(lower)
        if "_" in word or (word[:1].islower() and any(c.isupper() for c in word)):
            parts = [p.lower() for piece in word.split("_") for p in _CAMEL.findall(piece)]
            out += [p for p in parts if len(p) > 1 and p not in STOP and p != lower]
    return out


EXCERPT_CHARS = 400  # of a known error's own text, shown beside "similar to" where its source is no web page


@dataclass(frozen=True)
class Document:
    id: str
    category: str
    source: str
    excerpt: str = field(default="", compare=False)


@dataclass(frozen=True)
class Similar:
    category: str
    score: float  # BM25 of the most similar document of this category
    document: Document


class Index:
    def __init__(self, documents):
        """documents: (Document, text) pairs."""
        self.documents = [doc for doc, _ in documents]
        self.frequencies = [Counter(terms(text)) for _, text in documents]
        self.lengths = [sum(f.values()) for f in self.frequencies]
        self.average = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0
        containing = Counter(term for f in self.frequencies for term in f)
        n = len(self.documents)
        self.idf = {term: math.log(1 + (n - k + 0.5) / (k + 0.5)) for term, k in containing.items()}
        self.postings = {}
        for i, f in enumerate(self.frequencies):
            for term in f:
                self.postings.setdefault(term, []).append(i)

    def search(self, text, exclude=frozenset()):
        """Categories by their most similar document, best first; `exclude` drops documents by id."""
        text = linear.utf8(text)
        if len(text) > MAX_QUERY_CHARS:
            text = text[:MAX_QUERY_CHARS // 2] + b"\n" + text[-MAX_QUERY_CHARS // 2:]
        query = set(terms(text))
        scores, shared = Counter(), Counter()
        for term in query:
            idf = self.idf.get(term)
            if idf is None:
                continue
            for i in self.postings[term]:
                tf = self.frequencies[i][term]
                norm = tf + K1 * (1 - B + B * self.lengths[i] / self.average)
                scores[i] += idf * tf * (K1 + 1) / norm
                shared[i] += 1
        best = {}
        for i, score in scores.items():
            doc = self.documents[i]
            if doc.id in exclude or shared[i] < MIN_TERMS or score < MIN_SCORE:
                continue
            if doc.category not in best or score > best[doc.category].score:
                best[doc.category] = Similar(doc.category, round(score, 3), doc)
        return sorted(best.values(), key=lambda s: (-s.score, s.category))


def _examples(path=EXAMPLES_PATH):
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(Document(e["id"], e["category"], e["source"], e["text"][:EXCERPT_CHARS]), e["text"]) for e in entries]


def _playbook_documents():
    docs = []
    for book in load().values():
        causes = " ".join("%s %s" % (c.get("cause", ""), c.get("tell", "")) for c in book.causes
                          if isinstance(c, dict))
        text = " ".join([book.title, book.summary, " ".join(map(str, book.symptoms)), causes])
        docs.append((Document("playbook:" + book.id, book.category, "playbook " + book.id), text))
    return docs


def _knowledge_documents():
    return [(Document("%s:%s" % (entry.table, entry.name), entry.category, entry.source),
             " ".join([entry.name, " ".join(entry.messages), entry.meaning]))
            for entry in knowledge.entries() if entry.category]


def _catalogue_documents(path=CATALOGUE_PATH):
    rows = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    return [(Document("catalogue:%d" % i, row["category"], row["source"], row["text"][:EXCERPT_CHARS]), row["text"])
            for i, row in enumerate(rows)
            if row.get("fallback", True)]  # false: a near copy of a holdout text would answer it from itself


@functools.lru_cache(maxsize=1)
def default_index():
    return Index(_examples() + _playbook_documents() + _knowledge_documents() + _catalogue_documents())
