"""Run the selected checks in order, enforce layer blocking, and assemble the report."""

import json
import os
import platform
import socket
import sys
import time
import traceback
from datetime import datetime, timezone

from agents.cudaprobe import AGENT_VERSION, REPORT_SCHEMA, cudaenv, precompile
from agents.cudaprobe.model import ERROR, FAIL, LAYERS, PASS, SKIP, WARN, Outcome, bounded

MAX_GPU_FINDINGS = 64  # per check; the schema's bound (a node has at most a few dozen GPUs)
GATING_LAYERS = ("L0", "L1", "L2", "L3", "L4", "L5", "L6", "L7")


class Context:
    """Shared state of one agent run: options, facts found by earlier checks, results so far."""

    def __init__(self, mode, options=None, environ=None):
        self.report_mode = mode
        self.mode = "full" if mode == "burnin" else mode  # burn-in: the checks of full, as full runs them, then L7
        self.options = options or {}
        self.environ = dict(os.environ if environ is None else environ)
        self.facts = {}
        self.results = {}
        self.budget_s = 30
        self.pool = None  # the run's GPU workers (children.local_pool), or a children.ReplayPool
        self.isolated = None  # a pre-started worker for the next isolated task (children.run_task)
        self.trainers = None  # the training workers (children.train_pool)
        self.records = None  # a list when --record keeps the GPU tasks' raw outcomes
        self.t0 = time.monotonic()  # the run's clock: checks, tasks and workers are timed from here
        self.task_timings = []  # one entry per GPU task call (children.Pool.call), for the report's waterfall
        self.worker_timings = []  # one entry per GPU worker started (children.Worker)
        self.bytecode = None  # the workers' bytecode cache (bytecode.prepare), found when the first one starts
        self.precompile = None  # the compile into an empty cache (precompile.start), collected at close

    def inventory(self):
        """The report's inventory (versions, GPU model and count), filled in by the checks that find each fact."""
        return self.facts.setdefault("inventory", {})

    def since_start(self, moment=None):
        """Seconds from the run's start to `moment` (time.monotonic(), default now)."""
        return round((time.monotonic() if moment is None else moment) - self.t0, 3)

    def close(self):
        for pool in (self.pool, self.isolated, self.trainers):
            if pool is not None:
                pool.remove()
        if self.precompile is not None:
            self.bytecode["precompiled"] = precompile.finish(self.precompile)
            self.precompile = None

    def path(self, name, default):
        """Paths the fault-injection harness may redirect (e.g. CUDAPROBE_PROC_MODULES)."""
        return self.environ.get("CUDAPROBE_" + name, default)


RECORDED_ENV = ("NCCL_", "CUDA_", "TORCH_", "CUDAPROBE_", "NVIDIA_", "PYTORCH_", "CUBLAS", "CUDNN")


def record_of(ctx, report):
    """What --record keeps: the report, the facts that are plain data, the NCCL/CUDA environment and every GPU
    task's raw outcomes (children.ReplayPool answers from them)."""
    facts = {}
    for key, value in ctx.facts.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue  # e.g. the torch facts' TaskOutcome: it is among the tasks
        facts[key] = value
    environ = {k: v for k, v in ctx.environ.items() if k.startswith(RECORDED_ENV)}
    return {"report": report, "facts": facts, "environ": environ, "options": ctx.options, "tasks": ctx.records}


def emit_event(stream, **event):
    if stream is None:
        return
    event["t"] = round(time.time(), 3)
    stream.write(json.dumps(event, sort_keys=True) + "\n")
    stream.flush()


def select(specs, mode, only=(), skip=()):
    """Checks for this mode, narrowed by --only/--skip (layer names or ids); requirements come along."""

    def matches(spec, keys):
        return any(k == spec.layer or k == spec.id or spec.id.startswith(k + ".") for k in keys)

    modes = {"full", "burnin"} if mode == "burnin" else {mode}  # burn-in runs everything full runs, then L7
    chosen = [s for s in specs if modes & set(s.modes)]
    if only:
        wanted = {s.id for s in chosen if matches(s, only)}
        by_id = {s.id: s for s in chosen}
        stack = list(wanted)
        while stack:
            for req in by_id[stack.pop()].requires:
                if req in by_id and req not in wanted:
                    wanted.add(req)
                    stack.append(req)
        chosen = [s for s in chosen if s.id in wanted]
    if skip:
        chosen = [s for s in chosen if not matches(s, skip)]
    return chosen


