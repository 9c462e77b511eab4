"""Compile torch's modules into the agent's bytecode cache ahead of the workers, on a host's first run.

With the cache empty (bytecode.py) every worker compiles the modules `import torch` loads as it reaches them, on one
core, and the three workers of a run each compile the same ones: 3.1-3.3 s of a first run on a lent H200 host
(issue 22). This compiles them on several cores, in the order the import asks for them (torch_modules.json, made by
bench/torch_module_order.py), so that the workers mostly find their bytecode written. A file the list names that
this host's torch lacks is skipped; a module the list lacks is compiled by the import, as before. py_compile writes
each file atomically (a temporary file renamed), so a worker compiling the same module at the same moment is
harmless, and Python checks each .pyc against its source's mtime and size before it uses it.

    python -m agents.cudaprobe.precompile JOBS   # under the workers' PYTHONPYCACHEPREFIX; prints one JSON line
"""

import importlib.util
import json
import multiprocessing
import os
import pkgutil
import py_compile
import signal
import subprocess
import sys
import time

MAX_JOBS = 8


def jobs_for(cpus):
    """Processes to compile with: a core is left to the workers' imports, and a few cores do it all."""
    return max(1, min(MAX_JOBS, (cpus or 1) - 1))


def wanted(environ):
    """False when CUDAPROBE_PRECOMPILE turns it off (the cache itself stays: CUDAPROBE_BYTECODE_CACHE)."""
    return environ.get("CUDAPROBE_PRECOMPILE", "").strip().lower() not in ("off", "0", "no", "false")


def listed():
    return json.loads(pkgutil.get_data("agents.cudaprobe", "torch_modules.json"))["files"]


def files(site, names=None):
    """The listed files present under `site` (the directory holding torch), in the list's order."""
    names = listed() if names is None else names
    return [path for path in (os.path.join(site, name) for name in names) if os.path.isfile(path)]


def start(env):
    """Start the compile (the workers' environment: their interpreter, PYTHONPATH and cache) in its own session."""
    jobs = jobs_for(len(os.sched_getaffinity(0)))
    return subprocess.Popen([sys.executable, "-m", "agents.cudaprobe.precompile", str(jobs)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def finish(process):
    """What the compile did ({files, jobs, seconds}), or {"stopped": ...} when the run ended first (it is killed:
    no process outlives the run, and what it wrote stays for the next run)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        process.stdout.close()
        return {"stopped": "still compiling when the run ended"}
    out = process.stdout.read().decode("utf-8", "replace")
    process.stdout.close()
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"stopped": "exit status %s, no figures printed" % process.returncode}


def _compile(path):
    try:
        py_compile.compile(path, cfile=importlib.util.cache_from_source(path), doraise=True)
    except (OSError, py_compile.PyCompileError, SyntaxError, ValueError):
        return 0  # the import meets the same error and reports it as it always did
    return 1


def site_of_torch():
    """The directory that holds the torch package (not imported), or None."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(os.path.dirname(spec.origin))


def main(argv):
    started = time.monotonic()
    jobs = int(argv[0]) if argv else jobs_for(os.cpu_count())
    site = site_of_torch()
    todo = files(site) if site and sys.pycache_prefix else []
    compiled = 0
    if todo:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            compiled = sum(pool.imap(_compile, todo, chunksize=4))
    print(json.dumps({"files": compiled, "jobs": jobs, "seconds": round(time.monotonic() - started, 3)}),
          flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
