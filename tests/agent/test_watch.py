"""The watch between validations (`--mode watch`, issue 30): L0-L1 and the fabric only, no torch in any process, an
answer in under 3 s here, and findings the dashboard can make events of: stable signatures and the GPU by UUID.

The real agent process runs against the recorded 2 x H200 outputs (tests/agent/harness.py), through the stand-in
pynvml (NVML path) or the stand-in nvidia-smi; faults are written into those recordings in the formats NVIDIA
documents (Xid lines as the kernel prints them: NVRM: Xid (PCI:dddd:bb:dd): code, ...).
"""

import json
import re
import time

import pytest

from agents.cudaprobe import nvsmi
from tests.agent.harness import REPO, TESTS, Scenario, check, run_agent

WATCH = ("--mode", "watch")
NVML_ENV = {"PYTHONPATH": "%s:%s" % (TESTS / "fakes" / "pynvml_replay", REPO)}
SMI_ENV = {"CUDAPROBE_NVML": "0"}
# What the driver printed on a faulting kernel (NVIDIA, "Xid Errors": Xid 13 graphics engine exception, 31 MMU
# fault, 43 channel stopped), on the recorded host's GPU 0 (PCI 0000:00:06) or GPU 1 (0000:00:07)
APP_XIDS_GPU0 = (
    "[ 5001.000001] NVRM: Xid (PCI:0000:00:06): 13, pid=4242, name=python3, Graphics SM Warp Exception on "
    "(GPC 0, TPC 0, SM 0): Out Of Range Address\n"
    "[ 5001.000002] NVRM: Xid (PCI:0000:00:06): 31, pid=4242, name=python3, Ch 00000008, intr 00000000. MMU Fault: "
    "ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x0_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE\n"
    "[ 5001.000003] NVRM: Xid (PCI:0000:00:06): 43, pid=4242, name=python3, Ch 00000008\n")
XID79_GPU1 = "[ 5002.000001] NVRM: Xid (PCI:0000:00:07): 79, pid=0, GPU has fallen off the bus.\n"


@pytest.fixture
def scenario(tmp_path):
    return Scenario(tmp_path / "host")


def uuids(scenario):
    return {g["index"]: g["uuid"] for g in nvsmi.parse_list((scenario.root / "L.txt").read_text())}


def append_dmesg(scenario, text):
    with open(scenario.root / "dmesg.txt", "a") as log:
        log.write(text)


def test_the_watch_runs_the_host_driver_and_fabric_checks_and_nothing_above(scenario):
    report, done = run_agent(scenario, WATCH, env=NVML_ENV)
    assert report["mode"] == "watch" and report["verdict"] == "pass", done.stderr[-2000:]
    assert {c["layer"] for c in report["checks"]} == {"L0", "L1"}
    ids = {c["id"] for c in report["checks"]}
    assert {"driver.xid", "driver.gpu_health", "driver.recovery_action", "driver.clocks_thermal", "driver.processes",
            "fabric.nvlink", "fabric.nvswitch", "fabric.infiniband"} <= ids
    assert not {i for i in ids if i.split(".")[0] in ("torch", "cuda", "comm", "train", "stress", "runtime")}
    assert "workers" not in json.dumps(report.get("timing", {})) or report["timing"]["workers"] == []


def test_the_watch_imports_no_torch_in_any_process(scenario, tmp_path):
    """A stand-in torch first on every process's path notes each import of it; the watch makes none, while a run
    that needs torch does (so the stand-in would see one)."""
    trap = tmp_path / "trap" / "torch"
    trap.mkdir(parents=True)
    marker = tmp_path / "torch-imported"
    (trap / "__init__.py").write_text("import os\nopen(%r, 'a').write('%%d\\n' %% os.getpid())\n"
                                      "raise ImportError('stand-in torch: imported')\n" % str(marker))
    env = {"PYTHONPATH": "%s:%s:%s" % (trap.parent, TESTS / "fakes" / "pynvml_replay", REPO)}
    report, _ = run_agent(scenario, WATCH, env=env)
    assert report["verdict"] == "pass"
    assert not marker.exists(), "torch imported by pid(s) %s" % marker.read_text()
    run_agent(scenario, ("--mode", "quick", "--only", "torch.import"), env=env, timeout=120)
    assert marker.exists()  # the trap works: a run that needs torch tripped it


def test_the_watch_answers_within_three_seconds(scenario):
    started = time.monotonic()
    report, _ = run_agent(scenario, WATCH, env=NVML_ENV)
    wall = time.monotonic() - started
    assert report["verdict"] == "pass" and wall < 3.0, wall


