"""The fabric checks (checks/fabric.py), each judging rule on a captured or documented tree.

Real: the lent 1 x H200 (tests/fixtures/fabric/h200x1-device: no NVLink, no HCA, no AER exposed) and the 2 x H200
HGX host's nvidia-smi -q (Fabric Completed / Success). Documented: an 8-GPU HGX H100 with NDR HCAs and a RoCE port
(tests/fixtures/fabric/hgx-documented/make_tree.py), changed one thing per test. The checks run in-process against
the fake nvidia-smi and dmesg (tests/fakes/bin) with CUDAPROBE_SYSFS pointing at the tree; one test runs the whole
agent process and checks the report against the schema.
"""

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agents.cudaprobe import nvsmi
from agents.cudaprobe.checks import fabric
from agents.cudaprobe.engine import Context
from tests.agent.harness import FAKE_BIN, REPO, Scenario, check, run_agent

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DEVICE = FIXTURES / "fabric" / "h200x1-device"
TOPO_8 = FIXTURES / "topo" / "tab_format_8gpu_nv18_12nics_trailing_tabs.txt"
SXID_FATAL = ("[ 5000.100000] nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 24007, Fatal, Link 28 sourcetrack TCEN0 "
              "crumbstore ECC DBE Error\n")
SXID_NONFATAL = "[ 5000.200000] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress error\n"


