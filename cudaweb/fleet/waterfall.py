"""Where a run's time went, from its report: each check's bar from its start, and inside a check the GPU task
calls it made, split into waiting for the worker, setup and measured time (the agent's `started_s`, `tasks` and
`timing` fields, issue 22), and above them the dashboard's own steps (queued, claimed, transport up, agent started,
report received, stored: cudaweb.validation.dashboard_timing, issue 33), the agent's rows then placed from the
agent's start. The run page draws it as SVG rectangles laid out here, in a 0-1000 coordinate space."""

WIDTH = 1000
SHOWN_S = 0.02  # shorter checks are counted in one line, not drawn
MAX_ROWS = 80  # a report is host output: bounded whatever it holds


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _bar(start, seconds, total, kind, title=""):
    x = max(0.0, min(WIDTH, start / total * WIDTH))
    width = max(1.0, min(WIDTH - x, seconds / total * WIDTH))
    return {"x": round(x, 1), "width": round(width, 1), "kind": kind, "title": title}


def _task_segments(task, total):
    """A task call's bar cut in order: waiting (sent but the worker busy or still importing torch), setup,
    measured, the rest of the worker's time. The split is a sum, not the order of events inside the task."""
    start, wall = _number(task.get("started_s")), _number(task.get("wall_s"))
    if start is None or wall is None:
        return []
    in_worker = _number(task.get("task_s"))
    setup, measured = _number(task.get("setup_s")) or 0.0, _number(task.get("measured_s")) or 0.0
    if in_worker is None:
        return [_bar(start, wall, total, "task", "%.2f s" % wall)]
    parts = [("wait", max(0.0, wall - in_worker)), ("setup", setup), ("measured", measured),
             ("other", max(0.0, in_worker - setup - measured))]
    segments, clock = [], start
    for kind, seconds in parts:
        if seconds > 0:
            segments.append(_bar(clock, seconds, total, kind, "%s %.2f s" % (kind, seconds)))
            clock += seconds
    return segments


def _dashboard_rows(steps, total):
    rows, previous = [], None
    for step in steps:
        if previous is not None and step["gap_s"] is not None:
            begin, seconds = previous["since_queued_s"], max(0.0, step["gap_s"])
            rows.append({"label": "dashboard: %s" % step["what"], "kind": "dashboard", "start": begin,
                         "seconds": seconds, "bars": [_bar(begin, seconds, total, "dash",
                                                           "%s -> %s %.2f s" % (previous["step"], step["step"],
                                                                                seconds))]})
        previous = step
    return rows


def run_waterfall(*, report, steps=None):
    """Rows for the run page's waterfall, or None when neither the report has timing (agents before issue 22)
    nor the run has the dashboard's marks (runs before issue 33). `steps`: the run's dashboard steps
    (cudaweb.validation.dashboard_timing.run_steps); drawn only where the worker marked the agent's start."""
    steps = [s for s in (steps or []) if isinstance(s, dict)]
    agent_start = next((s["since_queued_s"] for s in steps if s["step"] == "agent_started"), None)
    if agent_start is None:
        steps = []
    checks = []
    if isinstance(report, dict) and isinstance(report.get("checks"), list):
        checks = [c for c in report["checks"] if isinstance(c, dict) and _number(c.get("started_s")) is not None
                  and _number(c.get("duration_s")) is not None]
    if not checks and not steps:
        return None
    offset = agent_start or 0.0
    workers = [w for w in ((report.get("timing") or {}).get("workers") or []) if isinstance(w, dict)
               and _number(w.get("started_s")) is not None][:MAX_ROWS] if checks else []
    ends = [_number(c["started_s"]) + _number(c["duration_s"]) for c in checks]
    ends += [_number(w["started_s"]) + (_number(w.get("import_s")) or 0.0) for w in workers]
    agent_total = max(ends + [_number(report.get("duration_s")) or 0.0 if checks else 0.0, 0.0])
    total = max([offset + agent_total, 0.001] + [s["since_queued_s"] for s in steps])
    rows = _dashboard_rows(steps, total)
    for worker in workers:
        start = offset + _number(worker["started_s"])
        imported, preloaded = _number(worker.get("import_s")) or 0.0, _number(worker.get("preload_s")) or 0.0
        bars = [_bar(start, imported, total, "import", "import torch %.2f s" % imported)]
        if preloaded:
            bars.append(_bar(start + imported, preloaded, total, "preload", "preload %.2f s" % preloaded))
        role = worker.get("role") if worker.get("role") in ("measure", "train") else "measure"
        rows.append({"label": "%s worker, rank %s" % (role, worker.get("rank")), "kind": "worker", "start": start,
                     "seconds": imported + preloaded, "bars": bars})
    small = [c for c in checks if _number(c["duration_s"]) < SHOWN_S]
    for check in sorted((c for c in checks if _number(c["duration_s"]) >= SHOWN_S),
                        key=lambda c: _number(c["started_s"])):
        if len(rows) >= MAX_ROWS:
            break
        start, seconds = offset + _number(check["started_s"]), _number(check["duration_s"])
        status = check.get("status") if check.get("status") in ("pass", "warn", "fail", "skip", "error") else "skip"
        rows.append({"label": str(check.get("id", ""))[:60], "kind": "check", "status": status, "start": start,
                     "seconds": seconds, "bars": [_bar(start, seconds, total, "check c-" + status)]})
        for task in (check.get("tasks") or [])[:10]:
            if not isinstance(task, dict):
                continue
            segments = _task_segments(dict(task, started_s=offset + _number(task["started_s"]))
                                      if _number(task.get("started_s")) is not None else task, total)
            if segments:
                rows.append({"label": str(task.get("task", ""))[:60], "kind": "task",
                             "start": offset + _number(task["started_s"]), "seconds": _number(task["wall_s"]),
                             "bars": segments})
    # The headline's figures, each one a row's or the axis's: the axis (queued to stored, or the agent's own span
    # when the dashboard has no marks), the agent as the dashboard saw it (its process started to its report read:
    # the "dashboard: the agent" row) and the agent's own clock (its report: the checks' end or its duration_s).
    agent_s = next((s["gap_s"] for s in steps if s["step"] == "report_received" and s["gap_s"] is not None), None)
    return {"total_s": total, "rows": rows, "hidden": len(small), "dashboard": bool(steps),
            "agent_s": agent_s, "report_s": agent_total if checks else None,
            "hidden_s": sum(_number(c["duration_s"]) for c in small)}
