"""What a watch signature means to the loop (cudaweb/health/signatures.py): the fabric faults and the uncorrectable
AER count the README says move a node do move it, as the node-local health command fails it; and every signature the
agent's watch checks can give is hardware, application or a listed observation, on purpose.

The signatures are read from the agent's source (the watch's checks as the registry selects them, the functions they
call, the engine's own for a check that raised): a check that gives a new one fails the classification test here until
it is placed. The faults are the agent's own outcomes (its check functions run on the stand-ins of tests/agent), written
into the stand-in watch report (tests/health/standin.py) as its FAULTS are."""

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

from agents.cudaprobe import health
from agents.cudaprobe.checks import fabric
from agents.cudaprobe.engine import select
from agents.cudaprobe.registry import WATCH, load_all
from cudaweb.health import machine, signatures
from cudaweb.health.ingest import report_ingest
from cudaweb.health.models import HealthEvent, NodeLoop
from tests.agent.harness import Scenario
from tests.agent.test_fabric import _aer, _make_tree, context
from tests.agent.test_fabric_skus import DOMAIN, IMEX, ZERO, alike, host
from tests.health.conftest import make_node
from tests.health.standin import watch_report

PACKAGE = "agents.cudaprobe"
SIGNATURE = re.compile(r"\A[a-z][a-z0-9]*(?:_[a-z0-9]+)+\Z")
CARRIERS = {"signature", "signatures"}  # the names a signature travels under in the agent
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


class _Module:
    """One module of the agent, parsed: its functions (nested ones too), module-level constants and imports."""

    parsed = {}

    @classmethod
    def of(cls, name):
        if name not in cls.parsed:
            cls.parsed[name] = cls(name)
        return cls.parsed[name]

    def __init__(self, name):
        self.name = name
        tree = ast.parse(Path(importlib.import_module(name).__file__).read_text())
        self.functions, self.constants, self.imports = {}, {}, {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, []).append(node)
        for node in tree.body:
            if isinstance(node, ast.Assign):
                self.constants.update((t.id, node.value) for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                for alias in node.names:
                    full = "%s.%s" % (node.module, alias.name)
                    try:
                        importlib.import_module(full)
                        self.imports[alias.asname or alias.name] = (full, None)  # a module
                    except ImportError:
                        self.imports[alias.asname or alias.name] = (node.module, alias.name)  # a name in one

    def callees(self, func):
        """[(module, function)] a call's callee may be, within the agent."""
        if isinstance(func, ast.Name):
            if func.id in self.functions:
                return [(self, f) for f in self.functions[func.id]]
            module, attr = self.imports.get(func.id, (None, None))
            if attr:
                other = _Module.of(module)
                return [(other, f) for f in other.functions.get(attr, [])]
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            module, attr = self.imports.get(func.value.id, (None, "?"))
            if attr is None:
                other = _Module.of(module)
                return [(other, f) for f in other.functions.get(func.attr, [])]
        return []

    def constant(self, name):
        if name in self.constants:
            return self, self.constants[name]
        module, attr = self.imports.get(name, (None, None))
        return _Module.of(module).constant(attr) if attr else None


def _parameters(func):
    return [a.arg for a in func.args.posonlyargs + func.args.args]


def _assigns(func, name):
    return any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == name for t in n.targets)
               for n in ast.walk(func))


