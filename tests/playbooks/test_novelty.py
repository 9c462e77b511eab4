"""Holdouts that are new: no holdout text is a near copy of a text of another split or of a fallback example."""

import json
from pathlib import Path

from cudaweb.playbooks import novelty, similarity

DATA = Path(__file__).parent.parent / "data"
CORPORA = (DATA / "triage_corpus.jsonl", DATA / "triage_gpu_corpus.jsonl")


def _entries():
    return [json.loads(line) for path in CORPORA for line in path.open(encoding="utf-8") if line.strip()]


ORDER = ("holdout-a", "holdout-b", "holdout-c", "holdout-d", "holdout-gpu", "holdout-gpu-b",
         "holdout-gpu-c", "holdout-gpu-d", "holdout-gpu-e")  # as gathered, after the dev splits


def _gathered(entry):
    return entry.get("gathered_as") or entry["split"]


def _rank(entry):
    split = _gathered(entry)
    return ORDER.index(split) + 1 if split in ORDER else 0  # dev and dev-gpu: tuned on, before every holdout


def test_a_text_with_other_numbers_paths_and_addresses_is_a_near_copy():
    one = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
           "79.15 GiB of which 1.2 GiB is free. File \"/home/a/train.py\", line 12, at 0x7f3a2b1c 10.0.0.1:29500")
    other = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 3 has a total capacity of "
             "139.80 GiB of which 77 MiB is free. File \"/opt/job/main.py\", line 907, at 0x55d1 192.168.4.20:1234")
    assert novelty.jaccard(novelty.shingles(one), novelty.shingles(other)) >= novelty.NEAR
    assert novelty.near_copies([one], [other])


def test_another_message_is_not_a_near_copy():
    one = "RuntimeError: CUDA error: an illegal memory access was encountered"
    other = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices"
    assert novelty.near_copies([one], [other]) == []
    assert novelty.jaccard(frozenset(), novelty.shingles(one)) == 0.0


def test_no_holdout_text_is_a_near_copy_of_a_text_of_another_split():
    """Of any dev split, or of a holdout gathered before. Splits as gathered: a text moved to `repeat` still counts
    for the split it came from (a holdout measured before a later text was gathered was new when measured)."""
    entries = _entries()
    texts = [e["text"] for e in entries]
    offending = sorted({(entries[i]["id"], entries[j]["id"]) for i, j, _ in novelty.near_copies(texts, texts)
                        if entries[i]["split"].startswith("holdout") and _rank(entries[j]) < _rank(entries[i])})
    assert offending == []


def test_no_fallback_example_is_a_near_copy_of_a_holdout_text():
    examples = [json.loads(line) for line in similarity.EXAMPLES_PATH.open(encoding="utf-8")]
    examples += [{"id": doc.id, "text": text} for doc, text in similarity._catalogue_documents()]
    holdouts = [e for e in _entries() if e["split"].startswith("holdout")]
    found = novelty.near_copies([e["text"] for e in examples], [e["text"] for e in holdouts])
    assert [(examples[i]["id"], holdouts[j]["id"]) for i, j, _ in found] == []
    assert len(examples) >= 160 and len(holdouts) >= 250
