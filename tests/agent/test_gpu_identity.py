"""Naming a finding's GPU (agents/cudaprobe/gpu_identity.py) and judging a watch report (agents/cudaprobe/health.py)
on their own: the driver's three spellings of a PCI address, a summary's GPU names, the exit codes."""

import pytest

from agents.cudaprobe import gpu_identity, health
from agents.cudaprobe.engine import Context

ROWS = [{"index": "0", "uuid": "GPU-aaaa", "pci.bus_id": "00000000:18:00.0"},
        {"index": "1", "uuid": "GPU-bbbb", "pci.bus_id": "00000000:2A:00.0"}]


def ctx_with_rows(rows=ROWS, options=None):
    ctx = Context("watch", options or {}, environ={})
    ctx.facts["smi_rows"] = rows
    return ctx


@pytest.mark.parametrize("text, key", [
    ("00000000:18:00.0", (0, 0x18, 0)),  # NVML, nvidia-smi
    ("0000:18:00.0", (0, 0x18, 0)),  # sysfs
    ("PCI:0000:18:00", (0, 0x18, 0)),  # the kernel's Xid line
    ("0001:2a:00.0", (1, 0x2A, 0)),
    ("GPU-aaaa", None),
    ("", None),
])
def test_a_pci_address_in_each_of_the_drivers_spellings(text, key):
    assert gpu_identity.bus_key(text) == key


def test_an_xid_address_finds_its_gpu_and_an_unknown_one_keeps_its_address():
    ctx = ctx_with_rows()
    assert gpu_identity.by_bus(ctx, "PCI:0000:2a:00")["uuid"] == "GPU-bbbb"
    assert gpu_identity.by_bus(ctx, "PCI:0000:99:00") == {"index": None, "uuid": None, "bus_id": "PCI:0000:99:00"}


def test_a_summary_names_gpus_by_index_and_by_address_but_an_address_is_no_index():
    ctx = ctx_with_rows()
    report = {"checks": [
        {"id": "fabric.nvlink", "status": "fail", "summary": "NVLink down: GPU 1 link 3, GPU 1 link 4",
         "signatures": ["nvlink_link_down"], "metrics": {}},
        {"id": "fabric.nvswitch", "status": "warn", "summary": "GPU 00000000:18:00.0 fabric training in progress",
         "signatures": ["fabric_in_progress"], "metrics": {}},
        {"id": "fabric.infiniband", "status": "fail", "summary": "mlx5_0/1 is DOWN / Polling",
         "signatures": ["ib_port_down"], "metrics": {}},
        {"id": "driver.xid", "status": "pass", "summary": "GPU 0 fine", "signatures": [], "metrics": {}},
    ]}
    gpu_identity.attribute(report, ctx)
    nvlink, nvswitch, infiniband, xid = report["checks"]
    assert [(g["uuid"], g["status"]) for g in nvlink["gpus"]] == [("GPU-bbbb", "fail")]
    assert [g["uuid"] for g in nvswitch["gpus"]] == ["GPU-aaaa"]
    assert "gpus" not in infiniband and "gpus" not in xid  # a port is the node's; a pass names nothing


def test_counters_grown_since_the_last_look_name_their_gpu_and_unchanged_ones_do_not():
    ctx = ctx_with_rows(options={"fabric_previous": {"fabric.nvlink": {"nvlink_replay.gpu0": 5}}})
    report = {"checks": [{"id": "fabric.nvlink", "status": "warn", "summary": "NVLink error counters grew",
                          "signatures": ["nvlink_errors_growing"],
                          "metrics": {"nvlink_replay.gpu0": 5, "nvlink_replay.gpu1": 2}}]}
    gpu_identity.attribute(report, ctx)
    assert [g["uuid"] for g in report["checks"][0]["gpus"]] == ["GPU-bbbb"]


def _report(*checks):
    return {"checks": [dict(id=i, status=s, summary=m, signatures=sig) for i, s, m, sig in checks]}


def test_the_first_failed_check_is_the_root_cause_and_a_broken_check_is_could_not_judge():
    assert health.judge(_report(("driver.xid", "warn", "Xid 13", ["xid_application"]))) == (
        0, "healthy: 1 checks; warnings: xid_application")
    assert health.judge(_report(("driver.gpu_state", "fail", "compute mode PROHIBITED", ["compute_mode_prohibited"]),
                                ("driver.gpu_health", "fail", "ECC", ["ecc_uncorrected"]))) == (
        1, "compute_mode_prohibited: compute mode PROHIBITED")
    assert health.judge(_report(("driver.topology", "error", "KeyError: 'x'", ["agent_check_error"])))[0] == 2
    assert health.judge(_report(("driver.topology", "error", "KeyError", ["agent_check_error"]),
                                ("driver.xid", "fail", "Xid 79", ["xid_critical"])))[0] == 1
