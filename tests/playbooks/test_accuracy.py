"""Accuracy of the triage on the labelled corpus of real error texts (tests/data/triage_corpus.jsonl).

Splits: `dev` (tuned on; also the similarity fallback's examples, cudaweb/playbooks/knowledge/examples.jsonl),
`holdout-a` (gathered before any change of issue 11 and measured once on the code as it was), `holdout-b`
(gathered blind while the rules were tuned, measured once after) and `holdout-c` (gathered blind at the end,
measured once on them) and `holdout-d` (gathered blind after the last change, measured once: the final figure).
`repeat` holds the holdout texts that turned out near copies of a text of an earlier split (bench/corpus_repeats.py,
issue 23): in no holdout figure, not among the examples. docs/benchmarks.md keeps the figures with their dates;
bench/triage_accuracy.py prints them. Run with -s to see the figures here.
"""

import io
import json
from collections import Counter
from pathlib import Path

from django.core.management import call_command

from cudaweb.playbooks import similarity
from cudaweb.playbooks.library import CATEGORIES
from cudaweb.playbooks.matcher import CONFIDENT, triage

CORPUS_PATH = Path(__file__).parent.parent / "data" / "triage_corpus.jsonl"
GPU_CORPUS_PATH = Path(__file__).parent.parent / "data" / "triage_gpu_corpus.jsonl"
NEW_CATEGORIES = {"cublas_cudnn", "cuda_fork", "ddp_unused_parameters", "checkpoint_device", "deterministic_algorithms"}
SPLITS = {"dev", "holdout-a", "holdout-b", "holdout-c", "holdout-d", "repeat"}
HOLDOUTS = ("holdout-a", "holdout-b", "holdout-c", "holdout-d")


def _corpus(split=None):
    entries = [json.loads(line) for line in CORPUS_PATH.open(encoding="utf-8")]
    return [e for e in entries if split is None or e["split"] == split]


def _figures(entries, results):
    top1 = top3 = confident_wrong = 0
    for entry, ranked in zip(entries, results):
        categories = [p["category"] for p in ranked]
        top1 += categories[:1] == [entry["category"]]
        top3 += entry["category"] in categories[:3]
        wrong = bool(ranked) and ranked[0]["category"] != entry["category"]
        confident_wrong += wrong and ranked[0]["score"] >= CONFIDENT
    return top1 / len(entries), top3 / len(entries), confident_wrong


def test_the_corpus_is_real_sourced_and_covers_every_category():
    entries = _corpus()
    assert len(entries) >= 300
    per_category = Counter(e["category"] for e in entries)
    # the five categories of issue 23 are mostly in the GPU corpus (tests/data/triage_gpu_corpus.jsonl)
    # fabric (issue 21) is chosen by the agent's own fabric checks' signatures (sysfs and NVML counters); the corpus
    # holds no log text of it yet; torch_missing (no torch in the node's Python) is chosen by torch.import's signature
    # and importlib's one message (catalogue.yaml)
    chosen_by_signature = {"fabric", "torch_missing"}
    assert set(per_category) == set(CATEGORIES) - NEW_CATEGORIES - chosen_by_signature | {"checkpoint_device"}, \
        per_category
    assert min(n for c, n in per_category.items() if c not in NEW_CATEGORIES) >= 15, per_category
    both = per_category + Counter(json.loads(line)["category"] for line in GPU_CORPUS_PATH.open(encoding="utf-8"))
    assert min(both[c] for c in NEW_CATEGORIES) >= 2, both
    assert all(e["relabelled_from"] == "device_mismatch" and "deserialize object on" in e["text"]
               for e in entries if "relabelled_from" in e)
    assert all(e["source"].startswith("https://github.com/") for e in entries)
    assert {e["split"] for e in entries} == SPLITS
    assert len({e["id"] for e in entries}) == len(entries)
    # one text per page (a standard message, "Torch not compiled with CUDA enabled", recurs across pages)
    assert len({e["source"].rstrip("/").split("#")[0].lower() for e in entries}) == len(entries)
    assert all(len([e for e in entries if e["split"] == s]) >= 50 for s in HOLDOUTS)
    assert all(e["gathered_as"] in HOLDOUTS and e["repeat_of"] for e in entries if e["split"] == "repeat")


def _words(text):
    return " ".join(text.split())


def test_the_fallback_learns_from_the_dev_split_only():
    """The examples are the dev texts, less any whose words are also a holdout's (a standard message recurs on
    several pages), then the GPU corpus's dev-gpu texts: no holdout text can be found in the examples (and none
    is a near copy of one: test_novelty.py)."""
    examples = [json.loads(line) for line in similarity.EXAMPLES_PATH.open(encoding="utf-8")]
    gpu = [json.loads(line) for line in GPU_CORPUS_PATH.open(encoding="utf-8")]
    held = {_words(e["text"]) for e in _corpus() + gpu if e["split"] not in ("dev", "dev-gpu")}
    dev = [e for e in _corpus("dev") if _words(e["text"]) not in held] + [e for e in gpu if e["split"] == "dev-gpu"]
    assert [(e["id"], e["category"], e["source"], e["text"]) for e in examples] == [
        (e["id"], e["category"], e["source"], e["text"]) for e in dev]
    assert not {_words(e["text"]) for e in examples} & held and len(dev) >= 210


def test_dev_accuracy_with_each_text_left_out_of_the_examples():
    entries = _corpus("dev")
    results = [triage(e["text"], exclude={e["id"]}).as_dict()["playbooks"] for e in entries]
    top1, top3, confident_wrong = _figures(entries, results)
    print("\ndev (%d texts, leave-one-out): top-1 %.1f %%, top-3 %.1f %%, confident wrong %d" % (
        len(entries), 100 * top1, 100 * top3, confident_wrong))
    assert top1 >= 0.95 and top3 >= 0.97 and confident_wrong <= 2


def test_triage_log_on_the_holdouts(tmp_path):
    """The holdouts through the command's interface: one object per input, ranked playbooks {id, category, score}."""
    figures = {}
    for split in HOLDOUTS:
        entries = _corpus(split)
        paths = []
        for entry in entries:
            path = tmp_path / (entry["id"] + ".log")
            path.write_text(entry["text"], encoding="utf-8")
            paths.append(str(path))
        out = io.StringIO()
        call_command("triage_log", *paths, "--json", stdout=out)
        results = json.loads(out.getvalue())
        assert [r["input"] for r in results] == paths
        assert all({"id", "category", "score"} <= set(p) for r in results for p in r["playbooks"])
        figures[split] = _figures(entries, [r["playbooks"] for r in results])
        print("\n%s (%d texts): top-1 %.1f %%, top-3 %.1f %%, confident wrong %d" % (
            split, len(entries), 100 * figures[split][0], 100 * figures[split][1], figures[split][2]))
    # no regression below the figures of the final code of 2026-11-30 (docs/benchmarks.md has the blind ones)
    for split, (top1, top3) in FLOOR.items():
        assert figures[split][0] >= top1 - 1e-9 and figures[split][1] >= top3 - 1e-9, split


# raised to the final code of issue 23 (2026-12-01); the figures measured on c28c332 once the near copies had
# moved to `repeat` were holdout-a 62/64 64/64, holdout-b 63/67 66/67, holdout-c 48/53 51/53, holdout-d 56/56 56/56
FLOOR = {"holdout-a": (64 / 64, 64 / 64), "holdout-b": (64 / 67, 66 / 67), "holdout-c": (49 / 53, 51 / 53),
         "holdout-d": (56 / 56, 56 / 56)}
