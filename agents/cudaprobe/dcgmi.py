"""`dcgmi diag -j` output, read: both shapes (DCGM 3.x "DCGM GPU Diagnostic" with display names; 4.x "DCGM
Diagnostic" with results per entity_id, test_summary and plugin names, NVIDIA/DCGM#296) into one form with one set of
test ids, and each level's time budget. Plain data: checks/dcgm.py judges it, and the dashboard reads the budgets (a
node's run takes that much longer).

What 3.x's dcgmi writes (dcgmi/Diag.cpp, HelperJsonAddResult and HelperJsonAddBasicTests, tags v3.1.3 to v3.3.9):
a per-GPU result names its GPU as a string, "gpu_ids" up to 3.2 and "gpu_id" from 3.3; its "info" is one string;
its "warnings" is one string up to 3.2 (with the result's "error_id" from 3.2) and a list of objects with "warning"
and "error_id" from 3.3. A Deployment item has one result for the whole node: no GPU id before 3.3.3 and, from 3.3.3,
an integer "gpu_id" taken from an error detail that the software test never fills in (so 0 whichever GPU the text
names); its warning text is a string under "warnings" (up to 3.3.1, where each further error is a result of its own
with no status) or, from 3.3.3, the key "warnings" inside each object of the "warnings" list. Statuses are "Pass",
"Skip" and "Fail" (a warning is written as "Fail")."""

import json
import re

LEVELS = {"r1": 1, "r2": 2, "r3": 3}
BUDGET_S = {1: 180, 2: 900, 3: 2700}  # DCGM's own guidance: r1 seconds, r2 about 2 min, r3 up to 30 min per node
# DCGM 3.x display names (lower-cased, non-alphanumerics as "_") that differ from the 4.x plugin names.
ALIASES = {"gpu_memory": "memory", "eud_test": "eud", "pulse": "pulse_test", "memory_test": "memtest",
           "nvbandwidth_test": "nvbandwidth", "sm_performance": "sm_stress", "targeted_performance": "targeted_stress"}
DEPLOYMENT = "deployment"  # the 3.x category whose items are 4.x's one "software" test
V3_ROOT = "DCGM GPU Diagnostic"
V4_ROOT = "DCGM Diagnostic"
RANK = {"pass": 0, "skip": 1, "warn": 2, "fail": 3}
STATUS_WORDS = {"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": "skip",
                "not run": "skip", "notrun": "skip"}
MESSAGE_CAP = 300
INFO_CAP = 1024  # 3.x keeps a result's info in one buffer of at most 1024 characters and prints it as one string
COULD_NOT_READ = "could not read"
UNREADABLE = "unreadable"  # the id of the entry that collects what could not be read outside any one test


def test_id(name, category=""):
    """Our id for a DCGM test name of either version: "GPU Memory" and "memory" are both "memory"."""
    if str(category).strip().lower() == DEPLOYMENT:
        return "software"
    key = re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")
    return ALIASES.get(key, key)


def _status(value):
    return STATUS_WORDS.get(str(value or "").strip().lower(), "fail")  # a status we do not know never passes


def _known_status(value):
    return isinstance(value, str) and value.strip().lower() in STATUS_WORDS


def _text(value, cap=MESSAGE_CAP):
    return " ".join(str(value).split())[:cap]


def _gpus(result, node_level=False):
    """The GPU indices one result is about (4.x entity_id of the GPU group, 3.x gpu_id / gpu_ids); none for a 3.x
    Deployment item, which is about the node whatever gpu_id it carries."""
    if "entity_id" in result:
        if str(result.get("entity_group", "GPU")).upper() != "GPU":
            return []
        return [str(result["entity_id"])]
    if node_level:
        return []
    ids = result.get("gpu_ids", result.get("gpu_id"))
    if ids is None or isinstance(ids, (bool, dict)):
        return []
    if isinstance(ids, list):
        return [str(part).strip() for part in ids if str(part).strip() and not isinstance(part, (dict, list))]
    return [part.strip() for part in str(ids).split(",") if part.strip()]


def _errors(entry):
    """DCGM's logged errors in a result or a test_summary: (error_id or None, message). Under "warnings": objects
    with "warning" (or, for a 3.3.3+ Deployment item, "warnings") and "error_id" (3.3+ and 4.x), or one string with
    the result's own "error_id" beside it (up to 3.3.1); null entries are the gaps jsoncpp leaves in a list whose
    first errors were empty. Some outputs also have "errors"."""
    found = []
    for key in ("warnings", "errors"):
        value = entry.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            if value.strip():
                found.append((entry.get("error_id"), _text(value)))
            continue
        if isinstance(value, dict):
            value = [value]
        if not isinstance(value, list):
            found.append((None, "%s DCGM's %s: %s" % (COULD_NOT_READ, key, _text(repr(value), 80))))
            continue
        for item in value:
            if item is None:
                continue
            if isinstance(item, dict):
                message = next((item[name] for name in ("warning", "warnings", "error", "message")
                                if item.get(name) and not isinstance(item[name], (dict, list))), "")
                found.append((item.get("error_id"), _text(message)))
            elif str(item).strip():
                found.append((None, _text(item)))
    return found


def _info(value):
    """A result's info lines: 3.x writes one string (kept whole), 4.x a list of lines."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [value.strip()[:INFO_CAP]]
    if isinstance(value, list):
        return [str(line)[:MESSAGE_CAP] for line in value]
    return [_text(value)]


def _what(value):
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _new_entry(name):
    return {"name": str(name)[:100], "statuses": [], "gpus": {}, "errors": [], "info": []}


def _unreadable(parsed, problem):
    """A part of the document that is not DCGM's shape: a failing entry of its own, so dcgm.diag names it."""
    entry = parsed["tests"].setdefault(UNREADABLE, _new_entry("could not read dcgmi's JSON"))
    entry["statuses"].append("fail")
    entry["errors"].append(("", None, "could not read dcgmi's JSON: %s" % problem, "fail"))


