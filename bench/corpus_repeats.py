"""Move the holdout texts that are near copies of a text in another split to the split `repeat`.

    python bench/corpus_repeats.py tests/data/triage_corpus.jsonl [--write]

A holdout measures texts nobody tuned on; a text with the same message and stack as one in an earlier split
(cudaweb.playbooks.novelty: normalised word 5-shingles, Jaccard >= 0.5) is not new. Of a near-copy pair in two
splits the later split's text moves (dev < holdout-a < holdout-b < holdout-c < holdout-d); splits are compared as
gathered, so a text repeating one that moved still moves, and near copies within one split stay. A moved text keeps its former split
(`gathered_as`) and the ids it repeats (`repeat_of`); it is in no holdout figure and not among the examples.
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cudaweb.playbooks import novelty  # noqa: E402

ORDER = ["dev", "holdout-a", "holdout-b", "holdout-c", "holdout-d"]


def rank(entry):
    split = entry.get("gathered_as") or entry["split"]
    return ORDER.index(split) if split in ORDER else len(ORDER)


def move_repeats(entries):
    texts = [e["text"] for e in entries]
    pairs = novelty.near_copies(texts, texts)
    for i, j, _ in pairs:
        a, b = entries[i], entries[j]
        if rank(a) > rank(b):  # a was gathered after b, in another split: a is not new
            if a["split"] != "repeat":
                a["gathered_as"], a["split"] = a["split"], "repeat"
            a["repeat_of"] = sorted(set(a.get("repeat_of", [])) | {b["id"]})
    return entries


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    path = Path(args.corpus)
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    before = {s: sum(e["split"] == s for e in entries) for s in ORDER}
    move_repeats(entries)
    for split in ORDER:
        now = sum(e["split"] == split for e in entries)
        print("%-10s %3d -> %3d" % (split, before[split], now))
    print("repeat     %3d" % sum(e["split"] == "repeat" for e in entries))
    if args.write:
        path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries), encoding="utf-8")


if __name__ == "__main__":
    main()
