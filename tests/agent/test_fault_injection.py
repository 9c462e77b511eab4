"""The real agent against crafted hosts: each fault is reported in its layer, with its status and signature."""

import os
import socket
import sys
import time
import uuid

import pytest

from tests.agent.harness import FAKE_TORCH, Scenario, check, processes_with_env, run_agent

L1 = ("--mode", "quick", "--only", "L1")


@pytest.fixture
def scenario(tmp_path):
    return Scenario(tmp_path / "host")


def test_healthy_replay_passes_every_driver_check(scenario):
    report, _ = run_agent(scenario, L1)
    statuses = {c["id"]: c["status"] for c in report["checks"] if c["id"].startswith("driver.")}
    assert statuses and set(statuses.values()) == {"pass"}, statuses
    assert report["inventory"]["driver_version"] == "580.159.04"
    assert report["inventory"]["cuda_driver_version"] == "13.0"
    assert report["inventory"]["gpu_count"] == 2 and report["inventory"]["gpu_model"] == "NVIDIA H200"
    assert check(report, "driver.pcie_link")["metrics"]["pcie_max_gbs_per_direction"] == 63.0


def test_nvidia_smi_missing(scenario):
    report, done = run_agent(scenario, L1, fake_nvidia_smi=False)
    result = check(report, "driver.nvidia_smi")
    assert result["status"] == "fail" and "nvidia_smi_missing" in result["signatures"]
    assert check(report, "driver.gpu_state")["blocked_by"] == "driver.nvidia_smi"
    assert report["verdict"] == "fail" and done.returncode == 1


def test_nvidia_smi_cannot_talk_to_the_driver(scenario):
    scenario.write("behaviour", "nodriver")
    result = check(run_agent(scenario, L1)[0], "driver.nvidia_smi")
    assert result["status"] == "fail" and result["signatures"] == ["driver_unreachable"]
    assert "couldn't communicate with the NVIDIA driver" in result["evidence"]


def test_nvidia_smi_that_hangs_is_killed_and_reported(scenario):
    scenario.write("behaviour", "hang")
    started = time.monotonic()
    report, _ = run_agent(scenario, L1, env={"CUDAPROBE_NVSMI_TIMEOUT": "2"})
    assert time.monotonic() - started < 30
    result = check(report, "driver.nvidia_smi")
    assert result["status"] == "fail" and result["signatures"] == ["nvidia_smi_hang"]
    assert processes_with_env("FAKE_NVSMI_DIR", str(scenario.root)) == [], "the hung nvidia-smi was left running"


def test_nvidia_uvm_not_loaded(scenario):
    scenario.edit("modules", "nvidia_uvm 1 0 - Live 0x0\n", "")
    result = check(run_agent(scenario, L1)[0], "driver.kernel_modules")
    assert result["status"] == "fail" and result["signatures"] == ["nvidia_uvm_missing"]


def test_device_nodes_unreadable(scenario):
    wrapper = ()
    for node in scenario.dev.iterdir():
        node.chmod(0)
        if os.geteuid() == 0:
            os.chown(node, 65534, 65534)
    if os.geteuid() == 0:
        # Root reads anything; inside a user namespace it keeps no power over files of an unmapped owner.
        wrapper = ("unshare", "--user", "--map-root-user")
    report, _ = run_agent(scenario, L1, wrapper=wrapper)
    result = check(report, "driver.device_nodes")
    assert result["status"] == "fail" and result["signatures"] == ["dev_nodes_inaccessible"]


def test_compute_mode_exclusive_process(scenario):
    scenario.edit("query.csv", "Default, Enabled", "Exclusive_Process, Enabled")
    result = check(run_agent(scenario, L1)[0], "driver.gpu_state")
    assert result["status"] == "warn" and result["signatures"] == ["compute_mode_exclusive"]


def test_compute_mode_prohibited_fails(scenario):
    scenario.edit("query.csv", "Default, Enabled", "Prohibited, Enabled")
    result = check(run_agent(scenario, L1)[0], "driver.gpu_state")
    assert result["status"] == "fail" and result["signatures"] == ["compute_mode_prohibited"]


