"""Start the watch's driver reads at once, side by side, instead of one after the other as the checks ask.

A watch (--mode watch, issue 30) is a handful of reads, each a process that mostly waits on the driver: NVML's
facts, NVML's fabric facts, the kernel log, nvidia-smi -L and topo -m. On an 8-GPU node each takes a few hundred
milliseconds, so in a row they would spend the watch's 1.5 s alone. `start` runs them in threads; proc.run then
answers a check that asks for the same command with that run's result (proc.AHEAD). `stop` ends what no check
asked for (topo -m on a one-GPU node) and forgets them all, so the next run reads afresh.
"""

import sys
import threading
from concurrent.futures import Future

from agents.cudaprobe import children, proc
from agents.cudaprobe.checks.driver import _driver_query_limit

NVML_CHILDREN = ("agents.cudaprobe.nvml", "agents.cudaprobe.nvml_fabric")


def _started(argv, timeout, env):
    future = Future()

    def read():
        try:
            future.set_result(proc.run_now(argv, timeout, env))
        except BaseException as exc:  # the check that asks gets it, as if it had run the command itself
            future.set_exception(exc)

    threading.Thread(target=read, daemon=True, name="readahead %s" % argv[-1]).start()
    return future


def commands(ctx):
    """(argv, timeout, env) of the reads a watch always makes, with the budgets the checks give them."""
    limit = _driver_query_limit(ctx, 20)
    wanted = [(["dmesg"], 10, ctx.environ), (["nvidia-smi", "-L"], min(limit, 15), ctx.environ),
              (["nvidia-smi", "topo", "-m"], limit, ctx.environ)]
    if ctx.environ.get("CUDAPROBE_NVML") != "0":
        env = children.child_env(ctx)
        wanted += [([sys.executable, "-m", module], limit, env) for module in NVML_CHILDREN]
    return wanted


def start(ctx):
    for argv, timeout, env in commands(ctx):
        proc.AHEAD[tuple(argv)] = _started(argv, timeout, env)


def stop():
    proc.AHEAD.clear()
    proc.kill_all()  # reads no check asked for, still running