class _Signatures:
    """The signature strings the agent can put in a check's outcome, from the functions reached from `roots`: what is
    given as a `signature(s)` argument, assigned to or appended to a `signature(s)`, followed through local variables,
    module constants (dicts: their values) and the return values of the agent's functions."""

    def __init__(self):
        self.found, self.reached, self.busy = {}, set(), set()

    def function(self, module, func):
        if id(func) in self.reached:
            return
        self.reached.add(id(func))
        where = "%s.%s" % (module.name, func.name)
        for node in ast.walk(func):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg in CARRIERS:
                        self.strings(keyword.value, module, func, where)
                for other, callee in module.callees(node.func):
                    for name, arg in zip(_parameters(callee), node.args):
                        if name in CARRIERS:
                            self.strings(arg, module, func, where)
                    self.function(other, callee)
                target = node.func
                if isinstance(target, ast.Attribute) and target.attr in ("append", "insert", "extend") and \
                        (getattr(target.value, "id", None) in CARRIERS or
                         getattr(target.value, "attr", None) in CARRIERS) and node.args:
                    self.strings(node.args[-1], module, func, where)
            elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) in CARRIERS or
                                                      getattr(t, "attr", None) in CARRIERS for t in node.targets):
                self.strings(node.value, module, func, where)

    def strings(self, expr, module, func, where):
        key = (id(expr), id(func))
        if key in self.busy:
            return
        self.busy.add(key)
        try:
            self._strings(expr, module, func, where)
        finally:
            self.busy.discard(key)

    def _strings(self, expr, module, func, where):
        def again(*exprs):
            for e in exprs:
                self.strings(e, module, func, where)

        if isinstance(expr, ast.Constant):
            if isinstance(expr.value, str) and SIGNATURE.match(expr.value):
                self.found.setdefault(expr.value, where)
        elif isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            again(*expr.elts)
        elif isinstance(expr, ast.Dict):
            again(*expr.values)
        elif isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            again(expr.elt)
        elif isinstance(expr, ast.IfExp):
            again(expr.body, expr.orelse)
        elif isinstance(expr, ast.BoolOp):
            again(*expr.values)
        elif isinstance(expr, ast.BinOp):
            again(expr.left, expr.right)
        elif isinstance(expr, (ast.Starred, ast.Subscript)):
            again(expr.value)
        elif isinstance(expr, ast.Name):
            self.name(expr.id, module, func, where)
        elif isinstance(expr, ast.Call):
            callees = module.callees(expr.func)
            for other, callee in callees:
                for node in ast.walk(callee):
                    if isinstance(node, ast.Return) and node.value is not None:
                        self.strings(node.value, other, callee, where)
            if not callees and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("get", "setdefault"):
                again(expr.func.value, *expr.args[1:])  # a table's values, or the default
            elif not callees and getattr(expr.func, "id", None) in ("list", "sorted", "set", "tuple"):
                again(*expr.args)

    def name(self, name, module, func, where):
        """A local variable's every value (assigned, appended, or an item of what a loop runs over); else a module
        constant."""
        if func is not None and (_assigns(func, name) or name in _parameters(func) or any(
                isinstance(n, (ast.For, ast.comprehension)) and name in {t.id for t in ast.walk(n.target)
                                                                         if isinstance(t, ast.Name)}
                for n in ast.walk(func))):
            for node in ast.walk(func):
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
                    self.strings(node.value, module, func, where)
                elif isinstance(node, ast.AugAssign) and getattr(node.target, "id", None) == name:
                    self.strings(node.value, module, func, where)
                elif isinstance(node, (ast.For, ast.comprehension)):
                    targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
                    for index, target in enumerate(targets):
                        if getattr(target, "id", None) == name:
                            self.items(node.iter, index if isinstance(node.target, ast.Tuple) else None, module,
                                       func, where)
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                        getattr(node.func.value, "id", None) == name and node.args and \
                        node.func.attr in ("append", "insert", "extend"):
                    self.strings(node.args[-1], module, func, where)
            return  # a parameter's values are collected where it is called with a signature
        found = module.constant(name)
        if found:
            self.strings(found[1], found[0], None, where)

    def items(self, iterable, index, module, func, where):
        """The strings of what a loop runs over (of item[index] where the loop unpacks its items)."""
        if isinstance(iterable, ast.Name) and not _assigns(func, iterable.id):
            found = module.constant(iterable.id)
            if found:
                module, iterable = found
        for item in getattr(iterable, "elts", []):
            if index is None:
                self.strings(item, module, func, where)
            elif isinstance(item, (ast.Tuple, ast.List)) and len(item.elts) > index:
                self.strings(item.elts[index], module, func, where)


def watch_signatures():
    """{signature: the function that gives it} of every watch check, and of the engine for a check that raised."""
    collector = _Signatures()
    roots = [(spec.func.__module__, spec.func.__name__) for spec in select(load_all(), WATCH)]
    roots.append(("agents.cudaprobe.engine", "_run_one"))  # a check that raised: agent_check_error, any check
    for module_name, name in roots:
        module = _Module.of(module_name)
        for func in module.functions[name]:
            collector.function(module, func)
    return collector.found


def test_the_signatures_are_read_from_every_way_the_agent_gives_them():
    found = watch_signatures()
    assert {
        "fabric_not_registered", "fabric_clique_split", "pcie_aer_nonfatal",  # a literal list, in a helper
        "ecc_uncorrected",  # an argument of a nested helper, appended there
        "nvlink_errors_since_reset",  # one side of a conditional
        "gpu_recovery_reboot", "gpu_recovery_other",  # a module table's value, and the default of its .get
        "gpu_lost", "nvidia_smi_error",  # nvsmi.failure_signature: a table it loops over, and its last return
        "xid_other", "gpu_fallen_off_bus",  # a table indexed by the Xid's class; inserted by position
        "stray_agent_worker",  # assigned to an outcome's signatures
        "env_setting_named", "agent_check_error",  # the engine's, for any check: a setting named, a check raised
    } <= set(found), sorted(found)
    assert "nvml_unreadable" not in found and "driver_gpus" not in found  # facts' keys are no signatures


def test_every_signature_of_the_watch_is_hardware_application_or_a_listed_observation():
    classified = signatures.HARDWARE | signatures.APPLICATION | set(signatures.OBSERVATIONS)
    unplaced = {name: where for name, where in watch_signatures().items() if name not in classified}
    assert unplaced == {}, "place each in cudaweb/health/signatures.py: %s" % unplaced


