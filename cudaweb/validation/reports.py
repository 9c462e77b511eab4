"""Turn the agent's stdout into a validated report, or say exactly why it is not one."""

import json

import jsonschema

from agents.cudaprobe.report_schema import load_schema

_validator = jsonschema.Draft202012Validator(load_schema())


class ReportError(ValueError):
    pass


def parse_report(stdout):
    text = stdout.strip()
    if not text:
        raise ReportError("the agent printed nothing on stdout")
    try:
        report = json.loads(text)
    except ValueError as exc:
        raise ReportError("the agent's output is not JSON: %s" % exc)
    errors = sorted(_validator.iter_errors(report), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.path) or "(top)"
        raise ReportError("the report does not match schema cudaprobe/1 at %s: %s" % (where, first.message[:300]))
    return report