@pytest.mark.parametrize("env", [SMI_ENV, {"PYTHONPATH": str(REPO)}], ids=["nvml-off", "nvml-unavailable"])
def test_the_watchs_nvidia_smi_reads_run_side_by_side(scenario, env):
    """Each nvidia-smi answer takes 0.6 s here; the watch asks for eight (-L, -q twice, --query-gpu,
    --query-compute-apps, topo -m, nvlink -s and -e): one after the other, 4.8 s."""
    scenario.write("behaviour", "slow 0.6")
    started = time.monotonic()
    report, _ = run_agent(scenario, WATCH, env=env)
    wall = time.monotonic() - started
    assert report["verdict"] == "pass" and wall < 3.0, wall
    assert "nvidia-smi" in check(report, "driver.version")["summary"]


@pytest.mark.parametrize("env", [NVML_ENV, SMI_ENV], ids=["nvml", "nvidia-smi"])
def test_an_application_xid_has_its_own_signature_on_its_gpu_by_uuid(scenario, env):
    append_dmesg(scenario, APP_XIDS_GPU0)
    report, _ = run_agent(scenario, WATCH, env=env)
    xid = check(report, "driver.xid")
    assert xid["status"] == "warn" and xid["signatures"] == ["xid_application"]
    latest = APP_XIDS_GPU0.splitlines()[2].split("] ", 1)[1]
    assert xid["gpus"] == [{"index": 0, "uuid": uuids(scenario)[0], "bus_id": "00000000:00:06.0", "status": "warn",
                            "signatures": ["xid_application"], "summary": latest,
                            "metrics": {"xid_13_count": 1, "xid_31_count": 1, "xid_43_count": 1}}]
    assert report["verdict"] == "warn"


def test_a_hardware_xid_and_an_application_xid_are_separate_findings(scenario):
    append_dmesg(scenario, APP_XIDS_GPU0 + XID79_GPU1)
    report, _ = run_agent(scenario, WATCH, env=NVML_ENV)
    xid = check(report, "driver.xid")
    assert xid["status"] == "fail"
    assert xid["signatures"] == ["xid_critical", "gpu_fallen_off_bus", "xid_application"]
    by_signature = {tuple(g["signatures"]): g for g in xid["gpus"]}
    assert by_signature[("xid_application",)]["uuid"] == uuids(scenario)[0]
    assert by_signature[("xid_application",)]["status"] == "warn"
    assert by_signature[("gpu_fallen_off_bus", "xid_critical")]["uuid"] == uuids(scenario)[1]
    assert by_signature[("gpu_fallen_off_bus", "xid_critical")]["status"] == "fail"


def test_an_xid_this_agent_does_not_class_is_not_called_an_application_one(scenario):
    append_dmesg(scenario, "[ 5003.000001] NVRM: Xid (PCI:0000:00:07): 69, pid=0, Graphics Exception: class 0xc6c0\n")
    xid = check(run_agent(scenario, WATCH, env=NVML_ENV)[0], "driver.xid")
    assert xid["status"] == "warn" and xid["signatures"] == ["xid_other"]
    assert [g["uuid"] for g in xid["gpus"]] == [uuids(scenario)[1]]


def test_xids_from_before_the_last_look_are_history(scenario):
    append_dmesg(scenario, APP_XIDS_GPU0)  # at boot + 5001 s: 17:23 UTC on the day of btime below
    scenario.write("stat", "cpu  1 2 3 4\nbtime 1764000000\n")
    env = dict(NVML_ENV, CUDAPROBE_PROC_STAT=str(scenario.root / "stat"))
    report, _ = run_agent(scenario, WATCH + ("--since", "2025-11-24T18:00:00+00:00"), env=env)  # after them
    xid = check(report, "driver.xid")
    assert xid["status"] == "pass" and xid["signatures"] == ["xid_history"] and "gpus" not in xid
    report, _ = run_agent(scenario, WATCH + ("--since", "2025-11-24T16:30:00+00:00"), env=env)  # before them
    assert check(report, "driver.xid")["signatures"] == ["xid_application"]


def _second_gpu_q(scenario, old, new):
    """Edit the second GPU's block of nvidia-smi -q."""
    text = (scenario.root / "q.txt").read_text()
    head, _, second = text.partition("GPU 00000000:00:07.0")
    assert old in second
    scenario.write("q.txt", head + "GPU 00000000:00:07.0" + second.replace(old, new, 1))


PENDING = ("        Pending                                        : No",
           "        Pending                                        : Yes")
RESET = ("    GPU Recovery Action                                : None",
         "    GPU Recovery Action                                : Reset")


@pytest.mark.parametrize("env", [NVML_ENV, SMI_ENV], ids=["nvml", "nvidia-smi"])
@pytest.mark.parametrize("edit, check_id, signature", [
    (PENDING, "driver.gpu_health", "row_remap_pending"),
    (RESET, "driver.recovery_action", "gpu_recovery_reset"),
], ids=["remap-pending", "recovery-reset"])
def test_a_fault_on_the_second_gpu_is_named_by_its_uuid(scenario, env, edit, check_id, signature):
    _second_gpu_q(scenario, *edit)
    result = check(run_agent(scenario, WATCH, env=env)[0], check_id)
    assert result["status"] == "fail" and result["signatures"] == [signature]
    assert [(g["index"], g["uuid"], g["signatures"]) for g in result["gpus"]] == [
        (1, uuids(scenario)[1], [signature])]


