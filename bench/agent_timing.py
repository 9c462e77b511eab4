"""Where an agent run's time goes, from its reports (issue 22).

    python bench/agent_timing.py REPORT.json ...                  # each run: checks and GPU task calls in order
    python bench/agent_timing.py --compare BEFORE.json ... -- AFTER.json ... [--walls timings.txt]
                                                                  # min / median / max per mode and per check

A report from before issue 22 has no started_s: its checks are laid end to end from the run's start. --walls
reads the `side mode index rc=.. wall_ms=..` lines bench/timing_on_device.sh writes (the process's wall time, the
interpreter's start included), named after their report files (side-mode-index.json).
"""

import argparse
import json
import os
import re
import statistics
import sys

SHOWN_S = 0.05  # checks shorter than this are summed into one line


def load(path):
    with open(path) as fh:
        report = json.load(fh)
    report["_path"] = path
    clock = 0.0
    for check in report["checks"]:
        if "started_s" not in check:  # before issue 22: laid end to end (the report keeps declaration order)
            check["started_s"] = clock
        clock = check["started_s"] + check["duration_s"]
    return report


def breakdown(report, out=sys.stdout):
    """One run: each check's start and duration; each GPU task call's wall, task, setup and measured seconds."""
    out.write("%s: %s, %s, %.2f s\n" % (os.path.basename(report["_path"]), report["mode"], report["verdict"],
                                       report["duration_s"]))
    for worker in (report.get("timing") or {}).get("workers", []):
        out.write("  %s worker rank %d started at %6.2f s, torch imported in %s s%s\n" % (
            worker.get("role", "measure"), worker["rank"], worker["started_s"], worker.get("import_s", "?"),
            ", preload %s s" % worker["preload_s"] if "preload_s" in worker else ""))
    small = [c for c in report["checks"] if c["duration_s"] < SHOWN_S]
    for check in sorted(report["checks"], key=lambda c: c["started_s"]):
        if check["duration_s"] < SHOWN_S:
            continue
        out.write("  %6.2f +%6.2f s  %-24s %s\n" % (check["started_s"], check["duration_s"], check["id"],
                                                    check["status"]))
        for task in check.get("tasks", []):
            out.write("           task %-20s ranks %-6s wall %6.2f  in worker %s  setup %s  measured %s\n" % (
                task["task"], ",".join(map(str, task["ranks"])), task["wall_s"], task.get("task_s", "-"),
                task.get("setup_s", "-"), task.get("measured_s", "-")))
            for name, seconds in sorted((task.get("phases") or {}).items()):
                out.write("             %-32s %7.3f s\n" % (name, seconds))
    out.write("  %d checks under %.2f s: %.2f s in all\n" % (len(small), SHOWN_S, sum(c["duration_s"] for c in small)))


def walls(path):
    """{report file name: wall seconds} from a timings.txt of bench/timing_on_device.sh."""
    found = {}
    with open(path) as fh:
        for line in fh:
            match = re.match(r"(\w+) (\w+) (\d+) rc=(\d+) wall_ms=(\d+)", line)
            if match:
                found["%s-%s-%s.json" % match.group(1, 2, 3)] = int(match.group(5)) / 1000
    return found


def spread(values):
    if not values:
        return "-"
    return "%.2f / %.2f / %.2f" % (min(values), statistics.median(values), max(values))


def compare(before, after, wall_of, out=sys.stdout):
    """min / median / max per mode (wall, report) and per check, before beside after."""
    modes = [m for m in ("quick", "standard", "full") if any(r["mode"] == m for r in before + after)]
    for mode in modes:
        sides = {"before": [r for r in before if r["mode"] == mode], "after": [r for r in after if r["mode"] == mode]}
        out.write("\n%s: before %d runs, after %d runs (min / median / max, s)\n" % (
            mode, len(sides["before"]), len(sides["after"])))
        rows = [("wall (process)", {s: [wall_of[os.path.basename(r["_path"])] for r in rs
                                        if os.path.basename(r["_path"]) in wall_of] for s, rs in sides.items()}),
                ("report duration_s", {s: [r["duration_s"] for r in rs] for s, rs in sides.items()})]
        ids = []
        for report in sides["before"] + sides["after"]:
            ids += [c["id"] for c in report["checks"] if c["id"] not in ids]
        for check_id in ids:
            values = {s: [c["duration_s"] for r in rs for c in r["checks"] if c["id"] == check_id]
                      for s, rs in sides.items()}
            if max(values["before"] + values["after"] + [0]) >= SHOWN_S:
                rows.append((check_id, values))
        for name, values in rows:
            out.write("  %-24s %-24s %-24s\n" % (name, spread(values["before"]), spread(values["after"])))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="*")
    parser.add_argument("--compare", action="store_true", help="BEFORE ... -- AFTER ...")
    parser.add_argument("--walls", help="timings.txt of bench/timing_on_device.sh")
    argv = sys.argv[1:] if argv is None else argv
    if "--" in argv:
        cut = argv.index("--")
        args = parser.parse_args(argv[:cut])
        after_paths = argv[cut + 1:]
    else:
        args = parser.parse_args(argv)
        after_paths = []
    before = [load(p) for p in args.reports]
    if not args.compare:
        for report in before:
            breakdown(report)
        return 0
    after = [load(p) for p in after_paths]
    compare(before, after, walls(args.walls) if args.walls else {})
    for report in after:
        if report["mode"] == "standard":
            sys.stdout.write("\n")
            breakdown(report)
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