def _read_results(entry, test, node_level, item_name):
    """Fold one test's results into its entry."""
    results = test.get("results")
    if results is None:
        return
    if not isinstance(results, list):
        entry["statuses"].append("fail")
        entry["errors"].append(("", None, "could not read DCGM's results for %s: %s, not a list" % (
            entry["name"], _what(results)), "fail"))
        return
    status_here = ""
    for result in results:
        if result is None:
            continue
        if not isinstance(result, dict):
            entry["statuses"].append("fail")
            entry["errors"].append(("", None, "could not read a result of DCGM's %s: %s" % (
                entry["name"], _text(repr(result), 80)), "fail"))
            continue
        gpus = _gpus(result, node_level)
        if "status" in result:
            status = _status(result["status"])
            if not _known_status(result["status"]):
                entry["errors"].append((",".join(gpus), None, "could not read DCGM's status %s for %s" % (
                    _text(repr(result["status"]), 60), entry["name"]), status))
            status_here = status
        elif node_level and status_here:
            status = status_here  # 3.3.1 writes each further error of a Deployment item as a result with no status
        else:
            status = "fail"
            entry["errors"].append((",".join(gpus), None, "could not read a status in DCGM's result for %s" % (
                entry["name"]), status))
        entry["statuses"].append(status)
        for gpu in gpus:
            previous = entry["gpus"].get(gpu, "pass" if status != "skip" else "skip")
            entry["gpus"][gpu] = max(previous, status, key=RANK.get)
        for error_id, message in _errors(result):
            if message.startswith(COULD_NOT_READ):
                entry["statuses"].append("fail")
            if item_name and not message.lower().startswith(item_name.lower()):
                message = _text("%s: %s" % (item_name, message))  # which of the Deployment items logged it
            entry["errors"].append((",".join(gpus), error_id, message, status))
        entry["info"] += _info(result.get("info"))


def parse(document):
    """{"version": str, "runtime_error": str, "tests": {id: {"name", "status", "gpus": {gpu: status}, "errors":
    [(gpus, error_id, message, status of the result that logged it)], "info": [str]}}} from dcgmi's JSON (str or
    dict); ValueError when it is not DCGM's JSON at all. Parts that are not DCGM's shape become failing entries that
    say "could not read"; nothing in the document raises anything else."""
    try:
        data = json.loads(document) if isinstance(document, (str, bytes)) else document
    except RecursionError:
        raise ValueError("could not read dcgmi's output: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError("could not read dcgmi's output: %s, not a JSON object" % _what(data))
    v3 = not isinstance(data.get(V4_ROOT), dict) and isinstance(data.get(V3_ROOT), dict)
    root = data.get(V3_ROOT) if v3 else data.get(V4_ROOT)
    if not isinstance(root, dict):
        raise ValueError("could not read dcgmi's output: neither \"DCGM Diagnostic\" (4.x) nor \"DCGM GPU "
                         "Diagnostic\" (3.x) in it")
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    version = metadata.get("version") or root.get("version") or (data.get("version") if v3 else "")  # 3.x: top level
    parsed = {"version": str(version or ""), "runtime_error": str(root.get("runtime_error") or ""), "tests": {}}
    categories = root.get("test_categories")
    if categories is not None and not isinstance(categories, list):
        _unreadable(parsed, "test_categories is %s, not a list" % _what(categories))
        categories = []
    for category in categories or []:
        if category is None:
            continue
        if not isinstance(category, dict):
            _unreadable(parsed, "a test category is %s" % _what(category))
            continue
        category_name = category.get("category", "")
        deployment = str(category_name).strip().lower() == DEPLOYMENT
        tests = category.get("tests")
        if tests is not None and not isinstance(tests, list):
            _unreadable(parsed, "the tests of category %s are %s, not a list" % (_text(category_name, 40),
                                                                                  _what(tests)))
            continue
        for test in tests or []:
            if test is None:
                continue
            if not isinstance(test, dict):
                _unreadable(parsed, "a test in category %s is %s" % (_text(category_name, 40), _what(test)))
                continue
            name = test.get("name", "")
            ident = test_id(name, category_name) if isinstance(name, str) else ""
            if not ident:
                _unreadable(parsed, "a test in category %s has no name" % _text(category_name, 40))
                continue
            entry = parsed["tests"].setdefault(ident, _new_entry(name))
            if deployment:
                entry["name"] = "software"
            summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else {}
            summary_status = _status(summary["status"]) if summary.get("status") else ""
            if summary_status:
                entry["statuses"].append(summary_status)
            for error_id, message in _errors(summary):
                if message.startswith(COULD_NOT_READ):
                    entry["statuses"].append("fail")
                entry["errors"].append(("", error_id, message, summary_status))
            entry["info"] += _info(summary.get("info"))
            # A 3.x Deployment item is about the node: no GPU of its own, its name kept beside its errors.
            node_level = v3 and deployment
            _read_results(entry, test, node_level, name if node_level else "")
    for entry in parsed["tests"].values():
        statuses = entry.pop("statuses")
        entry["status"] = max(statuses, key=RANK.get) if statuses else "skip"
        if statuses and all(s == "skip" for s in statuses):
            entry["status"] = "skip"
        elif "fail" not in statuses and "warn" not in statuses and "pass" in statuses and "skip" in statuses:
            entry["status"] = "pass"  # skipped on some GPUs, passed on the others
    return parsed