def test_driver_cuda_older_than_the_torch_build(scenario):
    scenario.edit("q.txt", "CUDA Version                                           : 13.0",
                  "CUDA Version                                           : 12.4")
    report, _ = run_agent(scenario, ("--mode", "quick", "--only", "runtime.driver_vs_build"),
                          env={"PYTHONPATH": "%s:%s" % (FAKE_TORCH, os.getcwd())})
    result = check(report, "runtime.driver_vs_build")
    assert result["status"] == "fail" and result["signatures"] == ["driver_too_old_for_build"]
    assert "12.4" in result["summary"] and "13.0" in result["summary"]


def test_cpu_only_torch_build_is_named(scenario):
    report, _ = run_agent(scenario, ("--mode", "quick", "--only", "torch.build"))
    result = check(report, "torch.build")
    assert result["status"] == "fail" and result["signatures"] == ["torch_cpu_build"]


def test_torch_not_importable_is_a_finding(scenario):
    bare_python = os.path.join(sys.base_prefix, "bin", "python3")  # the venv's base interpreter: no torch
    report, _ = run_agent(scenario, ("--mode", "quick", "--only", "torch.build"), python=bare_python)
    result = check(report, "torch.import")
    assert result["status"] == "fail" and result["signatures"] == ["torch_missing"]
    assert check(report, "torch.build")["blocked_by"] == "torch.import"


def test_cuda_visible_devices_hiding_every_gpu(scenario):
    report, _ = run_agent(scenario, ("--mode", "quick", "--only", "cuda.available"),
                          env={"CUDA_VISIBLE_DEVICES": "-1", "PYTHONPATH": "%s:%s" % (FAKE_TORCH, os.getcwd())})
    assert check(report, "host.cuda_visible_devices")["signatures"] == ["cuda_visible_devices_hides_all"]
    result = check(report, "cuda.available")
    assert result["status"] == "fail" and result["signatures"] == ["cuda_visible_devices_empty"]


def test_gpu_count_differs_from_the_driver(scenario):
    report, _ = run_agent(scenario, ("--mode", "quick", "--only", "cuda.available"),
                          env={"FAKE_TORCH_DEVICE_COUNT": "1", "PYTHONPATH": "%s:%s" % (FAKE_TORCH, os.getcwd())})
    result = check(report, "cuda.available")
    assert result["status"] == "fail" and result["signatures"] == ["device_count_mismatch"]
    assert "torch sees 1 GPU(s), the driver lists 2" in result["summary"]


def test_healthy_fake_torch_matching_driver_passes_availability(scenario):
    report, _ = run_agent(scenario, ("--mode", "quick", "--only", "cuda.available"),
                          env={"PYTHONPATH": "%s:%s" % (FAKE_TORCH, os.getcwd())})
    assert check(report, "cuda.available")["status"] == "pass"
    assert check(report, "torch.build")["summary"].startswith("torch 2.11.0+cu130 built for CUDA 13.0")


def test_degraded_pcie_link(scenario):
    scenario.edit("query.csv", "5, 5, 16, 16, Default", "5, 5, 8, 16, Default")
    result = check(run_agent(scenario, L1)[0], "driver.pcie_link")
    assert result["status"] == "warn" and result["signatures"] == ["pcie_link_degraded"]
    assert "x8 of x16" in result["summary"]


def test_uncorrected_ecc_errors(scenario):
    scenario.edit("query.csv", "Enabled, 0, [N/A]", "Enabled, 2, [N/A]")
    result = check(run_agent(scenario, L1)[0], "driver.gpu_health")
    assert result["status"] == "fail" and "ecc_uncorrected" in result["signatures"]


def test_pending_row_remap(scenario):
    scenario.edit("q.txt", "        Pending                                        : No",
                  "        Pending                                        : Yes")
    result = check(run_agent(scenario, L1)[0], "driver.gpu_health")
    assert result["status"] == "fail" and result["signatures"] == ["row_remap_pending"]


def test_xid_79_in_the_kernel_log(scenario):
    with open(scenario.root / "dmesg.txt", "a") as log:
        log.write("[ 4711.000001] NVRM: Xid (PCI:0000:00:07): 79, pid=0, GPU has fallen off the bus.\n")
    result = check(run_agent(scenario, L1)[0], "driver.xid")
    assert result["status"] == "fail" and result["signatures"] == ["xid_critical", "gpu_fallen_off_bus"]


def _boot_at(scenario, epoch):
    scenario.write("stat", "cpu  1 2 3 4\nbtime %d\n" % epoch)
    return {"CUDAPROBE_PROC_STAT": str(scenario.root / "stat")}


