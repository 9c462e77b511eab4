"""How the checks judge what GPU tasks return: error texts to signatures, the one failure helper for a task that
did not succeed, and the per-GPU figures (worst GPU, slow siblings)."""

import statistics

from agents.cudaprobe import children, expectations
from agents.cudaprobe.model import FAIL, PASS, WARN, Outcome, failed

# Lower-cased needles in the error text and the ranks' NCCL_DEBUG=INFO logs -> signature; the first match wins, so
# the specific NCCL causes come before "nccl error". NCCL's own strings (NVIDIA/nccl src/bootstrap.cc,
# src/misc/socket.cc, src/os/linux.cc, src/misc/shmutils.cc, src/misc/ibvwrap.cc, src/transport/net_ib) across
# versions 2.14-2.30; see docs/adr/0005-judging-against-expectations.md for the sources.
CUDA_ERROR_SIGNATURES = (
    ("out of memory", "oom"),
    ("busy or unavailable", "compute_mode_busy"),
    ("illegal memory access", "illegal_access"),
    ("misaligned address", "illegal_access"),
    ("device-side assert", "illegal_access"),
    ("no kernel image is available", "arch_not_in_build"),
    ("forward compatibility", "driver_too_old_for_build"),
    ("driver version is insufficient", "driver_too_old_for_build"),
    ("no socket interface found", "nccl_bad_interface"),
    ("net/socket : no interface found", "nccl_bad_interface"),
    ("no usable listening interface found", "nccl_bad_interface"),
    ("is neither af_inet", "nccl_bad_interface"),
    ("failed to initialize any net plugin", "nccl_bad_interface"),
    ("unable to find address for", "bad_interface"),  # gloo: GLOO_SOCKET_IFNAME names no interface
    ("shared memory segment", "nccl_shm_too_small"),
    ("failed to extend /dev/shm", "nccl_shm_too_small"),
    ("failed to create shared memory file", "nccl_shm_too_small"),
    ("call to ibv_", "nccl_ib_error"),  # not "NET/IB": "NET/IB : No device found." is a healthy host's INFO
    ("ibv_modify_qp failed", "nccl_ib_error"),
    ("ibv_reg_mr", "nccl_ib_error"),
    ("got completion from peer", "nccl_ib_error"),
    ("got completion with error", "nccl_ib_error"),
    ("local catastrophic error", "nccl_ib_error"),
    ("transport retry counter exceeded", "nccl_ib_error"),
    ("address already in use", "rendezvous_port_in_use"),
    ("eaddrinuse", "rendezvous_port_in_use"),
    ("no route to host", "nccl_no_route"),
    ("connection refused", "nccl_peer_unreachable"),
    ("exceeded error retry count", "nccl_peer_unreachable"),
    ("exceeded retries", "nccl_peer_unreachable"),
    ("connection closed by remote peer", "nccl_peer_unreachable"),
    ("socket timeout", "rendezvous_timeout"),
    ("diststoreerror", "rendezvous_timeout"),
    ("ncclsystemerror", "nccl_network"),
    ("ncclremoteerror", "nccl_network"),
    ("nccl error", "nccl_failed"),
    ("watchdog caught collective operation timeout", "nccl_hang"),
)


def signature_for_error(text, default):
    lowered = (text or "").lower()
    for needle, signature in CUDA_ERROR_SIGNATURES:
        if needle in lowered:
            return signature
    return default


def all_ok(outcomes):
    return all(o.ok for o in outcomes)


def task_failure(outcomes, what, default_signature, hang_signature=None):
    """The failed Outcome of a GPU task that did not succeed on one rank or several.

    A rank's own error names the cause (its message leads, its text picks the signature); a hang is reported
    only when no rank said why, since a rank waiting for a dead peer hangs too.
    """
    outcomes = list(outcomes) if isinstance(outcomes, (list, tuple)) else [outcomes]
    text = "\n".join(o.evidence() for o in outcomes)
    if any(o.timed_out for o in outcomes) and not any(o.error for o in outcomes):
        killed = "the child was killed" if len(outcomes) == 1 else "every rank was killed"
        return failed("%s did not finish within its budget; %s" % (what, killed), evidence=text,
                      signatures=[hang_signature or default_signature + "_hang"])
    messages = [o.result.get("message", "") for o in outcomes if o.result and o.error]
    detail = messages[0] if messages else (text[-300:] or "exit %s" % outcomes[0].command.returncode)
    return failed("%s failed: %s" % (what, detail[:300]), evidence=text,
                  signatures=[signature_for_error(text, default_signature)])


