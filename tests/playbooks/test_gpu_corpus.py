"""The corpus of texts printed by faults made on a real H200 (tests/data/triage_gpu_corpus.jsonl, issue 23).

Each text was printed by a fault of bench/faults/faults.py, run by bench/faults/run_all.py on the device machine;
bench/faults/build_corpus.py split them by groups of near copies into `dev-gpu` (tuned on) and `holdout-gpu`
(measured on the code before the change, then once after it: docs/benchmarks.md); `holdout-gpu-b` holds the
faults of batch b, written after that measurement, less the near copies of earlier texts (`repeat`), and measured
once on the code as it was then. Run with -s for figures.
"""

import importlib.util
import io
import json
from pathlib import Path

from django.core.management import call_command

from cudaweb.playbooks import novelty
from cudaweb.playbooks.matcher import CONFIDENT, triage

REPO = Path(__file__).resolve().parent.parent.parent
CORPUS_PATH = REPO / "tests" / "data" / "triage_gpu_corpus.jsonl"
RECORDED = REPO / "bench" / "faults" / "results"


def _faults():
    spec = importlib.util.spec_from_file_location("faults", REPO / "bench" / "faults" / "faults.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FAULTS


def _corpus(split=None):
    entries = [json.loads(line) for line in CORPUS_PATH.open(encoding="utf-8") if line.strip()]
    return [e for e in entries if split is None or e["split"] == split]


def test_every_text_comes_from_a_fault_script_with_its_command_and_versions():
    faults = _faults()
    entries = _corpus()
    splits = {e["split"] for e in entries}
    assert {"dev-gpu", "holdout-gpu", "holdout-gpu-b", "repeat"} <= splits <= {
        "dev-gpu", "holdout-gpu", "holdout-gpu-b", "holdout-gpu-c", "holdout-gpu-d", "holdout-gpu-e", "repeat"}
    assert all(e["gathered_as"] in ("holdout-gpu-b", "holdout-gpu-c", "holdout-gpu-d", "holdout-gpu-e")
               and e["repeat_of"] for e in entries if e["split"] == "repeat")
    assert len({e["id"] for e in entries}) == len(entries)
    for entry in entries:
        name = entry["source"].split("::", 1)[1]
        assert entry["source"] == "bench/faults/faults.py::" + name and name in faults, entry["id"]
        assert entry["category"] == faults[name]["category"], entry["id"]
        assert entry["command"].endswith("bench/faults/faults.py " + name), entry["id"]
        assert entry["versions"]["torch"].startswith("2.") and entry["versions"]["nccl"], entry["id"]
        assert entry["versions"]["driver"] and entry["versions"]["gpu"] == "NVIDIA H200", entry["id"]
        assert entry["text"].strip()
    recorded = {}
    for path in {e["recorded"] for e in entries}:
        for line in (RECORDED / path).open(encoding="utf-8"):
            run = json.loads(line)
            recorded[run["name"]] = run
    assert all(recorded[e["source"].split("::")[1]]["text"] == e["text"] for e in entries)


def test_at_least_sixty_distinct_failures():
    """Distinct: groups of near copies (the same message and stack with other numbers count once)."""
    texts = [e["text"] for e in _corpus()]
    parent = list(range(len(texts)))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j, _ in novelty.near_copies(texts, texts):
        parent[root(i)] = root(j)
    assert len({root(i) for i in range(len(texts))}) >= 60
    assert len(_corpus("holdout-gpu")) >= 35 and len(_corpus("holdout-gpu-b")) >= 15


def _figures(entries, results):
    top1 = top3 = confident_wrong = 0
    for entry, ranked in zip(entries, results):
        categories = [p["category"] for p in ranked]
        top1 += categories[:1] == [entry["category"]]
        top3 += entry["category"] in categories[:3]
        confident_wrong += bool(ranked) and categories[0] != entry["category"] and ranked[0]["score"] >= CONFIDENT
    return top1, top3, confident_wrong


def test_dev_gpu_with_each_text_left_out_of_the_examples():
    entries = _corpus("dev-gpu")
    results = [triage(e["text"], exclude={e["id"]}).as_dict()["playbooks"] for e in entries]
    top1, top3, wrong = _figures(entries, results)
    print("\ndev-gpu (%d texts, leave-one-out): top-1 %d, top-3 %d, confident wrong %d" % (len(entries), top1, top3,
                                                                                         wrong))
    assert (top1, top3) >= DEV_FLOOR[:2] and wrong <= DEV_FLOOR[2]


def test_the_gpu_holdouts_through_triage_log(tmp_path):
    for split, floor in HOLDOUT_FLOOR.items():
        entries = _corpus(split)
        paths = []
        for entry in entries:
            path = tmp_path / (entry["id"] + ".log")
            path.write_text(entry["text"], encoding="utf-8")
            paths.append(str(path))
        out = io.StringIO()
        call_command("triage_log", *paths, "--json", stdout=out)
        top1, top3, wrong = _figures(entries, [r["playbooks"] for r in json.loads(out.getvalue())])
        print("\n%s (%d texts): top-1 %d, top-3 %d, confident wrong %d" % (split, len(entries), top1, top3, wrong))
        assert top1 >= floor[0] and top3 >= floor[1] and wrong <= floor[2], split


# (top-1, top-3, most confident wrong answers): no regression below the code of issue 32 (2026-12-01). The blind
# figures, measured once each, are in docs/benchmarks.md: these floors came after them. Issue 32 lowered -b, -c, -d
# and repeat: those floors were met only with rules that no development text and no source line supported (written
# from held-out texts: tests/playbooks/test_provenance.py), so they were false; repeat also gained batch e's 23.
DEV_FLOOR = (56, 56, 0)
HOLDOUT_FLOOR = {"holdout-gpu": (41, 41, 0), "holdout-gpu-b": (14, 15, 1), "holdout-gpu-c": (24, 24, 1),
                 "holdout-gpu-d": (43, 43, 1), "repeat": (74, 74, 2),
                 # batch e's blind figure, measured once on 7c9dcd5 (2026-12-01 21:13 UTC), before any rule saw it
                 "holdout-gpu-e": (21, 24, 2)}


def test_batch_d_is_a_fourth_holdout_of_known_categories_and_its_advisories_count_log_warnings():
    batch_d = [f for f in _faults().values() if f["batch"] == "d"]
    library = {p.stem for p in (REPO / "cudaweb" / "playbooks" / "library").glob("*.yaml")}
    assert len(batch_d) >= 70 and {f["category"] for f in batch_d} <= library
    spec = importlib.util.spec_from_file_location("build_corpus", REPO / "bench" / "faults" / "build_corpus.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    assert build.HOLDOUT_OF_BATCH["d"] == "holdout-gpu-d"
    advisory = {"rc": 0, "timed_out": False, "category": "performance",
                "text": "W1201 12:00:01.512000 77 torch/_dynamo/convert_frame.py:1009] [0/4] torch._dynamo hit "
                        "config.recompile_limit (4)\n"}
    assert build.not_shown(advisory) is None
    assert build.not_shown(dict(advisory, text="step 3 loss 0.1\n")) == "ran: exit status 0 and no warning printed"
    assert build.not_shown(dict(advisory, category="oom")) == "ran: exit status 0"
    assert build.not_shown(dict(advisory, rc=1, category="oom")) is None