def test_the_classes_are_kept_apart_and_each_observation_says_why():
    observations = set(signatures.OBSERVATIONS)
    assert not signatures.HARDWARE & signatures.APPLICATION and not observations & (
        signatures.HARDWARE | signatures.APPLICATION)
    assert signatures.CONDITIONS <= signatures.HARDWARE
    assert sorted(signatures.PRIORITY) == sorted(signatures.HARDWARE)  # each hardware signature has its place, once
    assert all(isinstance(why, str) and len(why) > 10 for why in signatures.OBSERVATIONS.values())
    assert observations - set(watch_signatures()) == set()  # none listed that the agent no longer gives


def test_the_recorded_real_watch_reports_carry_only_classified_signatures():
    reports = [json.loads(path.read_text()) for path in sorted(REAL.rglob("*watch*.json"))]
    assert len(reports) >= 2
    seen = {s for report in reports for c in report["checks"] for s in c["signatures"]}
    assert "xid_application" in seen
    assert seen - signatures.HARDWARE - signatures.APPLICATION - set(signatures.OBSERVATIONS) == set()


def test_the_root_cause_is_the_fault_before_the_recovery_the_driver_asks_for():
    assert signatures.root_cause(["gpu_recovery_reset", "ecc_uncorrected"]) == "ecc_uncorrected"
    assert signatures.root_cause(["pcie_aer_errors_growing", "pcie_aer_nonfatal"]) == "pcie_aer_nonfatal"


def _nvl72_tray(tmp_path, fabric_of):
    """fabric.nvswitch on a GB200 NVL72 compute tray of 4 GPUs, IMEX running (tests/agent/test_fabric_skus.py)."""
    return fabric.fabric_nvswitch(host(tmp_path, "NVIDIA GB200", 4, fabric_of, [IMEX]))


def _uncorrectable_aer(tmp_path):
    """fabric.pcie_aer on the documented HGX tree with 2 non-fatal completion timeouts on an HCA
    (tests/agent/test_fabric.py)."""
    tree = _make_tree().build(tmp_path / "hgx")
    _aer(tree, "0000:19:00.0", "nonfatal", "CmpltTO", "TOTAL_ERR_NONFATAL", 2)
    return fabric.fabric_pcie_aer(context(Scenario(tmp_path / "scenario"), tree / "sysfs"))


# (signature, the check, its outcome, the state after a clean next look: a condition gone clears the suspect, an
# uncorrectable AER count, kept by the kernel until a reboot, does not)
FAULTS = [
    ("fabric_not_registered", "fabric.nvswitch", lambda tmp_path: _nvl72_tray(tmp_path, alike("Not Started")),
     machine.READY),
    ("fabric_clique_split", "fabric.nvswitch", lambda tmp_path: _nvl72_tray(
        tmp_path, lambda i: ("Completed", "Success", "32766" if i < 2 else "4001", DOMAIN)), machine.READY),
    ("fabric_no_cluster", "fabric.nvswitch", lambda tmp_path: _nvl72_tray(
        tmp_path, alike("Completed", "Success", "0", ZERO)), machine.READY),
    ("pcie_aer_nonfatal", "fabric.pcie_aer", _uncorrectable_aer, machine.QUARANTINED),
]


def _watch_report_with(check_id, outcome):
    """The stand-in watch report with one check as the agent judged it, written in as standin.FAULTS are."""
    report = watch_report()
    check = next(c for c in report["checks"] if c["id"] == check_id)
    check.update(status=outcome.status, signatures=list(outcome.signatures), summary=outcome.summary,
                 evidence=outcome.evidence)
    report["verdict"] = outcome.status
    return report


@pytest.mark.django_db
@pytest.mark.parametrize("signature, check_id, judged, after_a_clean_look", FAULTS, ids=[f[0] for f in FAULTS])
def test_a_fabric_or_aer_fault_the_health_command_fails_makes_a_ready_node_suspect(
        loop_settings, act_policy, tmp_path, signature, check_id, judged, after_a_clean_look):
    outcome = judged(tmp_path)
    assert (outcome.status, outcome.signatures) == ("fail", [signature]), outcome.summary
    report = _watch_report_with(check_id, outcome)
    assert health.judge(report)[0] == health.UNHEALTHY  # what the node-local health command answers
    node = make_node("gpu-%s" % signature.replace("_", "-"))
    report_ingest(node, watch_report())
    assert NodeLoop.objects.get(node=node).state == machine.READY
    result = report_ingest(node, report)
    assert result.root_cause == signature
    assert NodeLoop.objects.get(node=node).state == machine.SUSPECT
    event = HealthEvent.objects.get(node=node, signature=signature)
    assert (event.klass, event.check_id) == (HealthEvent.Klass.HARDWARE, check_id)
    report_ingest(node, watch_report())
    assert NodeLoop.objects.get(node=node).state == after_a_clean_look