def test_the_recovery_action_reads_the_same_through_nvml_and_nvidia_smi(scenario):
    results = []
    for env in (NVML_ENV, SMI_ENV):
        result = check(run_agent(scenario, WATCH, env=env)[0], "driver.recovery_action")
        results.append((result["status"], result["summary"]))
    assert results[0] == results[1] == ("pass", "2 GPU(s): recovery action None")


def test_ecc_errors_and_throttling_are_named_per_gpu(scenario):
    rows = (scenario.root / "query.csv").read_text().splitlines()
    rows[1] = rows[1].replace("Enabled, 0, [N/A], 0x0000000000000001", "Enabled, 2, [N/A], 0x0000000000000040")
    scenario.write("query.csv", "\n".join(rows) + "\n")
    report, _ = run_agent(scenario, WATCH, env=NVML_ENV)
    health, clocks = check(report, "driver.gpu_health"), check(report, "driver.clocks_thermal")
    assert [(g["uuid"], g["signatures"]) for g in health["gpus"]] == [(uuids(scenario)[0], ["ecc_uncorrected"])]
    assert [(g["uuid"], g["signatures"], g["metrics"]) for g in clocks["gpus"]] == [
        (uuids(scenario)[0], ["gpu_throttling"], {"clocks_event_reasons": 0x40})]


def test_processes_are_named_by_the_gpu_they_hold(scenario):
    gpu1 = uuids(scenario)[1]
    # nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory,gpu_uuid --format=csv
    scenario.write("apps.csv", "pid, process_name, used_gpu_memory [MiB], gpu_uuid\n"
                               "4242, python3, 81920 MiB, %s\n" % gpu1)
    result = check(run_agent(scenario, WATCH, env=SMI_ENV)[0], "driver.processes")
    assert result["status"] == "warn" and result["signatures"] == ["gpu_memory_held_by_process"]
    assert [(g["uuid"], g["metrics"]) for g in result["gpus"]] == [(gpu1, {"compute_processes": 1})]


def test_nvlink_counters_that_grew_since_the_last_look_name_their_gpu(scenario):
    text = (scenario.root / "nvlink_e.txt").read_text()
    head, sep, second = text.partition("GPU 1:")
    scenario.write("nvlink_e.txt", head + sep + second.replace("Link 3: Replay Errors: 0", "Link 3: Replay Errors: 7"))
    previous = json.dumps({"fabric.nvlink": {}})  # the last look counted nothing (zeros are left out)
    result = check(run_agent(scenario, WATCH + ("--fabric-previous", previous), env=SMI_ENV)[0], "fabric.nvlink")
    assert result["status"] == "warn" and result["signatures"] == ["nvlink_errors_growing"]
    assert [(g["index"], g["uuid"]) for g in result["gpus"]] == [(1, uuids(scenario)[1])]


def test_a_healthy_watch_names_no_gpu(scenario):
    report, _ = run_agent(scenario, WATCH, env=NVML_ENV)
    assert not [c["id"] for c in report["checks"] if c.get("gpus")]


def test_the_watch_is_listed_as_a_mode():
    from agents.cudaprobe.cli import build_parser

    assert "watch" in build_parser().format_help()
    assert re.search(r"watch: the light look", build_parser().format_help())


def test_every_recovery_action_selects_the_gpu_hardware_playbook():
    from agents.cudaprobe.checks.driver import RECOVERY_SIGNATURES
    from cudaweb.playbooks.library import load

    given = set(RECOVERY_SIGNATURES.values()) | {"gpu_recovery_other"}
    assert given - set(load()["gpu_hardware"].signatures) == set()


def test_a_gpu_whose_fabric_training_has_not_finished_is_named_by_its_uuid(scenario):
    """fabric.nvswitch names the GPU by its PCI address in its summary; the watch turns it into the GPU's UUID."""
    _second_gpu_q(scenario, "        State                                          : Completed",
                  "        State                                          : In Progress")
    result = check(run_agent(scenario, WATCH, env=SMI_ENV)[0], "fabric.nvswitch")
    # the recorded 2 x H200 host runs no Fabric Manager, which an HGX board in training needs (issue 28's per-board
    # rules): the finding fails, and is still named by the GPU's UUID
    assert result["status"] == "fail" and result["signatures"] == ["fabric_manager_not_running"], result
    assert [(g["index"], g["uuid"]) for g in result["gpus"]] == [(1, uuids(scenario)[1])]
