"""Runs stored the way a worker stores them (run_store_report), from the agent's real H200 reports."""

import copy
import json
from pathlib import Path

from django.test import TestCase

from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_store_report

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def real_report(name="h200-gpus2-standard.json"):
    return json.loads((REAL / name).read_text())


def scaled(report, factors=None, inventory=None, statuses=None):
    """A copy of a real report with metrics scaled (by bare metric name), inventory and statuses edited."""
    report = copy.deepcopy(report)
    for check in report["checks"]:
        for key in list(check["metrics"]):
            factor = (factors or {}).get(key.split(".")[0])
            if factor is not None:
                check["metrics"][key] = check["metrics"][key] * factor
        if check["id"] in (statuses or {}):
            check["status"] = statuses[check["id"]]
    report["inventory"].update(inventory or {})
    worst = {c["status"] for c in report["checks"]}
    report["verdict"] = "fail" if "fail" in worst else "warn" if "warn" in worst else "pass"
    return report


def stored_run(node, report, trigger=ValidationRun.Trigger.MANUAL, mode="standard"):
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING, mode=mode, trigger=trigger)
    with TestCase.captureOnCommitCallbacks(execute=True):  # as after a worker's commit (peer bands)
        run_store_report(run=run, report=report)
    run.refresh_from_db()
    return run
