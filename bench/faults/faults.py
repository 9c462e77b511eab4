"""Faults a training job meets, each made for real inside this process (never a GPU setting): one function a fault.

    python3 bench/faults/faults.py NAME          # one fault; what it prints is the text of the corpus
    python3 bench/faults/faults.py --list        # name, category, launcher, environment as JSON lines

Every fault is registered with the playbook category an operator needs for it (set when the fault was written,
before any triage ran on its text), the environment it runs under, and how it is launched: `python` (this file),
`torchrun` (N local workers of this file; each worker runs the function) or `child` (the function starts its own
processes). Batch "b" was written after the first blind measurement, for a second blind holdout (its categories
set before it ran, like the first's); batch "c", with mechanisms and API paths of neither, for a third
(holdout-gpu-c); batch "d", each fault aimed at a final message no text of a, b or c printed, for a fourth
(holdout-gpu-d); batch "e", aimed the same way past every text of a to d, for a fifth (holdout-gpu-e).
bench/faults/run_all.py runs them all (or one batch: --batch e) and keeps each text with its command and the
versions.
Memory-filling faults are `serial`: run_all.py runs them alone, so they cannot starve the others.

This file is the registry's face: the faults live by batch in faults_a1.py to faults_e.py (a batch too long for one
file in two or three, in file order), the registry and the bodies several batches share in faults_shared.py.
Importing this module imports them all, in the order the faults were written (--list and run_all.py keep it).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the batches beside this file, however it is loaded
from faults_shared import FAULTS, fault  # noqa: E402,F401 (the registry, for the callers of this module)
import faults_a1, faults_a2, faults_a3, faults_b, faults_c, faults_d1, faults_d2, faults_e  # noqa: E402,F401,E401


def _list():
    for item in FAULTS.values():
        print(json.dumps({k: v for k, v in item.items() if k != "fn"}))


def main(argv):
    if argv[1:] == ["--list"]:
        _list()
        return
    if len(argv) != 2 or argv[1] not in FAULTS:
        sys.exit("usage: faults.py NAME | --list (%d faults)" % len(FAULTS))
    FAULTS[argv[1]]["fn"]()


if __name__ == "__main__":
    main(sys.argv)
