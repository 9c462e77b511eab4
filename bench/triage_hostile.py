"""Triage time on hostile 1 MiB inputs; prints each case and the worst (target: every case under 1 s).

    python bench/triage_hostile.py [--size BYTES]

The cases are what a log can hold to make a backtracking matcher stall: long digit runs after the OOM message
(the case that took minutes in facts.py), one token repeated, one line without a newline, random bytes (decoded
with replacement, as the command and the page do), many partial matches of the playbook and knowledge patterns,
and a real log repeated to the size. Each is triaged the way `manage.py triage_log` does it.
"""

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cases(size):
    rnd = random.Random(11)
    corpus = [json.loads(line)["text"] for line in (REPO / "tests/data/triage_corpus.jsonl").open(encoding="utf-8")]
    partials = ["CUDA out of memory. Tried to allocate ", "Watchdog caught collective ", "WorkNCCL(SeqNum=",
                "NVRM: Xid (PCI:0000:3b:00): ", "cudaSuccess (", "Return value ", "CUBLAS failure ", "NCCL WARN ",
                "block: [0,0,0], thread: [", "has Tensor Cores", "Expected all tensors", "cudaError", "CUDA_ERROR_"]
    yield "digits after the OOM message", "CUDA out of memory. " + "9" * size
    yield "digits with dots after 'Tried to allocate'", "Tried to allocate " + "1." * (size // 2)
    yield "one token repeated", "cuda " * (size // 5)
    yield "one line, no newline, words", " ".join(rnd.choice(["error", "NCCL", "rank", "GPU", "x"])
                                                  for _ in range(size // 5))[:size]
    yield "random bytes", os.urandom(size).decode("utf-8", "replace")
    yield "many partial matches", "".join(rnd.choice(partials) + str(rnd.randint(0, 999)) + "\n"
                                          for _ in range(size // 30))[:size]
    yield "partial matches on one line", "".join(rnd.choice(partials) for _ in range(size // 20))[:size]
    yield "NCCL WARN file names", ("h:1:2 [0] transport/net_ib.cc:" + "1" * 50 + " NCCL WARN x\n") * (size // 90)
    yield "real logs repeated", ("\n".join(corpus) * (size // sum(map(len, corpus)) + 1))[:size]
    yield "parentheses and brackets", "((((((([[[[[[{{{{{" * (size // 18)
    yield "long identifiers", ("cudaError" + "A" * 5000 + " ") * (size // 5010)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1 << 20)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from cudaweb.playbooks.matcher import triage

    triage("warm up: CUDA out of memory")  # loads the library, the tables and the examples once
    worst = (0.0, "")
    for name, text in cases(args.size):
        started = time.perf_counter()
        result = triage(text)
        took = time.perf_counter() - started
        worst = max(worst, (took, name))
        print("%-42s %8d chars  %7.3f s  first: %s" % (
            name, len(text), took, result.playbooks[0].playbook.id if result.playbooks else "none"))
    print("worst: %.3f s (%s); target < 1 s" % worst)


if __name__ == "__main__":
    main()
