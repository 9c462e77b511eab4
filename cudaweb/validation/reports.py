"""Turn the agent's stdout into a validated report, or say exactly why it is not one."""

import json
import math

import jsonschema

from agents.cudaprobe.report_schema import load_schema
from cudaweb.validation import hostoutput

_validator = jsonschema.Draft202012Validator(load_schema())
# What the dashboard's tables hold on top of the agent's schema (a report beyond these is the agent's error, named by
# its field, never a database error of ours): the columns' lengths, a GPU count that is a count.
STORED = {
    "type": "object",
    "properties": {
        "agent_version": {"maxLength": 32},
        "inventory": {"properties": {"gpu_count": {"type": "integer", "minimum": 0, "maximum": 1000000},
                                     "gpu_model": {"type": "string", "maxLength": 200}}},
        "checks": {"items": {"properties": {"id": {"maxLength": 64}, "title": {"maxLength": 200},
                                            "blocked_by": {"maxLength": 64}}}},
    },
}
_stored_validator = jsonschema.Draft202012Validator(STORED)


class ReportError(ValueError):
    pass


def _no_constant(name):
    raise ValueError("%s is not a JSON number" % name)


# Every figure a host prints is untrusted: finite, and within what its unit can mean (a key's unit is its name's
# ending, as the agent names them: matmul_bf16_tflops, h2d_pinned_gbs.gpu0). The ranges are generous (a GPU a
# thousand times an H200 passes); what they stop is a figure no arithmetic downstream survives: 1.7e308 TFLOP/s makes
# drift -Infinity, which PostgreSQL refuses, and an integer of 400 digits overflows a float.
UNIT_RANGES = (
    ("_tflops", "TFLOP/s", 0, 1e6),
    ("_gbs", "GB/s", 0, 1e6),
    ("_img_s", "img/s", 0, 1e8),
    ("_ms", "ms", 0, 1e10),
    ("_us", "us", 0, 1e12),
    ("_s", "s", 0, 1e8),
    ("_c", "C", -273.15, 1000),
    ("_mhz", "MHz", 0, 1e6),
    ("_w", "W", 0, 1e7),
    ("_gib", "GiB", 0, 1e9),
    ("_mib", "MiB", 0, 1e12),
    ("_pct", "%", -1e6, 1e6),
)
ANY_FIGURE = 2.0 ** 63  # anything else (a count, a ratio, a counter): a 64-bit integer holds it


def _range_of(key):
    """(unit, low, high) of a metric key by its name's ending, before a per-GPU or per-size suffix."""
    base = key.split(".", 1)[0]
    for ending, unit, low, high in UNIT_RANGES:
        if base.endswith(ending):
            return unit, low, high
    return None


def _figures(report):
    """Every number of a report, with its path (["checks", 3, "metrics", "matmul_bf16_tflops"]); iterative, so no
    nesting the JSON parser took can exhaust the stack here."""
    stack = [([], report)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            yield path, value
        elif isinstance(value, dict):
            stack.extend((path + [key], item) for key, item in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((path + [i], item) for i, item in reversed(list(enumerate(value))))


def _figure_problem(report):
    """The first figure of the report that is no measurement (not finite, or out of its unit's range), named by
    its field; None when all are sane."""
    for path, value in _figures(report):
        shown = "%.6g" % value if isinstance(value, float) or abs(value) < 10 ** 15 else "an integer of %d digits" % (
            len(str(abs(value))))
        where = "/".join(str(p) for p in path)
        in_check = len(path) >= 2 and path[0] == "checks" and isinstance(path[1], int)
        check = report["checks"][path[1]] if in_check else None
        if isinstance(check, dict) and isinstance(check.get("id"), str):
            where = "check %s, %s" % (check["id"][:64], "/".join(str(p) for p in path[2:]))
        if isinstance(value, float) and not math.isfinite(value):
            return "the report's figure %s is %s, not a finite number" % (where, shown)
        unit = _range_of(path[-1]) if len(path) >= 2 and path[-2] == "metrics" and isinstance(path[-1], str) else None
        if unit is not None and not unit[1] <= value <= unit[2]:
            return "the report's figure %s is %s, outside %g to %g %s" % (where, shown, unit[1], unit[2], unit[0])
        if abs(value) >= ANY_FIGURE:
            return "the report's figure %s is %s, beyond any measurement" % (where, shown)
    return None


def _duplicate_check(report):
    seen = set()
    for check in report["checks"]:
        if check["id"] in seen:
            return "the report names check %s twice" % check["id"]
        seen.add(check["id"])
    return None


def _first_error(validator, report):
    errors = sorted(validator.iter_errors(report), key=lambda e: [str(p) for p in e.path])
    if not errors:
        return None
    first = errors[0]
    where = "/".join(str(p) for p in first.path) or "(top)"
    return "the report does not match schema cudaprobe/1 at %s: %s" % (where, first.message[:300])


def report_problem(report):
    """Why a parsed report is no report the dashboard stores (schema, a figure, a check named twice), or None. The
    reaper asks it again of a kept report: a spool file is host output too."""
    return (_figure_problem(report) or _first_error(_validator, report) or _first_error(_stored_validator, report)
            or _duplicate_check(report))


def parse_report(stdout):
    text = stdout.strip()
    if not text:
        raise ReportError("the agent printed nothing on stdout")
    try:
        report = json.loads(text, parse_constant=_no_constant)  # 1e400 is inf: named below
    except (ValueError, RecursionError) as exc:
        raise ReportError("the agent's output is not JSON: %s" % str(exc)[:300])
    problem = report_problem(report)
    if problem:
        raise ReportError(problem)
    return hostoutput.clean(report)  # NUL and lone surrogates, which no database column takes, written escaped
