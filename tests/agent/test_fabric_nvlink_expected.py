"""fabric.nvlink judged against the links each GPU of its SKU has (agents/cudaprobe/fabric_expectations.py): an
SXM board never passes with fewer links read or active than its GPUs have, "no error counted" is said only of
counters that were read. Stand-ins in nvidia-smi's documented formats (`nvidia-smi nvlink -s` as
tests/fixtures/fabric/hgx-documented/README.md cites it; a GB200's 53.125 GB/s links as printed in
NVIDIA/k8s-test-infra#371), the topology from tests/fixtures/topo/ (real outputs)."""

import json

import pytest

from agents.cudaprobe.checks import fabric
from tests.agent.harness import Scenario, check, run_agent
from tests.agent.test_fabric import FIXTURES, TOPO_8, context, topology_of

TOPO_8_PCIE = FIXTURES / "topo" / "pcie_switch_across_sockets_8x4090_before.txt"


def listing(name, count, per_gpu=18, speed="26.562 GB/s", inactive=()):
    """`nvidia-smi -L` and `nvidia-smi nvlink -s` / `-e` of `count` GPUs named `name` (link (gpu, n) in
    `inactive` printed <inactive>; per_gpu 0: the GPU header and no link line)."""
    heads = ["GPU %d: %s (UUID: GPU-%08d-0000-0000-0000-000000000000)" % (i, name, i) for i in range(count)]
    status = "".join(head + "\n" + "".join("\t Link %d: %s\n" % (n, "<inactive>" if (i, n) in inactive else speed)
                                             for n in range(per_gpu)) for i, head in enumerate(heads))
    errors = "".join(head + "\n" + "".join("\t Link %d: %s Errors: 0\n" % (n, c) for n in range(per_gpu)
                                             for c in ("Replay", "Recovery", "CRC")) for head in heads)
    return "".join(h + "\n" for h in heads), status, errors


def board(tmp_path, name, count, topo=TOPO_8, **kwargs):
    gpus, status, errors = listing(name, count, **kwargs)
    scenario = Scenario(tmp_path / "s")
    scenario.write("L.txt", gpus)
    scenario.write("nvlink_s.txt", status)
    scenario.write("nvlink_e.txt", errors)
    if topo:
        scenario.write("topo.txt", topo.read_text())
    facts = dict(topology_of(topo) if topo else {}, driver_gpus=[{"index": i, "name": name} for i in range(count)])
    return scenario, facts


def test_eight_h200_sxm_listed_without_a_link_while_the_topology_says_nv18_do_not_pass(tmp_path):
    scenario, facts = board(tmp_path, "NVIDIA H200", 8, per_gpu=0)
    outcome = fabric.fabric_nvlink(context(scenario, facts=facts))
    assert outcome.status == "warn" and outcome.signatures == ["nvlink_unreadable"], outcome.summary
    assert "not read" in outcome.summary and "listed 8 GPU(s) but no link" in outcome.summary
    assert "NVML not used: nvml_disabled" in outcome.summary and "18 per GPU" in outcome.summary
    assert "no error counted" not in outcome.summary


def test_every_link_inactive_and_no_nvlink_in_the_topology_is_not_a_host_without_nvlink(tmp_path):
    everything = {(i, n) for i in range(8) for n in range(18)}
    scenario, facts = board(tmp_path, "NVIDIA H200", 8, topo=TOPO_8_PCIE, inactive=everything)
    outcome = fabric.fabric_nvlink(context(scenario, facts=facts))
    assert outcome.status == "fail" and outcome.signatures == ["nvlink_link_down"], outcome.summary
    assert "no NVLink on this host" not in outcome.summary and "GPU 0: 0 of 18 links active" in outcome.summary


def test_an_sxm_board_listed_without_a_link_and_no_nvlink_in_the_topology_fails(tmp_path):
    scenario, facts = board(tmp_path, "NVIDIA H100 80GB HBM3", 8, topo=TOPO_8_PCIE, per_gpu=0)
    outcome = fabric.fabric_nvlink(context(scenario, facts=facts))
    assert outcome.status == "fail" and "HGX H100 8-GPU, whose GPUs have 18 each" in outcome.summary


def test_fewer_links_listed_than_the_sku_has_fails(tmp_path):
    scenario, facts = board(tmp_path, "NVIDIA H200", 8, per_gpu=12)
    outcome = fabric.fabric_nvlink(context(scenario, facts=facts))
    assert outcome.status == "fail" and "GPU 0: 12 of 18 links active (12 listed)" in outcome.summary


def test_nvml_listing_eight_h200_without_links_does_not_pass(tmp_path):
    nvml = {"gpus": [{"index": i, "bus_id": "0000:%02x:00.0" % i, "name": "NVIDIA H200", "links": [],
                      "fabric": None} for i in range(8)]}
    scenario, facts = board(tmp_path, "NVIDIA H200", 8)
    outcome = fabric.fabric_nvlink(context(scenario, facts=dict(facts, nvml_fabric=nvml)))
    assert outcome.status == "warn" and "NVML listed 8 GPU(s) but no link" in outcome.summary


