"""Write agents/cudaprobe/torch_modules.json: the source files `import torch` (then the training workers' preload,
torch._dynamo) loads from torch's site directory, in the order the import asks for them.

    python3 bench/torch_module_order.py [--check]

The list is the agent's precompile order (agents/cudaprobe/precompile.py) on a host whose torch has no bytecode.
Made in a fresh interpreter with an audit hook on the `import` event, which Python raises as it starts to load a
module not yet loaded; a module of another torch version that the list lacks is compiled by the import itself, so
the list needs remaking only when a torch release reorganises its package. --check says whether the file is current.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "agents" / "cudaprobe" / "torch_modules.json"
PRELOAD = "torch._dynamo"  # agents/cudaprobe/children.py TRAIN_PRELOAD
PROBE = r"""
import json, os, sys
seen = []
sys.addaudithook(lambda event, args: seen.append(args[0]) if event == "import" else None)
import torch
import %s
site = os.path.dirname(os.path.dirname(torch.__file__))
files = []
for name in seen:
    path = getattr(sys.modules.get(name), "__file__", None) or ""
    if path.endswith(".py") and path.startswith(site + os.sep):
        relative = os.path.relpath(path, site)
        if relative not in files:
            files.append(relative)
print(json.dumps({"torch": torch.__version__, "python": "%%d.%%d" %% sys.version_info[:2], "files": files}))
""" % PRELOAD


def order():
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", PROBE], capture_output=True, text=True, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {"made_with": {"torch": found["torch"], "python": found["python"], "by": "bench/torch_module_order.py"},
            "preload": PRELOAD, "files": found["files"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    made = order()
    if args.check:
        current = json.loads(OUT.read_text())
        same = current["files"] == made["files"]
        print("%s: %d files, %s" % (OUT.name, len(current["files"]), "current" if same else "differs (%d now)" %
                                    len(made["files"])))
        sys.exit(0 if same else 1)
    OUT.write_text(json.dumps(made, indent=0) + "\n")
    print("%d files (torch %s) -> %s" % (len(made["files"]), made["made_with"]["torch"], OUT))


if __name__ == "__main__":
    main()
