"""GPU worker process: `python -m agents.cudaprobe.worker --serve`. The process protocol, nothing else.

Serving, it imports torch once, then reads one request per line on stdin ({"task": "<module>:<function>",
"args": {...}}), runs that @gpu_task of a check module (registry.resolve_task) and answers each with one result
line (CUDAPROBE_RESULT {...}) on stdout; an exception is reported in the same line, never as a bare traceback,
so the parent can always tell what happened. The parent enforces every budget and kills the worker's process
group when one runs out. What the tasks do lives with their checks in agents/cudaprobe/checks/.
"""

import importlib
import json
import os
import sys
import time
import traceback

from agents.cudaprobe import driver_context, lifeline
from agents.cudaprobe.registry import resolve_task

RESULT_MARKER = "CUDAPROBE_RESULT "
CONTEXT_WAIT_S = 2.0  # after torch's import, for the driver's context thread (0.3-0.5 s on an H200 host)


def _release_cached_memory():
    """Hand the caching allocator's blocks back, so one task's buffers do not count against the next.

    torch.cuda.empty_cache() frees on the devices this process already uses; selecting another device to free
    there would create a context on it (cudaSetDevice does, since CUDA 12), which is what no worker may hold."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    except Exception:
        pass  # best effort: a task's result never depends on it


def run_one(name, args):
    """Run one task; the result, or the exception described in it. A result's "timing" gains task_s (the task's
    own seconds in this worker) and import_s (this worker's torch import), for the report's waterfall."""
    started = time.perf_counter()
    try:
        result = resolve_task(name)(args)
        _release_cached_memory()
    except BaseException as exc:  # the parent needs the reason in the result line, whatever it was
        return {"error": type(exc).__name__, "message": str(exc)[:4000], "traceback": traceback.format_exc()[-8000:]}
    if isinstance(result, dict):
        timing = result.setdefault("timing", {})
        if isinstance(timing, dict):
            timing["task_s"] = time.perf_counter() - started
            if args.get("torch_import_s") is not None:
                timing.setdefault("import_s", args["torch_import_s"])
    return result


def _preload(names):
    """Import the modules a worker's tasks will need (CUDAPROBE_WORKER_PRELOAD, comma separated) before the first
    task; seconds it took, or None when none was asked. A module that fails is left for the task to meet."""
    if not names.strip():
        return None
    started = time.perf_counter()
    for name in filter(None, (n.strip() for n in names.split(","))):
        try:
            importlib.import_module(name)
        except Exception:
            pass
    return time.perf_counter() - started


def reply(result):
    sys.stdout.write(RESULT_MARKER + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()


def serve():
    lifeline.tie()  # first: a worker must not outlive its agent, even one that dies while torch imports
    started = time.perf_counter()
    torch_import_s = preload_s = None
    context = driver_context.start_if_asked()  # the driver's part, in a thread while torch imports
    try:
        import torch  # noqa: F401 - paid once here, while the parent goes on with other checks
        torch_import_s = time.perf_counter() - started
        preload_s = _preload(os.environ.get("CUDAPROBE_WORKER_PRELOAD", ""))
    except BaseException:
        pass  # each task imports torch again and reports the error as its result
    # a driver that hangs must not hold the tasks back: torch meets it again in the first task, under its budget
    context = context.result(timeout=CONTEXT_WAIT_S) if context is not None else None
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            name, args = request["task"], dict(request.get("args") or {})
        except (ValueError, KeyError, TypeError) as exc:
            reply({"error": "BadRequest", "message": str(exc)})
            continue
        if torch_import_s is not None:
            args.setdefault("torch_import_s", torch_import_s)
        if context is not None:
            args.setdefault("driver_context", context)
        result = run_one(name, args)
        if preload_s is not None and isinstance(result, dict) and isinstance(result.get("timing"), dict):
            result["timing"].setdefault("preload_s", preload_s)
        reply(result)
    return 0


if __name__ == "__main__":
    sys.exit(serve())