def test_an_xid_older_than_the_previous_validation_is_history(scenario):
    with open(scenario.root / "dmesg.txt", "a") as log:
        log.write("[ 4711.000001] NVRM: Xid (PCI:0000:00:07): 79, pid=0, GPU has fallen off the bus.\n")
    env = _boot_at(scenario, 1_764_000_000)  # the Xid at boot + 4711 s; the previous validation a day later
    report, _ = run_agent(scenario, L1 + ("--since", "2025-11-25T16:00:00+00:00"), env=env)
    result = check(report, "driver.xid")
    assert result["status"] == "pass" and result["signatures"] == ["xid_history"]
    assert result["metrics"]["xid_count_before_previous_validation"] == 1
    report, _ = run_agent(scenario, L1 + ("--since", "2025-11-24T15:00:00+00:00"), env=env)  # before the Xid
    assert check(report, "driver.xid")["signatures"] == ["xid_critical", "gpu_fallen_off_bus"]


def test_mig_enabled_is_said_and_skips_l4_to_l6_with_the_reason(scenario):
    scenario.edit("q.txt", "    MIG Mode\n        Current                                        : Disabled",
                  "    MIG Mode\n        Current                                        : Enabled")
    report, _ = run_agent(scenario, ("--mode", "quick", "--only", "cuda.context"),
                          env={"CUDAPROBE_NVML": "0", "PYTHONPATH": "%s:%s" % (FAKE_TORCH, os.getcwd())})
    state = check(report, "driver.gpu_state")
    assert state["status"] == "warn" and state["signatures"] == ["mig_enabled"] and "GPU 0" in state["summary"]
    for check_id in ("cuda.available", "cuda.context"):
        assert check(report, check_id)["status"] == "skip"
        assert check(report, check_id)["blocked_by"] == "driver.gpu_state"
    assert report["verdict"] == "warn"


def test_unreadable_kernel_log_is_a_skip_not_a_pass(scenario):
    os.unlink(scenario.root / "dmesg.txt")
    result = check(run_agent(scenario, L1)[0], "driver.xid")
    assert result["status"] == "skip" and "not readable" in result["summary"]


def test_thermal_throttling(scenario):
    scenario.edit("query.csv", "0x0000000000000001", "0x0000000000000048")
    result = check(run_agent(scenario, L1)[0], "driver.clocks_thermal")
    assert result["status"] == "warn" and result["signatures"] == ["gpu_throttling"]
    assert "HW slowdown" in result["summary"] and "HW thermal slowdown" in result["summary"]


def test_gloo_rendezvous_port_taken(scenario):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        report, _ = run_agent(scenario, ("--mode", "standard", "--only", "comm.gloo", "--master-port", str(port)))
    result = check(report, "comm.gloo")
    assert result["status"] == "fail" and result["signatures"] == ["rendezvous_port_in_use"]


def test_gloo_all_reduce_is_correct_on_this_host(scenario):
    report, _ = run_agent(scenario, ("--mode", "standard", "--only", "comm.gloo"))
    result = check(report, "comm.gloo")
    assert result["status"] == "pass" and result["metrics"]["gloo_4mib_ms"] > 0


def test_cross_node_peer_that_never_answers(scenario):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nobody listens there
    started = time.monotonic()
    report, _ = run_agent(scenario, ("--mode", "quick", "--only", "comm.peer", "--peer-role", "rank1",
                                     "--master", "127.0.0.1:%d" % port, "--peer-timeout", "5"))
    result = check(report, "comm.peer")
    assert result["status"] == "fail" and "peer_timeout" in result["signatures"]
    assert time.monotonic() - started < 60


def test_the_agent_leaves_no_file_and_no_process_behind(scenario, tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    tag = uuid.uuid4().hex  # inherited by the agent's workers: finds ours and nobody else's
    report, _ = run_agent(scenario, ("--mode", "standard", "--only", "comm.gloo"),
                          env={"TMPDIR": str(scratch), "CUDAWEB_TEST_TAG": tag})
    assert check(report, "comm.gloo")["status"] == "pass"  # two rank workers ran, with their log files
    assert list(scratch.iterdir()) == []
    assert processes_with_env("CUDAWEB_TEST_TAG", tag) == []
