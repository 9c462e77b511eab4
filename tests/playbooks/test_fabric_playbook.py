"""Every signature the fabric checks can give selects the fabric playbook."""

import ast
from pathlib import Path

from cudaweb.playbooks.library import load

FABRIC = Path(__file__).resolve().parents[2] / "agents" / "cudaprobe" / "checks" / "fabric.py"


def _signatures_in_source():
    found = set()
    for node in ast.walk(ast.parse(FABRIC.read_text())):
        if isinstance(node, ast.keyword) and node.arg == "signatures":
            found.update(n.value for n in ast.walk(node.value)
                         if isinstance(n, ast.Constant) and isinstance(n.value, str))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "append" and node.args and \
                isinstance(node.args[0], ast.Constant) and str(node.args[0].value).islower() and \
                "_" in str(node.args[0].value) and " " not in str(node.args[0].value):
            found.add(node.args[0].value)
    return {s for s in found if s != "sxid_history"}


def test_every_fabric_signature_selects_the_fabric_playbook():
    signatures = _signatures_in_source()
    assert {"nvlink_link_down", "ib_port_down", "pcie_aer_fatal", "sxid_fatal", "ib_rate_low"} <= signatures
    assert signatures - set(load()["fabric"].signatures) == set()
