"""Near copies among labelled texts: a holdout must hold texts its tuning never saw, not the same message again.

Two texts are near copies when their word 5-shingles, after normalising what changes from run to run (paths,
addresses, hex, digits), overlap with a Jaccard index of NEAR or more: the same message and stack with other
numbers, another rank, another host. Used by the corpus tests and bench/faults/build_corpus.py.
"""

import re

NEAR = 0.5
SHINGLE = 5
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\w.~+-]*/)+[\w.+-]*")
_ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\[[0-9a-fA-F:]{2,}\](?::\d+)?")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{8,}\b")
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"[a-z_]+|[^\sa-z_]")


def normalise(text):
    """Paths, addresses, hex and numbers replaced by placeholders; lower case; words and symbols."""
    text = _ADDRESS.sub(" ADDR ", text)
    text = _PATH.sub(" PATH ", text)
    text = _HEX.sub(" HEX ", text)
    text = _DIGITS.sub("0", text).lower()
    return [w for w in _WORD.findall(text) if w not in "^~-=*"]


def shingles(text, size=SHINGLE):
    words = normalise(text)
    if len(words) <= size:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i:i + size]) for i in range(len(words) - size + 1))


def jaccard(a, b):
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def near_copies(texts, others, threshold=NEAR):
    """(i, j, similarity) for each text i of `texts` and j of `others` that are near copies."""
    mine = [shingles(t) for t in texts]
    theirs = [shingles(t) for t in others]
    index = {}
    for j, s in enumerate(theirs):
        for shingle in s:
            index.setdefault(shingle, []).append(j)
    found = []
    for i, s in enumerate(mine):
        shared = {}
        for shingle in s:
            for j in index.get(shingle, ()):
                shared[j] = shared.get(j, 0) + 1
        for j, n in shared.items():
            similarity = n / (len(s) + len(theirs[j]) - n)
            if similarity >= threshold:
                found.append((i, j, round(similarity, 3)))
    return found
