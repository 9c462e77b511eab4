"""The similarity fallback alone on every holdout text (none is a document of its index): how well it reads a
message no rule names. Prints figures, never the texts.

    python bench/triage_fallback.py [--without-catalogue]

--without-catalogue: the index as it was before cudaweb/playbooks/catalogue.yaml joined it (issue 23).
"""

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPORA = ("tests/data/triage_corpus.jsonl", "tests/data/triage_gpu_corpus.jsonl")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--without-catalogue", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from cudaweb.playbooks import similarity

    documents = similarity._examples() + similarity._playbook_documents() + similarity._knowledge_documents()
    if not args.without_catalogue:
        documents += similarity._catalogue_documents()
    index = similarity.Index(documents)
    figures = {}
    for corpus in CORPORA:
        for line in (REPO / corpus).read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if not entry["split"].startswith("holdout"):
                continue
            categories = [found.category for found in index.search(entry["text"])]
            row = figures.setdefault("gpu" if "gpu" in corpus else "public", [0, 0, 0])
            row[0] += 1
            row[1] += categories[:1] == [entry["category"]]
            row[2] += entry["category"] in categories[:3]
    for name, (n, top1, top3) in sorted(figures.items()):
        print("%-6s %3d holdout texts: top-1 %d (%.1f %%), top-3 %d (%.1f %%)" % (
            name, n, top1, 100.0 * top1 / n, top3, 100.0 * top3 / n))


if __name__ == "__main__":
    main()