def slow_siblings(values, ratio=0.85):
    """Indices whose figure falls below `ratio` x the median of all GPUs of this host."""
    if len(values) < 2:
        return []
    median = statistics.median(values.values())
    return sorted(k for k, v in values.items() if v < ratio * median)


def per_gpu_metrics(metrics, name, values):
    """Record the worst GPU under `name` (what gates a node) and each GPU under name.gpuN."""
    if not values:
        return
    metrics[name] = round(min(values.values()), 2)
    for index, value in values.items():
        metrics["%s.gpu%s" % (name, index)] = round(value, 2)


def reference(ctx):
    """(SKU row or None, model name) of this host's GPUs, from the driver's list; a mixed host has no reference."""
    names = sorted({g["name"] for g in ctx.facts.get("driver_gpus") or []})
    if len(names) != 1:
        return None, " + ".join(names) or "an unknown GPU"
    return expectations.sku_for(names[0]), names[0]


def busy_gpus(ctx, entries, involved=()):
    """{gpu: why} for the GPUs another process computed on while `entries` (per-GPU task results with "activity")
    were measured. Ours are the pool's workers; where NVML lists none of ours (another PID namespace), more than
    one process on a GPU we hold means someone else was there."""
    ours = children.our_pids(ctx)
    busy = {}
    for entry in entries:
        for snap in ((entry.get("activity") or {}).get(moment) for moment in ("before", "after")):
            if not snap or "pids" not in snap:
                continue  # no NVML in the worker: unknown, so nothing is claimed
            pids = set(snap["pids"])
            mine = ours | {snap.get("self")}
            others = sorted(pids - mine) if pids & mine or len(pids) > 1 else []
            if others:
                busy[entry["index"]] = "process %s computing on it" % ", ".join(map(str, others))
    # GPUs an earlier check of this run found busy, when this measurement involves them too
    for gpu in involved:
        why = (ctx.facts.get("busy_gpus") or {}).get(str(gpu))
        if why and gpu not in busy:
            busy[gpu] = why + ", seen earlier in this run"
    return busy


class Findings:
    """Problems found by one check, the worst status among them, their signatures, and the evidence lines."""

    RANK = {"pass": 0, "warn": 1, "fail": 2}

    def __init__(self):
        self.status = "pass"
        self.problems = []
        self.signatures = []
        self.lines = []

    def add(self, status, problem, signature):
        if self.RANK[status] > self.RANK[self.status]:
            self.status = status
        self.problems.append(problem)
        if signature not in self.signatures:
            self.signatures.append(signature)

    def note(self, line):
        self.lines.append(line)

    def outcome(self, summary, evidence="", metrics=None):
        """The check's Outcome: its problems lead the summary; a clean pass keeps `summary`."""
        text = "\n".join(([evidence] if evidence else []) + self.lines)
        if self.status == "pass":  # remarks added at pass (no reference for a model) follow the summary
            summary = "; ".join([summary] + self.problems)
            return Outcome(PASS, summary, metrics=metrics, evidence=text, signatures=self.signatures)
        status = FAIL if self.status == "fail" else WARN
        return Outcome(status, "; ".join(self.problems), metrics=metrics, evidence=text, signatures=self.signatures)


def mark_busy(findings, ctx, busy, what):
    """Say once which GPUs another process used during `what`, and remember them for the later checks."""
    for gpu, why in sorted(busy.items()):
        findings.add("warn", "GPU %s was busy during the %s (%s): its figures are not judged, re-run when idle" % (
            gpu, what, why), "gpu_busy")
    ctx.facts.setdefault("busy_gpus", {}).update({str(gpu): why for gpu, why in busy.items()})


def judge_per_gpu(findings, ctx, label, values, expected, unit, signature, busy=None):
    """Judge each GPU's figure against `expected` (expectations.judge), or against its siblings where the model
    has no reference; GPUs in `busy` (see mark_busy) are left out. Returns the GPUs judged slow."""
    values = {gpu: v for gpu, v in values.items() if str(gpu) not in {str(b) for b in (busy or {})}}
    slow = []
    if expected is not None:
        for gpu, value in sorted(values.items()):
            status, ratio = expectations.judge(value, expected)
            findings.note(expectations.describe("GPU %s %s" % (gpu, label), value, expected, ratio, unit))
            if status != "pass":
                slow.append(gpu)
                findings.add(status, "GPU %s %s %.1f %s is %.0f%% of the %.1f its model should reach" % (
                    gpu, label, value, unit, 100 * ratio, expected.value), signature)
    siblings = [g for g in slow_siblings(values) if g not in slow]
    if siblings:
        findings.add("warn", "GPU %s %s far below its siblings" % (siblings, label), "gpu_slower_than_siblings")
    return slow
