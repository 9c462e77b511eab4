"""Turn the agent's stdout into a validated report, or say exactly why it is not one."""

import json
import math

import jsonschema

from agents.cudaprobe.report_schema import load_schema

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


def _finite(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("%s is out of range" % text[:40])
    return value


def _nul_path(value, path=()):
    """The path of the first string holding a NUL character (no database stores one), else None."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and "\x00" in key:
            return path + (key,)
        found = _nul_path(item, path + (key,))
        if found is not None:
            return found
    return None


def _first_error(validator, report):
    errors = sorted(validator.iter_errors(report), key=lambda e: [str(p) for p in e.path])
    if not errors:
        return None
    first = errors[0]
    where = "/".join(str(p) for p in first.path) or "(top)"
    return "the report does not match schema cudaprobe/1 at %s: %s" % (where, first.message[:300])


def parse_report(stdout):
    text = stdout.strip()
    if not text:
        raise ReportError("the agent printed nothing on stdout")
    try:
        report = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError) as exc:
        raise ReportError("the agent's output is not JSON: %s" % str(exc)[:300])
    problem = _first_error(_validator, report) or _first_error(_stored_validator, report)
    if problem:
        raise ReportError(problem)
    nul = _nul_path(report)
    if nul is not None:
        raise ReportError("the report does not match schema cudaprobe/1 at %s: a NUL character" % (
            "/".join(str(p) for p in nul) or "(top)"))
    return report
