"""`dcgmi diag -j` output, read: both shapes (DCGM 3.x "DCGM GPU Diagnostic" with results per gpu_id/gpu_ids and
display names; 4.x "DCGM Diagnostic" with results per entity_id, test_summary and plugin names, NVIDIA/DCGM#296) into
one form with one set of test ids, and each level's time budget. Plain data: checks/dcgm.py judges it, and the
dashboard reads the budgets (a node's run takes that much longer)."""

import json
import re

LEVELS = {"r1": 1, "r2": 2, "r3": 3}
BUDGET_S = {1: 180, 2: 900, 3: 2700}  # DCGM's own guidance: r1 seconds, r2 about 2 min, r3 up to 30 min per node
# DCGM 3.x display names (lower-cased, non-alphanumerics as "_") that differ from the 4.x plugin names.
ALIASES = {"gpu_memory": "memory", "eud_test": "eud", "pulse": "pulse_test", "memory_test": "memtest",
           "nvbandwidth_test": "nvbandwidth", "sm_performance": "sm_stress", "targeted_performance": "targeted_stress"}
DEPLOYMENT = "deployment"  # the 3.x category whose items are 4.x's one "software" test
RANK = {"pass": 0, "skip": 1, "warn": 2, "fail": 3}
STATUS_WORDS = {"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": "skip",
                "not run": "skip", "notrun": "skip"}
MESSAGE_CAP = 300


def test_id(name, category=""):
    """Our id for a DCGM test name of either version: "GPU Memory" and "memory" are both "memory"."""
    if str(category).strip().lower() == DEPLOYMENT:
        return "software"
    key = re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")
    return ALIASES.get(key, key)


def _status(value):
    return STATUS_WORDS.get(str(value or "").strip().lower(), "fail")  # a status we do not know never passes


def _gpus(result):
    """The GPU indices one result is about (3.x gpu_id / gpu_ids, 4.x entity_id of the GPU group)."""
    if "entity_id" in result:
        if str(result.get("entity_group", "GPU")).upper() != "GPU":
            return []
        return [str(result["entity_id"])]
    ids = result.get("gpu_ids", result.get("gpu_id"))
    if ids is None:
        return []
    return [part.strip() for part in str(ids).split(",") if part.strip()]


def _errors(entry):
    """DCGM's logged errors in a result or a test_summary: (error_id or None, message). dcgmi -j lists them under
    "warnings" (objects with error_id in 3.3+ and 4.x, bare strings before) and sometimes "errors"."""
    found = []
    for key in ("warnings", "errors"):
        for item in entry.get(key) or []:
            if isinstance(item, dict):
                message = item.get("warning") or item.get("error") or item.get("message") or ""
                found.append((item.get("error_id"), " ".join(str(message).split())[:MESSAGE_CAP]))
            elif str(item).strip():
                found.append((None, " ".join(str(item).split())[:MESSAGE_CAP]))
    return found


def parse(document):
    """{"version": str, "runtime_error": str, "tests": {id: {"name", "status", "gpus": {gpu: status}, "errors":
    [(gpus, error_id, message, status of the result that logged it)], "info": [str]}}} from dcgmi's JSON (str or
    dict); ValueError when it is not."""
    data = json.loads(document) if isinstance(document, str) else document
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    root = data.get("DCGM Diagnostic", data.get("DCGM GPU Diagnostic"))
    if not isinstance(root, dict):
        raise ValueError("neither \"DCGM Diagnostic\" (4.x) nor \"DCGM GPU Diagnostic\" (3.x) in the output")
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    parsed = {"version": str(metadata.get("version") or root.get("version") or ""),
              "runtime_error": str(root.get("runtime_error") or ""), "tests": {}}
    for category in root.get("test_categories") or []:
        if not isinstance(category, dict):
            continue
        for test in category.get("tests") or []:
            if not isinstance(test, dict):
                continue
            ident = test_id(test.get("name", ""), category.get("category", ""))
            if not ident:
                continue
            entry = parsed["tests"].setdefault(ident, {"name": str(test.get("name", ""))[:100], "statuses": [],
                                                       "gpus": {}, "errors": [], "info": []})
            if DEPLOYMENT == str(category.get("category", "")).strip().lower():
                entry["name"] = "software"
            summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else {}
            summary_status = _status(summary["status"]) if summary.get("status") else ""
            if summary_status:
                entry["statuses"].append(summary_status)
            for error_id, message in _errors(summary):
                entry["errors"].append(("", error_id, message, summary_status))
            entry["info"] += [str(line)[:MESSAGE_CAP] for line in summary.get("info") or []]
            for result in test.get("results") or []:
                if not isinstance(result, dict):
                    continue
                status = _status(result.get("status"))
                entry["statuses"].append(status)
                gpus = _gpus(result)
                for gpu in gpus:
                    previous = entry["gpus"].get(gpu, "pass" if status != "skip" else "skip")
                    entry["gpus"][gpu] = max(previous, status, key=RANK.get)
                for error_id, message in _errors(result):
                    entry["errors"].append((",".join(gpus), error_id, message, status))
                entry["info"] += [str(line)[:MESSAGE_CAP] for line in result.get("info") or []]
    for entry in parsed["tests"].values():
        statuses = entry.pop("statuses")
        entry["status"] = max(statuses, key=RANK.get) if statuses else "skip"
        if statuses and all(s == "skip" for s in statuses):
            entry["status"] = "skip"
        elif "fail" not in statuses and "warn" not in statuses and "pass" in statuses and "skip" in statuses:
            entry["status"] = "pass"  # skipped on some GPUs, passed on the others
    return parsed
