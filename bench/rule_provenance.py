"""What each triage rule was written from, and what a figure was worth without the rules written from its texts.

    python bench/rule_provenance.py                       # every pattern's support; those with none
    python bench/rule_provenance.py --without-leaked 823ed23 --split holdout-gpu

The first form counts, for every playbook pattern, the development texts (dev, dev-gpu), catalogue texts and
held-out texts it matches (cudaweb/playbooks/provenance.py), lists the patterns no development text or catalogue
text supports and the catalogue texts that are near copies of held-out texts (by index and held-out id: no
held-out text is printed). The second checks out REV, removes the patterns REV added that match no development
text of REV's corpus but match texts of SPLIT, and measures SPLIT on that checkout with bench/triage_accuracy.py:
the figure SPLIT would have had from rules written on development texts only (issue 32).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _git(*args, cwd=REPO):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def _patterns_of(rev, path):
    try:
        data = yaml.safe_load(_git("show", "%s:%s" % (rev, path))) or {}
    except subprocess.CalledProcessError:
        return []
    return [p["regex"] for p in ((data.get("match") or {}).get("patterns") or [])]


def added_by(rev):
    """The patterns commit REV added to the playbooks."""
    files = _git("show", "--name-only", "--format=", rev, "--", "cudaweb/playbooks/library").split()
    return {regex for f in files for regex in set(_patterns_of(rev, f)) - set(_patterns_of(rev + "^", f))}


def leaked(tree, added, split):
    """Of `added`, the patterns matching no development text of the checkout's corpus but some text of `split`."""
    from cudaweb.playbooks import linear

    entries = [json.loads(line) for name in ("triage_corpus.jsonl", "triage_gpu_corpus.jsonl")
               for line in (Path(tree) / "tests" / "data" / name).read_text(encoding="utf-8").splitlines()
               if line.strip()]
    dev = [linear.utf8(e["text"]) for e in entries if e["split"] in ("dev", "dev-gpu")]
    held = [linear.utf8(e["text"]) for e in entries if e["split"] == split]
    out = set()
    for regex in added:
        compiled = linear.compile(regex)
        if not any(compiled.search(t) for t in dev) and any(compiled.search(t) for t in held):
            out.add(regex)
    return out


def without_leaked(rev, split):
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        _git("worktree", "add", "-q", "--detach", str(tree), rev)
        try:
            gone = leaked(tree, added_by(rev), split)
            removed = 0
            for path in sorted((tree / "cudaweb" / "playbooks" / "library").glob("*.yaml")):
                kept = []
                for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
                    found = re.match(r'\s*- \{regex: (".*"), weight: [\d.]+\}\s*$', line)
                    if found and yaml.safe_load(found.group(1)) in gone:
                        removed += 1
                        continue
                    kept.append(line)
                path.write_text("".join(kept), encoding="utf-8")
            print("%s: %d patterns added match no development text but match %s; removed %d" % (
                rev, len(gone), split, removed))
            for regex in sorted(gone):
                print("  %s" % regex)
            corpus = tree / "tests" / "data" / "triage_gpu_corpus.jsonl"
            if split in {"dev", "holdout-a", "holdout-b", "holdout-c", "holdout-d", "repeat"}:
                corpus = tree / "tests" / "data" / "triage_corpus.jsonl"
            subprocess.run([sys.executable, str(REPO / "bench" / "triage_accuracy.py"), "--repo", str(tree),
                            "--split", split, str(corpus)], check=True)
        finally:
            _git("worktree", "remove", "--force", str(tree))


def report():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from cudaweb.playbooks import library, provenance

    found = provenance.support(library.load().values())
    bare = [s for s in found if not s.sourced]
    print("%d patterns: %d supported by a development text, %d by a catalogue text only, %d by neither" % (
        len(found), sum(s.development > 0 for s in found), sum(s.development == 0 and s.catalogue > 0 for s in found),
        len(bare)))
    for s in bare:
        print("  %-24s held-out texts matched: %3d  %s" % (s.playbook, s.held_out, s.regex[:90]))
    copies = provenance.catalogue_copies_of_held_out()
    print("%d catalogue texts are near copies of held-out texts" % len({i for i, _, _ in copies}))
    for i, held_id, similarity in copies:
        print("  catalogue #%d ~ %s (%.2f)" % (i, held_id, similarity))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--without-leaked", metavar="REV")
    parser.add_argument("--split", default="holdout-gpu")
    args = parser.parse_args()
    without_leaked(args.without_leaked, args.split) if args.without_leaked else report()


if __name__ == "__main__":
    main()
