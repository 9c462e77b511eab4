"""Start the watch's driver reads at once, side by side, instead of one after the other as the checks ask.

A watch (--mode watch, issue 30) is a handful of reads, each a process that mostly waits on the driver: NVML's
facts, NVML's fabric facts, the kernel log, nvidia-smi -L and topo -m. On an 8-GPU node each takes a few hundred
milliseconds, so in a row they would spend the watch's 1.5 s alone. `start` runs them in threads; proc.run then
answers a check that asks for the same command with that run's result (proc.AHEAD). `stop` ends what no check
asked for (topo -m on a one-GPU node) and forgets them all, so the next run reads afresh. Where NVML cannot answer
(no pynvml, no libnvidia-ml), the nvidia-smi reads the checks fall back to start as soon as it has said so.
"""

import json
import sys
import threading
from concurrent.futures import Future

from agents.cudaprobe import children, nvsmi, proc
from agents.cudaprobe.checks.driver import _driver_query_limit

NVML_CHILDREN = ("agents.cudaprobe.nvml", "agents.cudaprobe.nvml_fabric")
_STARTING = threading.RLock()  # both NVML children may fall back to nvidia-smi -q at once: it starts once


def _started(argv, timeout, env, then=None):
    future = Future()

    def read():
        try:
            result = proc.run_now(argv, timeout, env)
            if then is not None:
                then(result)  # before the answer: a check that reads it then finds the fallbacks started
            future.set_result(result)
        except BaseException as exc:  # the check that asks gets it, as if it had run the command itself
            future.set_exception(exc)

    threading.Thread(target=read, daemon=True, name="readahead %s" % argv[-1]).start()
    return future


def commands(ctx):
    """(argv, timeout, env) of the reads a watch always makes, with the budgets the checks give them."""
    limit = _driver_query_limit(ctx, 20)
    return [(["dmesg"], 10, ctx.environ), (["nvidia-smi", "-L"], min(limit, 15), ctx.environ),
            (["nvidia-smi", "topo", "-m"], limit, ctx.environ)]


def fallbacks(ctx, module):
    """The nvidia-smi reads the checks make where this NVML child cannot answer."""
    limit = _driver_query_limit(ctx, 20)
    if module == "agents.cudaprobe.nvml":
        wanted = [["-q"], ["--query-gpu=" + nvsmi.QUERY_FIELDS, "--format=csv"],
                  ["--query-compute-apps=" + nvsmi.APPS_FIELDS, "--format=csv"]]
    else:
        wanted = [["nvlink", "-s"], ["nvlink", "-e"], ["-q"]]
    return [(["nvidia-smi"] + args, limit, ctx.environ) for args in wanted]


def _nvml_failed(result):
    try:
        return "error" in json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return True


def _ahead(argv, timeout, env, then=None):
    with _STARTING:
        if tuple(argv) not in proc.AHEAD:
            proc.AHEAD[tuple(argv)] = _started(argv, timeout, env, then)


def start(ctx):
    for argv, timeout, env in commands(ctx):
        _ahead(argv, timeout, env)
    if ctx.environ.get("CUDAPROBE_NVML") == "0":
        for argv, timeout, env in fallbacks(ctx, NVML_CHILDREN[0]) + fallbacks(ctx, NVML_CHILDREN[1]):
            _ahead(argv, timeout, env)
        return
    env = children.child_env(ctx)
    for module in NVML_CHILDREN:
        argv = [sys.executable, "-m", module]

        def then(result, module=module, key=tuple(argv)):
            with _STARTING:
                if _nvml_failed(result) and key in proc.AHEAD:  # not after stop(): that run has ended
                    for fallback, timeout, fallback_env in fallbacks(ctx, module):
                        _ahead(fallback, timeout, fallback_env)

        _ahead(argv, _driver_query_limit(ctx, 20), env, then)


def stop():
    with _STARTING:
        proc.AHEAD.clear()
    proc.kill_all()  # reads no check asked for, still running
