"""Accuracy of `manage.py triage_log --json` on labelled real error texts; prints figures, never the texts.

    python bench/triage_accuracy.py [--split S] [--confident 1.0] [--repo DIR] CORPUS.jsonl...
    python bench/triage_accuracy.py [--repo DIR]      # every split of both corpora, each with its exposure

Beside every figure it prints what the rules have been exposed to on that split (tests/data/split_exposure.yaml:
development, or its one blind measurement and what came after it), so no figure reads as blind that is not.

Runs the command as a user would (one process, every entry a file), so the figure is the interface's own.
--repo runs another checkout's manage.py (the blind protocol measures a holdout on the code as it was before
tuning). Top-1: the right category ranked first; top-3: among the first three; "confident wrong": a wrong
category ranked first with a score at or above the confident line.
"""

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPORA = (REPO / "tests" / "data" / "triage_corpus.jsonl", REPO / "tests" / "data" / "triage_gpu_corpus.jsonl")
EXPOSURE = REPO / "tests" / "data" / "split_exposure.yaml"


def exposure_of(split):
    """One line: what the rules have been exposed to on this split (unknown splits say so)."""
    import yaml

    known = yaml.safe_load(EXPOSURE.read_text(encoding="utf-8")) or {}
    if split not in known:
        return "exposure: not recorded in %s" % EXPOSURE.name
    item = known[split]
    blind = item.get("blind")
    first = " | blind once %s at %s: %s" % (blind["date"], blind["code"], blind["top1"]) if blind else ""
    return "%s%s | %s" % (item["kind"], first, " ".join(str(item["exposure"]).split()))


def entries_of(paths, split=None):
    entries = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                entry = json.loads(line)
                if split is None or entry.get("split") == split:
                    entries.append(entry)
    return entries


def triage_all(entries, repo=REPO):
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, entry in enumerate(entries):
            path = Path(tmp) / ("%04d.log" % i)
            path.write_text(entry["text"], encoding="utf-8")
            files.append(str(path))
        env = dict(os.environ, DJANGO_SETTINGS_MODULE="cudaweb.settings", CUDAWEB_VAR_DIR=tmp,
                   SECRET_KEY=os.environ.get("SECRET_KEY") or secrets.token_hex(32))
        done = subprocess.run([sys.executable, str(Path(repo) / "manage.py"), "triage_log", "--json", *files],
                              cwd=repo, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit("triage_log failed:\n" + done.stderr[-4000:])
    return json.loads(done.stdout)


def triage_in_process(entries):
    """Leave-one-out: each entry triaged with itself left out of the similarity examples (dev figures)."""
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from cudaweb.playbooks.matcher import triage

    return [triage(entry["text"], exclude={entry["id"]}).as_dict() for entry in entries]


def score(entries, results, confident):
    top1 = top3 = confident_wrong = 0
    misses, by_category = [], Counter()
    for entry, result in zip(entries, results):
        ranked = result["playbooks"]
        categories = [p["category"] for p in ranked]
        right_first = categories[:1] == [entry["category"]]
        top1 += right_first
        top3 += entry["category"] in categories[:3]
        if not right_first:
            by_category[entry["category"]] += 1
            misses.append("%s -> %s" % (entry["id"], ",".join(categories[:3]) or "no match"))
            if ranked and ranked[0]["score"] >= confident:
                confident_wrong += 1
    return {"n": len(entries), "top1": top1, "top3": top3, "confident_wrong": confident_wrong,
            "misses": misses, "misses_by_category": dict(by_category)}


def line_of(figures, confident):
    n = figures["n"]
    if not n:
        return "0 texts"
    return "%d texts: top-1 %d (%.1f %%), top-3 %d (%.1f %%), wrong first at score >= %.2f: %d" % (
        n, figures["top1"], 100.0 * figures["top1"] / n, figures["top3"], 100.0 * figures["top3"] / n,
        confident, figures["confident_wrong"])


def every_split(paths, args):
    """Each split of the corpora measured in one triage_log run, printed with its exposure."""
    entries = entries_of(paths)
    results = triage_all(entries, args.repo)
    for split in sorted({e["split"] for e in entries}):
        chosen = [(e, r) for e, r in zip(entries, results) if e["split"] == split]
        figures = score([e for e, _ in chosen], [r for _, r in chosen], args.confident)
        print("%-14s %s" % (split, line_of(figures, args.confident)))
        print("%-14s   %s" % ("", exposure_of(split)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="*")
    parser.add_argument("--split")
    parser.add_argument("--confident", type=float, default=1.0)
    parser.add_argument("--repo", default=str(REPO))
    parser.add_argument("--leave-one-out", action="store_true",
                        help="in this process, each entry left out of the similarity examples (for dev entries)")
    parser.add_argument("--show-misses", action="store_true", help="list missed ids (not for a blind holdout)")
    args = parser.parse_args()
    if not args.split and not args.leave_one_out:
        return every_split(args.corpus or [str(p) for p in CORPORA], args)
    entries = entries_of(args.corpus or [str(p) for p in CORPORA], args.split)
    results = triage_in_process(entries) if args.leave_one_out else triage_all(entries, args.repo)
    figures = score(entries, results, args.confident)
    print(line_of(figures, args.confident))
    if args.split:
        print("exposure: %s" % exposure_of(args.split))
    print("misses by category: %s" % json.dumps(figures["misses_by_category"], sort_keys=True))
    if args.show_misses:
        print("\n".join(figures["misses"]))


if __name__ == "__main__":
    main()