def test_eighteen_healthy_links_per_h200_pass_saying_so(tmp_path):
    scenario, facts = board(tmp_path, "NVIDIA H200", 8)
    outcome = fabric.fabric_nvlink(context(scenario, facts=facts))
    assert outcome.status == "pass", outcome.summary
    assert "144 NVLink(s) active over 8 GPU(s)" in outcome.summary and "18 per GPU" in outcome.summary
    assert "no error counted" in outcome.summary and outcome.metrics["nvlink_links_expected_per_gpu"] == 18


def test_no_error_counted_is_said_only_where_a_counter_was_read(tmp_path):
    scenario, facts = board(tmp_path, "NVIDIA H200", 8)
    scenario.write("nvlink_e.txt", "")  # nvidia-smi nvlink -e printed nothing
    outcome = fabric.fabric_nvlink(context(scenario, facts=facts))
    assert outcome.status == "pass"
    assert "no error counted" not in outcome.summary
    assert "error counters not read (nvidia-smi nvlink -e listed no counter)" in outcome.summary


def test_one_h200_alone_in_a_vm_has_no_peer_and_passes_saying_why(tmp_path):
    scenario, facts = board(tmp_path, "NVIDIA H200", 1, topo=None, per_gpu=0)
    outcome = fabric.fabric_nvlink(context(scenario, facts=facts))
    assert outcome.status == "pass" and "no NVLink in use: one NVIDIA H200 GPU on this host" in outcome.summary


@pytest.mark.parametrize("count,inactive,expected,said", [
    (4, (), "pass", "72 NVLink(s) active over 4 GPU(s) at 53.1 GB/s (18 per GPU"),
    (4, {(2, 11)}, "fail", "GPU 2 link 11 (the same link is up on another GPU here; this GB200 NVL72 compute "
                           "tray has 18 per GPU)"),
    # an NVL72 tray's links go to the switch trays: judged even where one GPU is seen
    (1, {(0, 3)}, "fail", "GB200 NVL72 compute tray's 18 per GPU: GPU 0: 17 of 18 links active (link 3 inactive)"),
])
def test_a_gb200_tray_has_eighteen_links_per_gpu(tmp_path, count, inactive, expected, said):
    scenario, facts = board(tmp_path, "NVIDIA GB200", count, topo=None, speed="53.125 GB/s", inactive=inactive)
    outcome = fabric.fabric_nvlink(context(scenario, facts=facts))
    assert outcome.status == expected and said in outcome.summary, outcome.summary


def test_bridged_h100_nvl_cards_with_a_bridge_missing_fail_and_without_bridges_pass_saying_so(tmp_path):
    third = {(i, n) for i in range(2) for n in range(8, 12)}  # one of the three bridges of each pair unseated
    scenario, facts = board(tmp_path, "NVIDIA H100 NVL", 2, topo=None, per_gpu=12, speed="25.781 GB/s",
                            inactive=third)
    outcome = fabric.fabric_nvlink(context(scenario, facts=facts))
    assert outcome.status == "fail" and "GPU 0: 8 of 12 links active" in outcome.summary, outcome.summary
    everything = {(i, n) for i in range(2) for n in range(12)}
    scenario, facts = board(tmp_path / "none", "NVIDIA H100 NVL", 2, topo=None, per_gpu=12, inactive=everything)
    outcome = fabric.fabric_nvlink(context(scenario, facts=facts))
    assert outcome.status == "pass" and "no NVLink bridge in use" in outcome.summary


@pytest.mark.parametrize("per_gpu,expected", [(0, ("warn", "fail")), (18, ("pass",))])
def test_the_agent_only_fabric_nvlink_on_an_eight_gpu_sxm_board(tmp_path, per_gpu, expected):
    scenario, _ = board(tmp_path, "NVIDIA H200", 8, per_gpu=per_gpu)
    report, _ = run_agent(scenario, ["--only", "fabric.nvlink"], env={"CUDAPROBE_NVML": "0"})
    nvlink = check(report, "fabric.nvlink")
    assert nvlink["status"] in expected, json.dumps(nvlink)[:600]
    assert check(report, "driver.topology")["status"] == "pass"


# ---- fabric.infiniband: a node that should be on InfiniBand

def test_a_node_expected_on_infiniband_showing_only_roce_ports_fails(tmp_path):
    from tests.agent.test_fabric import _make_tree

    tree = _make_tree().build(tmp_path / "hgx")
    for index in range(8):  # every HCA port on Ethernet: RoCE (Linux sysfs-class-infiniband link_layer)
        (tree / ("sysfs/class/infiniband/mlx5_%d/ports/1/link_layer" % index)).write_text("Ethernet\n")
    scenario = Scenario(tmp_path / "s")
    outcome = fabric.fabric_infiniband(context(scenario, tree / "sysfs", options={"ib_rate_gbps": 400}))
    assert outcome.status == "fail" and outcome.signatures == ["ib_port_missing"], outcome.summary
    assert "RoCE only" in outcome.summary and "mlx5_0/1" in outcome.summary
