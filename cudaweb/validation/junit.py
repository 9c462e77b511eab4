"""A run as JUnit XML, for bring-up pipelines that gate on test reports (Jenkins, GitLab, GitHub Actions):
one testsuite per layer, one testcase per check.

The document keeps to the strict form of the common JUnit format (Ant's, which Jenkins, GitLab and Azure DevOps
read; tests/data/junit/junit.xsd is our schema of it): `<testsuites>` without attributes; per suite the attributes
name, package, id, timestamp (UTC, no zone), hostname, tests, failures, errors, skipped and time, then
`<properties>` (the run's root cause first), the testcases, `<system-out>` and `<system-err>`; per testcase name,
classname and time and at most one of `<failure>`, `<error>`, `<skipped>`. A check that warned is a failure of type "warn": a pipeline gates on it as
`validate_node --wait` does (exit 1).

Check text comes from the host and is untrusted: characters XML 1.0 does not allow are dropped (ElementTree
escapes the rest), and each text is capped, so one report can not make the document unbounded."""

import math
import re
from datetime import timezone
import xml.etree.ElementTree as ElementTree

from cudaweb.validation.models import CheckResult
from cudaweb.validation.root_cause import LAYER_ORDER

MESSAGE_CAP = 1000  # an attribute (the summary, a property)
EVIDENCE_CAP = 8000  # a failure's or error's body: the evidence (one report has ~60 checks: <0.5 MB in all)
# Everything XML 1.0 allows is #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF].
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
RUN_SUITE = "run"  # the one suite of a run that has no checks (it never reached the agent's verdict)


def xml_text(value, cap=MESSAGE_CAP):
    """`value` as text XML 1.0 can hold, at most `cap` characters (cut text ends with "...")."""
    text = NOT_XML.sub("", str(value if value is not None else ""))
    return text if len(text) <= cap else text[:cap - 3] + "..."


def _seconds(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    return value if math.isfinite(value) and value > 0 else 0.0


def _decimal(seconds):
    return "%.3f" % seconds


def root_cause_text(root_cause):
    """One line for the root cause as the run page names it; "" when the run passed."""
    if not root_cause:
        return ""
    where = "%s (%s, %s)" % (root_cause["check"], root_cause["layer"], root_cause["status"]) if root_cause.get(
        "check") else root_cause.get("status", "")
    text = "%s: %s" % (where, root_cause.get("summary") or "")
    playbook = root_cause.get("playbook") or {}
    if playbook.get("id"):
        text += " [playbook %s]" % playbook["id"]
    return text


def _timestamp(run):
    when = run.started or run.created  # a run that never started (UNREACHABLE) has only its creation
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def _outcome(case, status, summary, evidence):
    """The one child a testcase may have for its status (none for pass)."""
    if status in ("fail", "warn"):
        element = ElementTree.SubElement(case, "failure", type=status, message=xml_text(summary))
        element.text = xml_text(evidence, EVIDENCE_CAP)
    elif status == "error":
        element = ElementTree.SubElement(case, "error", type="error", message=xml_text(summary))
        element.text = xml_text(evidence, EVIDENCE_CAP)
    elif status == "skip":
        ElementTree.SubElement(case, "skipped", message=xml_text(summary))
    elif status != "pass":  # a status the schema does not know: never shown as a pass
        ElementTree.SubElement(case, "error", type=xml_text(status, 50) or "unknown", message=xml_text(summary))


def _suite(parent, *, index, layer, run, properties, cases):
    """One <testsuite>; `cases` are (name, status, duration_s, summary, evidence)."""
    durations = [_seconds(duration) for _, _, duration, _, _ in cases]
    statuses = [status for _, status, _, _, _ in cases]
    suite = ElementTree.SubElement(parent, "testsuite", {
        "name": layer, "package": "cudaweb.%s" % xml_text(run.node.name, 200), "id": str(index),
        "timestamp": _timestamp(run), "hostname": xml_text(run.node.name, 200) or "localhost",
        "tests": str(len(cases)), "failures": str(sum(s in ("fail", "warn") for s in statuses)),
        "errors": str(sum(s not in ("pass", "fail", "warn", "skip") for s in statuses)),
        "skipped": str(statuses.count("skip")), "time": _decimal(sum(durations))})
    listed = ElementTree.SubElement(suite, "properties")
    for name, value in properties:
        ElementTree.SubElement(listed, "property", name=name, value=xml_text(value))
    for (name, status, _, summary, evidence), seconds in zip(cases, durations):
        case = ElementTree.SubElement(suite, "testcase", name=xml_text(name, 200),
                                      classname="%s.%s" % (xml_text(run.node.name, 200), layer),
                                      time=_decimal(seconds))
        _outcome(case, status, summary, evidence)
    ElementTree.SubElement(suite, "system-out")
    ElementTree.SubElement(suite, "system-err")


def _run_suites(root, *, run, root_cause, first_id):
    """Append the run's suites to `root`; returns the next suite id."""
    properties = [("root_cause", root_cause_text(root_cause)), ("node", run.node.name), ("run", str(run.id)),
                  ("status", run.status), ("verdict", run.verdict or ""), ("mode", run.mode),
                  ("agent_version", run.agent_version or "")]
    by_layer = {}
    for check in CheckResult.objects.filter(run=run).order_by("position"):
        by_layer.setdefault(check.layer, []).append(
            (check.check_id, check.status, check.duration_s, check.summary, check.evidence))
    if not by_layer:
        # No check ran (UNREACHABLE, TIMED_OUT, AGENT_ERROR, still live...): one error case, so a pipeline never
        # reads "0 tests, nothing failed" as a pass.
        status = "pass" if run.status == run.Status.PASSED else "error"
        _suite(root, index=first_id, layer=RUN_SUITE, run=run, properties=properties,
               cases=[("run.status", status, 0, "%s: %s" % (run.status, run.reason), run.reason)])
        return first_id + 1
    order = {layer: i for i, layer in enumerate(LAYER_ORDER)}
    for index, layer in enumerate(sorted(by_layer, key=lambda name: (order.get(name, len(order)), name))):
        _suite(root, index=first_id + index, layer=layer, run=run, properties=properties, cases=by_layer[layer])
    return first_id + len(by_layer)


def runs_junit(*, runs, root_causes):
    """One JUnit XML document (UTF-8 bytes) for the runs; `root_causes` maps a run's id to its root cause as
    cudaweb.playbooks.root_cause gives it."""
    root = ElementTree.Element("testsuites")
    next_id = 0
    for run in runs:
        next_id = _run_suites(root, run=run, root_cause=root_causes.get(run.id), first_id=next_id)
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)


def run_junit(*, run, root_cause):
    """One run's JUnit XML document."""
    return runs_junit(runs=[run], root_causes={run.id: root_cause})
