"""Run every fault of faults.py, each in its own processes under a timeout, and keep what it printed.

    OUT=/dir python3 bench/faults/run_all.py [--jobs 8] [--batch c] [NAME ...]

Writes $OUT/gpu_faults.jsonl: one object a fault, {name, category, command, launcher, rc, seconds, timed_out,
text, versions}; `command` is the exact command line (with its environment) that printed `text` (stdout and
stderr together, as a terminal shows them). Faults that fill the GPU's memory run alone, before the others.
Each result is also appended to $OUT/gpu_faults.partial.jsonl as it finishes; on SIGTERM (an outer timeout) the
faults still running are ended by their process groups and that file is what is left.
NCCL_NVLS_ENABLE=0 is kept in every fault's environment.
"""

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import faults  # noqa: E402

MAX_TEXT = 24 * 1024  # the head and the tail of a longer output (a log repeats itself)
FIRST_PORT = 29711
RUNNING = {}  # pid -> Popen of every fault still running: ended by their process groups on SIGTERM
RUNNING_LOCK = threading.Lock()


def versions():
    code = ("import json, torch, platform; d = {'python': platform.python_version(), 'torch': torch.__version__, "
            "'cuda': torch.version.cuda, 'cudnn': torch.backends.cudnn.version()}\n"
            "try:\n d['nccl'] = '.'.join(map(str, torch.cuda.nccl.version()))\nexcept Exception as e:\n d['nccl'] = None\n"
            "d['gpu'] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None\nprint(json.dumps(d))")
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
    try:
        out["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        out["driver"] = None
    return out


def command_of(item):
    script = "bench/faults/faults.py"
    if item["launcher"] == "torchrun":
        return ["python3", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=%d" % item["nproc"],
                script, item["name"]]
    return ["python3", script, item["name"]]


def run_one(item, port, repo):
    argv = command_of(item)
    env = dict(os.environ, PYTHONUNBUFFERED="1", NCCL_NVLS_ENABLE="0", FAULT_PORT=str(port), **item["env"])
    shown = " ".join(["%s=%s" % (k, shlex.quote(v)) for k, v in sorted(item["env"].items())] + argv)
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable] + argv[1:], cwd=repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    with RUNNING_LOCK:
        RUNNING[proc.pid] = proc
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=item["timeout"])
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    finally:
        with RUNNING_LOCK:
            RUNNING.pop(proc.pid, None)
    text = out.decode("utf-8", "replace")
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT // 2] + "\n[...]\n" + text[-MAX_TEXT // 2:]
    return {"name": item["name"], "category": item["category"], "command": shown, "launcher": item["launcher"],
            "note": item["note"], "rc": proc.returncode, "seconds": round(time.monotonic() - start, 1),
            "timed_out": timed_out, "text": text}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--batch", choices=sorted({f["batch"] for f in faults.FAULTS.values()}),
                        help="only the faults of this batch (faults.py --list shows each fault's)")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpu-faults"))
    parser.add_argument("--budget", type=float, default=600.0, help="seconds; faults not started by then are skipped")
    args = parser.parse_args()
    repo = HERE.parent.parent
    items = [faults.FAULTS[n] for n in args.names] if args.names else list(faults.FAULTS.values())
    items = [i for i in items if args.batch is None or i["batch"] == args.batch]
    ports = {item["name"]: FIRST_PORT + 3 * i for i, item in enumerate(items)}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    found = versions()
    print("versions:", json.dumps(found), flush=True)
    results = []
    partial = (out_dir / "gpu_faults.partial.jsonl").open("w", encoding="utf-8")
    partial_lock = threading.Lock()

    def stop(signum, frame):  # an outer timeout: each fault's own session would outlive us, so end them first
        with RUNNING_LOCK:
            for pid in list(RUNNING):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        partial.flush()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    deadline = time.monotonic() + args.budget

    def one(item):
        if time.monotonic() > deadline:
            print("%-52s skipped (budget)" % item["name"], flush=True)
            return None
        result = run_one(item, ports[item["name"]], repo)
        result["versions"] = found
        print("%-52s rc=%s %5.1fs%s" % (item["name"], result["rc"], result["seconds"],
                                        " TIMEOUT" if result["timed_out"] else ""), flush=True)
        with partial_lock:  # each result as it comes, so a run cut short still leaves what it printed
            partial.write(json.dumps(result) + "\n")
            partial.flush()
        return result

    results += [one(i) for i in items if i["serial"]]  # alone, first: they fill the GPU's memory
    with ThreadPoolExecutor(args.jobs) as pool:
        results += list(pool.map(one, [i for i in items if not i["serial"]]))
    results = [r for r in results if r is not None]
    partial.close()
    with (out_dir / "gpu_faults.jsonl").open("w", encoding="utf-8") as fh:
        for result in sorted(results, key=lambda r: r["name"]):
            fh.write(json.dumps(result) + "\n")
    print("%d of %d faults run, written to %s" % (len(results), len(items), out_dir / "gpu_faults.jsonl"))


if __name__ == "__main__":
    main()
