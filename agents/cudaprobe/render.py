"""A human-readable table of a report, for an operator running the agent by hand."""

MARKS = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skip": "skip", "error": "ERR!"}


def render_table(report):
    lines = ["cudaprobe %s  mode=%s  host=%s  %.1f s" % (
        report["agent_version"], report["mode"], report["host"]["hostname"], report["duration_s"]), ""]
    for check in report["checks"]:
        lines.append("%-8s %-4s %-26s %s" % (check["layer"], MARKS[check["status"]], check["id"], check["summary"]))
        if check["signatures"] and check["status"] in ("fail", "warn", "error"):
            lines.append("%-40s signatures: %s" % ("", ", ".join(check["signatures"])))
    inventory = report.get("inventory") or {}
    if inventory:
        lines += ["", "inventory: " + ", ".join("%s=%s" % item for item in sorted(inventory.items()))]
    lines += ["", "verdict: %s" % report["verdict"].upper(), ""]
    return "\n".join(lines)