def _blocker(spec, results):
    """The root failed check that stops this one, or None."""
    for req in spec.requires:
        res = results.get(req)
        if res is None:
            continue
        if res["status"] in (FAIL, ERROR):
            return req
        if res["status"] == SKIP and res.get("blocked_by"):
            return res["blocked_by"]
    return None


def _run_one(spec, ctx):
    ctx.budget_s = spec.budget_s
    started = time.monotonic()
    first_task = len(ctx.task_timings)
    blocker = _blocker(spec, ctx.results)
    if blocker:
        outcome = Outcome(SKIP, "blocked: %s did not pass" % blocker)
    else:
        try:
            outcome = spec.func(ctx)
        except Exception as exc:  # a bug or surprise in one check must not lose the report
            outcome = Outcome(ERROR, "check raised %s: %s" % (type(exc).__name__, exc),
                              evidence=traceback.format_exc(), signatures=["agent_check_error"])
        outcome = cudaenv.point(spec.id, outcome, ctx.environ)  # a CUDA / torch setting that explains it is named
    result = {
        "id": spec.id,
        "layer": spec.layer,
        "title": spec.title,
        "status": outcome.status,
        "started_s": ctx.since_start(started),
        "duration_s": round(time.monotonic() - started, 3),
        "summary": outcome.summary,
        "metrics": outcome.metrics,
        "evidence": bounded(outcome.evidence),
        "signatures": outcome.signatures,
        "blocked_by": blocker or (outcome.blocked_by if outcome.status == SKIP else None),
    }
    if getattr(outcome, "gpus", None):
        result["gpus"] = outcome.gpus[:MAX_GPU_FINDINGS]
    if isinstance(outcome.details, dict) and outcome.details.get("series"):
        result["series"] = outcome.details["series"]  # the burn-in's downsampled series, for the run page
    if len(ctx.task_timings) > first_task:
        result["tasks"] = ctx.task_timings[first_task:]
    return result


def enforce_layer_order(checks):
    """Nothing above a failed layer may pass: such passes become skips that name the failure."""
    first_failure = None
    for layer in GATING_LAYERS:
        failing = [c for c in checks if c["layer"] == layer and c["status"] in (FAIL, ERROR)]
        if failing:
            first_failure = (GATING_LAYERS.index(layer), failing[0]["id"])
            break
    if first_failure is None:
        return
    index, failed_id = first_failure
    for c in checks:
        if c["layer"] in GATING_LAYERS and GATING_LAYERS.index(c["layer"]) > index and c["status"] == PASS:
            c["status"] = SKIP
            c["blocked_by"] = failed_id
            c["summary"] = "%s (ran, but cannot count as a pass above failed %s)" % (c["summary"], failed_id)


def verdict_of(checks):
    statuses = {c["status"] for c in checks}
    if statuses & {FAIL, ERROR}:
        return FAIL
    if WARN in statuses:
        return WARN
    return PASS


def run_checks(specs, ctx, events=None):
    started = time.time() - (time.monotonic() - ctx.t0)  # wall clock of ctx.t0: workers may start before this call
    emit_event(events, event="start", mode=getattr(ctx, "report_mode", ctx.mode), checks=[s.id for s in specs])
    checks = []
    try:
        for spec in specs:
            emit_event(events, event="check_started", id=spec.id, layer=spec.layer, title=spec.title)
            result = _run_one(spec, ctx)
            ctx.results[spec.id] = result
            checks.append(result)
            emit_event(events, event="check_finished", id=spec.id, layer=spec.layer, status=result["status"],
                       summary=result["summary"][:300])
    finally:
        ctx.close()  # no worker outlives the run
    enforce_layer_order(checks)
    declared = {spec.id: spec.order for spec in specs}
    checks.sort(key=lambda c: (LAYERS.index(c["layer"]), declared[c["id"]]))  # declaration order within a layer
    report = {
        "schema": REPORT_SCHEMA,
        "agent_version": AGENT_VERSION,
        "mode": getattr(ctx, "report_mode", ctx.mode),
        "started": datetime.fromtimestamp(started, timezone.utc).isoformat(),
        "duration_s": round(time.time() - started, 3),
        "host": {
            "hostname": socket.gethostname(),
            "python": platform.python_version(),
            "executable": sys.executable,
        },
        "verdict": verdict_of(checks),
        "inventory": ctx.facts.get("inventory", {}),
        "checks": checks,
        "timing": {"workers": ctx.worker_timings},
    }
    if ctx.bytecode:
        report["timing"]["bytecode_cache"] = ctx.bytecode
    emit_event(events, event="finished", verdict=report["verdict"])
    return report


assert set(GATING_LAYERS) < set(LAYERS)