def _make_tree():
    spec = importlib.util.spec_from_file_location("make_tree", FIXTURES / "fabric" / "hgx-documented" / "make_tree.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def hgx(tmp_path):
    """The documented HGX tree, and a scenario replaying the real H200 outputs plus its nvlink texts."""
    tree = _make_tree().build(tmp_path / "hgx")
    scenario = Scenario(tmp_path / "scenario")
    for name in ("nvlink_s.txt", "nvlink_e.txt"):
        scenario.write(name, (tree / name).read_text())
    scenario.write("topo.txt", TOPO_8.read_text())
    return tree, scenario


def context(scenario, sysfs=None, options=None, facts=None, **environ):
    env = {"PATH": "%s:/usr/bin:/bin" % FAKE_BIN, "CUDAPROBE_NVML": "0", "PYTHONPATH": str(REPO)}
    env.update(scenario.env)
    if sysfs is not None:
        env["CUDAPROBE_SYSFS"] = str(sysfs)
    env.update(environ)
    ctx = Context("quick", dict(options or {}), environ=env)
    ctx.facts.update(facts or {})
    return ctx


def topology_of(path):
    return {"topology": nvsmi.parse_topology(Path(path).read_text())}


def edit(path, old, new):
    text = path.read_text()
    assert old in text, (old, path)
    path.write_text(text.replace(old, new, 1))


# ---- fabric.nvlink

def test_the_real_h200_through_nvml_has_no_nvlink_and_passes(tmp_path):
    facts = {"nvml_fabric": json.loads((DEVICE / "nvml_fabric.json").read_text())}
    outcome = fabric.fabric_nvlink(context(Scenario(tmp_path / "s"), facts=facts))
    assert outcome.status == "pass" and "no NVLink" in outcome.summary and outcome.metrics["nvlink_active_links"] == 0


def test_the_real_h200_through_nvidia_smi_prints_no_link_and_passes(tmp_path):
    scenario = Scenario(tmp_path / "s")
    for name in ("nvlink_s.txt", "nvlink_e.txt"):
        scenario.write(name, (DEVICE / name).read_text())  # empty: what nvidia-smi printed there
    outcome = fabric.fabric_nvlink(context(scenario))
    assert outcome.status == "pass" and outcome.metrics["nvlink_active_links"] == 0


def test_eight_gpus_with_every_link_up_pass_and_their_counters_are_metrics(hgx):
    tree, scenario = hgx
    outcome = fabric.fabric_nvlink(context(scenario, facts=topology_of(TOPO_8)))
    assert outcome.status == "pass", outcome.summary
    assert outcome.metrics["nvlink_active_links"] == 144 and outcome.metrics["nvlink_speed_min_gbs"] == 26.562
    assert outcome.metrics["nvlink_replay.gpu7"] == 0 and outcome.metrics["nvlink_errors_total"] == 0


def test_an_inactive_link_fails_naming_the_gpu_and_link(hgx):
    tree, scenario = hgx
    lines = scenario.root.joinpath("nvlink_s.txt").read_text().splitlines()
    gpu3 = lines.index(next(line for line in lines if line.startswith("GPU 3:")))
    lines[gpu3 + 1 + 7] = "\t Link 7: <inactive>"
    scenario.write("nvlink_s.txt", "\n".join(lines) + "\n")
    outcome = fabric.fabric_nvlink(context(scenario, facts=topology_of(TOPO_8)))
    assert outcome.status == "fail" and outcome.signatures == ["nvlink_link_down"]
    assert "GPU 3 link 7" in outcome.summary and outcome.metrics["nvlink_links_down"] == 1


def test_a_gpu_with_no_active_link_where_the_topology_has_nvlink_fails(hgx, tmp_path):
    tree, scenario = hgx
    scenario.write("nvlink_s.txt", "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n" +
                   "".join("\t Link %d: <inactive>\n" % i for i in range(18)))
    outcome = fabric.fabric_nvlink(context(scenario, facts=topology_of(TOPO_8)))
    assert outcome.status == "fail" and "GPU 0 link 0" in outcome.summary


def test_counters_that_grew_since_the_previous_validation_warn_with_the_growth(hgx):
    tree, scenario = hgx
    edit(scenario.root / "nvlink_e.txt", "\t Link 5: Replay Errors: 0", "\t Link 5: Replay Errors: 7")
    previous = {"fabric.nvlink": {"nvlink_replay.gpu0": 2}}
    outcome = fabric.fabric_nvlink(context(scenario, options={"fabric_previous": previous}, facts=topology_of(TOPO_8)))
    assert outcome.status == "warn" and outcome.signatures == ["nvlink_errors_growing"]
    assert "nvlink_replay.gpu0 2 -> 7 (+5)" in outcome.summary and outcome.metrics["nvlink_replay.gpu0"] == 7
    assert "link 5 replay=7" in outcome.evidence


def test_counters_unchanged_since_the_previous_validation_pass(hgx):
    tree, scenario = hgx
    edit(scenario.root / "nvlink_e.txt", "\t Link 5: Replay Errors: 0", "\t Link 5: Replay Errors: 7")
    previous = {"fabric.nvlink": {"nvlink_replay.gpu0": 7}}
    outcome = fabric.fabric_nvlink(context(scenario, options={"fabric_previous": previous}, facts=topology_of(TOPO_8)))
    assert outcome.status == "pass" and "since the previous validation" in outcome.summary


def test_counters_without_a_previous_validation_warn_as_counted_since_the_reset(hgx):
    tree, scenario = hgx
    edit(scenario.root / "nvlink_e.txt", "\t Link 0: CRC Errors: 0", "\t Link 0: CRC Errors: 3")
    outcome = fabric.fabric_nvlink(context(scenario, facts=topology_of(TOPO_8)))
    assert outcome.status == "warn" and outcome.signatures == ["nvlink_errors_since_reset"]
    assert "nvlink_crc_flit.gpu0=3" in outcome.summary


def test_a_counter_lower_than_before_was_reset_and_says_so(hgx):
    tree, scenario = hgx
    edit(scenario.root / "nvlink_e.txt", "\t Link 0: CRC Errors: 0", "\t Link 0: CRC Errors: 1")
    previous = {"fabric.nvlink": {"nvlink_crc_flit.gpu0": 40}}
    outcome = fabric.fabric_nvlink(context(scenario, options={"fabric_previous": previous}, facts=topology_of(TOPO_8)))
    assert outcome.status == "warn" and "reset since the previous validation" in outcome.summary


# ---- fabric.nvswitch

def test_the_real_h200_hgx_in_the_fabric_passes(tmp_path):
    outcome = fabric.fabric_nvswitch(context(Scenario(tmp_path / "s")))  # the recorded 2 x H200 nvidia-smi -q
    assert outcome.status == "pass", outcome.summary
    assert "state Completed, status Success" in outcome.summary and "00000000:00:06.0" in outcome.evidence


def test_the_real_single_h200_vm_has_no_nvswitch_and_passes(tmp_path):
    scenario = Scenario(tmp_path / "s")
    scenario.write("q.txt", (DEVICE / "nvsmi_q.txt").read_text())
    outcome = fabric.fabric_nvswitch(context(scenario))
    assert outcome.status == "pass" and "no NVSwitch" in outcome.summary


@pytest.mark.parametrize("state,status,expected,signature", [
    ("In Progress", "N/A", "warn", "fabric_in_progress"),
    ("Not Started", "N/A", "fail", "fabric_manager_not_running"),
    ("Completed", "Insufficient Resources", "fail", "fabric_registration_failed"),
])
def test_a_gpu_not_ready_in_the_fabric_is_named(tmp_path, state, status, expected, signature):
    scenario = Scenario(tmp_path / "s")
    scenario.edit("q.txt", "        State                                          : Completed\n"
                  "        Status                                         : Success",
                  "        State                                          : %s\n"
                  "        Status                                         : %s" % (state, status))
    # an empty /proc: no Fabric Manager process
    outcome = fabric.fabric_nvswitch(context(scenario, CUDAPROBE_PROC_DIR=str(tmp_path)))
    assert outcome.status == expected and outcome.signatures == [signature], outcome.summary
    if signature == "fabric_manager_not_running":
        assert "not running" in outcome.summary


def test_a_fatal_sxid_since_the_previous_validation_fails_and_an_older_one_is_history(tmp_path):
    scenario = Scenario(tmp_path / "s")
    with open(scenario.root / "dmesg.txt", "a") as log:
        log.write(SXID_FATAL)
    stat = tmp_path / "stat"
    stat.write_text("btime 1000000\n")
    outcome = fabric.fabric_nvswitch(context(scenario, CUDAPROBE_PROC_STAT=str(stat)))
    assert outcome.status == "fail" and outcome.signatures == ["sxid_fatal"] and "24007" in outcome.summary
    later = {"since": "1970-01-13T00:00:00Z"}  # 1036800 s: after boot (1000000) + 5000 s
    outcome = fabric.fabric_nvswitch(context(scenario, options=later, CUDAPROBE_PROC_STAT=str(stat)))
    assert outcome.status == "pass" and outcome.signatures == ["sxid_history"]
    assert outcome.metrics["sxid_count_before_previous_validation"] == 1


def test_a_non_fatal_sxid_warns(tmp_path):
    scenario = Scenario(tmp_path / "s")
    with open(scenario.root / "dmesg.txt", "a") as log:
        log.write(SXID_NONFATAL)
    outcome = fabric.fabric_nvswitch(context(scenario))
    assert outcome.status == "warn" and outcome.signatures == ["sxid_nonfatal"] and "12028" in outcome.summary


# ---- fabric.infiniband

def test_healthy_ndr_ports_and_a_roce_port_pass(hgx):
    tree, scenario = hgx
    outcome = fabric.fabric_infiniband(context(scenario, tree / "sysfs", options={"ib_rate_gbps": 400}))
    assert outcome.status == "pass", outcome.summary
    assert outcome.metrics["ib_ports"] == 9 and outcome.metrics["ib_symbol_error.mlx5_0_1"] == 0
    assert "netdev ens8f0np0 up, 200000 Mb/s, MTU 9000" in outcome.evidence


def test_a_port_not_active_fails(hgx):
    tree, scenario = hgx
    port = tree / "sysfs/class/infiniband/mlx5_3/ports/1"
    (port / "state").write_text("1: DOWN\n")
    (port / "phys_state").write_text("2: Polling\n")
    outcome = fabric.fabric_infiniband(context(scenario, tree / "sysfs"))
    assert outcome.status == "fail" and outcome.signatures == ["ib_port_down"]
    assert "mlx5_3/1 is DOWN / Polling" in outcome.summary


def test_a_port_slower_than_the_node_expects_fails_and_without_an_expectation_warns(hgx):
    tree, scenario = hgx
    (tree / "sysfs/class/infiniband/mlx5_5/ports/1/rate").write_text("200 Gb/sec (2X NDR)\n")
    outcome = fabric.fabric_infiniband(context(scenario, tree / "sysfs", options={"ib_rate_gbps": 400}))
    assert outcome.status == "fail" and outcome.signatures == ["ib_rate_low"] and "mlx5_5/1" in outcome.summary
    outcome = fabric.fabric_infiniband(context(scenario, tree / "sysfs"))
    assert outcome.status == "warn" and outcome.signatures == ["ib_rate_low"]


def test_port_counters_that_grew_warn_and_a_link_downed_is_a_flap(hgx):
    tree, scenario = hgx
    counters = tree / "sysfs/class/infiniband/mlx5_2/ports/1/counters"
    (counters / "symbol_error").write_text("12\n")
    (counters / "link_downed").write_text("3\n")
    previous = {"fabric.infiniband": {"ib_link_downed.mlx5_2_1": 1}}
    outcome = fabric.fabric_infiniband(context(scenario, tree / "sysfs", options={"fabric_previous": previous}))
    assert outcome.status == "warn" and outcome.signatures == ["ib_errors_growing", "ib_link_flaps"]
    assert "ib_link_downed.mlx5_2_1 1 -> 3 (+2)" in outcome.summary
    assert "ib_symbol_error.mlx5_2_1 0 -> 12 (+12)" in outcome.summary


def test_a_roce_port_whose_netdev_is_down_fails_and_a_small_mtu_warns(hgx):
    tree, scenario = hgx
    net = tree / "sysfs/class/net/ens8f0np0"
    (net / "mtu").write_text("1500\n")
    outcome = fabric.fabric_infiniband(context(scenario, tree / "sysfs"))
    assert outcome.status == "warn" and outcome.signatures == ["roce_mtu_small"]
    (net / "operstate").write_text("down\n")
    outcome = fabric.fabric_infiniband(context(scenario, tree / "sysfs"))
    assert outcome.status == "fail" and outcome.signatures == ["roce_netdev_down"]


def test_the_real_h200_vm_has_no_hca_and_passes_unless_the_node_should_have_one(tmp_path):
    scenario = Scenario(tmp_path / "s")
    outcome = fabric.fabric_infiniband(context(scenario, DEVICE / "sysfs"))
    assert outcome.status == "pass" and "no InfiniBand" in outcome.summary and outcome.metrics["ib_ports"] == 0
    outcome = fabric.fabric_infiniband(context(scenario, DEVICE / "sysfs", options={"ib_rate_gbps": 400}))
    assert outcome.status == "fail" and outcome.signatures == ["ib_port_missing"]


# ---- fabric.pcie_aer

def test_gpus_and_hcas_without_aer_errors_pass(hgx):
    tree, scenario = hgx
    outcome = fabric.fabric_pcie_aer(context(scenario, tree / "sysfs"))
    assert outcome.status == "pass" and outcome.metrics["pcie_aer_functions"] == 17 + 33
    # 8 PCIe switches (an upstream and two downstream ports each) under 8 root ports, and the RoCE NIC's root port
    assert outcome.metrics["pcie_aer_ports_read"] == 33 and "33 port(s) above the devices" in outcome.summary
    assert outcome.metrics["pcie_aer_fatal.0000:18:00.0"] == 0 and outcome.metrics["pcie_aer_fatal.0000:14:01.0"] == 0


def test_the_real_h200_vm_exposes_no_aer_and_skips(tmp_path):
    outcome = fabric.fabric_pcie_aer(context(Scenario(tmp_path / "s"), DEVICE / "sysfs"))
    assert outcome.status == "skip" and "GPU 0000:00:06.0" in outcome.summary


def _aer(tree, bdf, kind, name, total_name, count):
    path = tree / "sysfs/bus/pci/devices" / bdf / ("aer_dev_%s" % kind)
    edit(path, "%s 0" % name, "%s %d" % (name, count))
    edit(path, "%s 0" % total_name, "%s %d" % (total_name, count))


@pytest.mark.parametrize("kind,name,total,signature", [
    ("fatal", "MalfTLP", "TOTAL_ERR_FATAL", "pcie_aer_fatal"),
    ("nonfatal", "CmpltTO", "TOTAL_ERR_NONFATAL", "pcie_aer_nonfatal"),
])
def test_an_uncorrectable_aer_count_on_the_first_validation_fails(hgx, kind, name, total, signature):
    tree, scenario = hgx
    _aer(tree, "0000:19:00.0", kind, name, total, 2)
    outcome = fabric.fabric_pcie_aer(context(scenario, tree / "sysfs"))  # no previous validation
    assert outcome.status == "fail" and outcome.signatures == [signature], outcome.summary
    assert "since boot" in outcome.summary and "%s=2 on HCA mlx5_0 0000:19:00.0 (%s=2)" % (total, name) in \
        outcome.summary


def test_an_uncorrectable_count_already_there_at_the_previous_validation_still_fails(hgx):
    tree, scenario = hgx
    _aer(tree, "0000:9a:00.0", "fatal", "MalfTLP", "TOTAL_ERR_FATAL", 1)
    previous = {"fabric.pcie_aer": {"pcie_aer_fatal.0000:9a:00.0": 1}}  # the first run's count, kept as baseline
    outcome = fabric.fabric_pcie_aer(context(scenario, tree / "sysfs", options={"fabric_previous": previous}))
    assert outcome.status == "fail" and outcome.signatures == ["pcie_aer_fatal"]
    assert "counted before the previous validation too" in outcome.summary


def test_an_error_on_the_switch_port_above_a_gpu_fails_naming_the_port(hgx):
    tree, scenario = hgx
    _aer(tree, "0000:98:00.0", "nonfatal", "DLP", "TOTAL_ERR_NONFATAL", 3)  # the downstream port of GPU 9a
    outcome = fabric.fabric_pcie_aer(context(scenario, tree / "sysfs"))
    assert outcome.status == "fail" and "on port above GPU 0000:9a:00.0 0000:98:00.0 (DLP=3)" in outcome.summary
    assert outcome.metrics["pcie_aer_nonfatal.0000:98:00.0"] == 3


def test_an_error_on_the_switch_port_above_an_hca_fails_naming_the_port(hgx):
    """A bad riser or cable between an InfiniBand card and its switch shows on the switch's downstream port."""
    tree, scenario = hgx
    _aer(tree, "0000:16:01.0", "fatal", "DLP", "TOTAL_ERR_FATAL", 1)  # the downstream port of HCA mlx5_0
    outcome = fabric.fabric_pcie_aer(context(scenario, tree / "sysfs"))
    assert outcome.status == "fail" and outcome.signatures == ["pcie_aer_fatal"], outcome.summary
    assert "port above HCA" in outcome.summary and "0000:16:01.0 (DLP=1)" in outcome.summary
    assert outcome.metrics["pcie_aer_fatal.0000:16:01.0"] == 1


def test_correctable_counts_are_judged_by_growth(hgx):
    tree, scenario = hgx
    _aer(tree, "0000:96:01.0", "correctable", "BadDLLP", "TOTAL_ERR_COR", 4)  # a root port
    outcome = fabric.fabric_pcie_aer(context(scenario, tree / "sysfs"))
    assert outcome.status == "warn" and outcome.signatures == ["pcie_aer_errors_since_reset"]
    previous = {"fabric.pcie_aer": {"pcie_aer_correctable.0000:96:01.0": 1}}
    outcome = fabric.fabric_pcie_aer(context(scenario, tree / "sysfs", options={"fabric_previous": previous}))
    assert outcome.status == "warn" and outcome.signatures == ["pcie_aer_errors_growing"]
    assert "pcie_aer_correctable.0000:96:01.0 1 -> 4 (+3)" in outcome.summary
    previous = {"fabric.pcie_aer": {"pcie_aer_correctable.0000:96:01.0": 4}}
    outcome = fabric.fabric_pcie_aer(context(scenario, tree / "sysfs", options={"fabric_previous": previous}))
    assert outcome.status == "pass" and "since the previous validation" in outcome.summary


# ---- the agent process

def test_the_agent_lists_the_fabric_checks():
    done = subprocess.run([sys.executable, "-m", "agents.cudaprobe", "--list"], cwd=REPO, capture_output=True,
                          text=True, check=True)
    for check_id in ("fabric.nvlink", "fabric.nvswitch", "fabric.infiniband", "fabric.pcie_aer"):
        assert check_id in done.stdout


def test_a_bad_fabric_previous_is_a_clear_error():
    done = subprocess.run([sys.executable, "-m", "agents.cudaprobe", "--fabric-previous", "[1", "--only", "L0"],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2 and "--fabric-previous: not JSON" in done.stderr


def test_the_whole_agent_judges_a_documented_tree_into_a_valid_report(hgx):
    tree, scenario = hgx
    (tree / "sysfs/class/infiniband/mlx5_1/ports/1/counters/symbol_error").write_text("9\n")
    previous = json.dumps({"fabric.infiniband": {}, "fabric.nvlink": {}})
    report, _ = run_agent(scenario, ["--only", "fabric", "--fabric-previous", previous, "--ib-rate", "400"],
                          env={"CUDAPROBE_SYSFS": str(tree / "sysfs"), "CUDAPROBE_NVML": "0"})
    assert check(report, "fabric.nvlink")["status"] == "pass"
    assert check(report, "fabric.nvswitch")["status"] == "pass"
    ib = check(report, "fabric.infiniband")
    assert ib["status"] == "warn" and ib["metrics"]["ib_symbol_error.mlx5_1_1"] == 9
    assert check(report, "fabric.pcie_aer")["status"] == "pass"
    shutil.rmtree(tree)
