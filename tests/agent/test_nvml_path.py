"""The L1 checks read through NVML (pynvml) when it works, and fall back to nvidia-smi when it does not.

A stand-in pynvml (tests/fakes/pynvml_replay) serves the same recorded H200 outputs as the fake
nvidia-smi, so every fault must read the same through either path.
"""

import subprocess
import time

import pytest

from tests.agent.harness import REPO, TESTS, Scenario, check, run_agent

L1 = ("--mode", "quick", "--only", "L1")
NVML_ENV = {"PYTHONPATH": "%s:%s" % (TESTS / "fakes" / "pynvml_replay", REPO)}
FAULTS = {
    "driver.pcie_link": ("query.csv", "5, 5, 16, 16, Default", "5, 5, 8, 16, Default"),
    "driver.gpu_health": ("query.csv", "Enabled, 0, [N/A]", "Enabled, 2, [N/A]"),
    "driver.gpu_state": ("query.csv", "Default, Enabled", "Exclusive_Process, Enabled"),
    "driver.clocks_thermal": ("query.csv", "0x0000000000000001", "0x0000000000000040"),
}


@pytest.fixture
def scenario(tmp_path):
    return Scenario(tmp_path / "host")


def test_healthy_replay_through_nvml_passes_with_the_same_facts(scenario):
    report, _ = run_agent(scenario, L1, env=NVML_ENV)
    # fabric.pcie_aer reads this machine's sysfs, where no GPU sits: skipped (tests/agent/test_fabric.py)
    statuses = {c["id"]: c["status"] for c in report["checks"] if c["layer"] == "L1" and c["id"] != "fabric.pcie_aer"}
    assert statuses and set(statuses.values()) == {"pass"}, statuses
    assert "read through NVML" in check(report, "fabric.nvlink")["evidence"]
    assert report["inventory"]["l1_source"] == "NVML"
    assert report["inventory"]["driver_version"] == "580.159.04"
    assert report["inventory"]["cuda_driver_version"] == "13.0"
    assert report["inventory"]["vbios"] == "96.00.A5.00.1A"
    assert check(report, "driver.pcie_link")["metrics"]["pcie_max_gbs_per_direction"] == 63.0


def test_without_nvml_the_agent_parses_nvidia_smi(scenario):
    report, _ = run_agent(scenario, L1)  # the venv's real pynvml finds no libnvidia-ml here
    assert report["inventory"]["l1_source"] == "nvidia-smi"
    assert "NVML not used: nvml_init_failed" in check(report, "driver.version")["evidence"]


@pytest.mark.parametrize("check_id", sorted(FAULTS))
def test_a_fault_reads_the_same_through_nvml_and_nvidia_smi(tmp_path, check_id):
    results = []
    for name, env in (("smi", None), ("nvml", NVML_ENV)):
        scenario = Scenario(tmp_path / name)
        scenario.edit(*FAULTS[check_id])
        result = check(run_agent(scenario, L1, env=env)[0], check_id)
        results.append((result["status"], result["signatures"]))
    assert results[0] == results[1]
    assert results[0][0] in ("warn", "fail"), results


def test_nvml_that_hangs_is_killed_and_reported(scenario):
    scenario.write("nvml_behaviour", "hang")
    started = time.monotonic()
    report, _ = run_agent(scenario, ("--mode", "quick", "--only", "driver.version"),
                          env=dict(NVML_ENV, CUDAPROBE_NVSMI_TIMEOUT="2"))
    assert time.monotonic() - started < 30
    result = check(report, "driver.version")
    assert result["status"] == "fail" and result["signatures"] == ["nvml_hang"]
    left = subprocess.run(["pgrep", "-f", "agents.cudaprobe.nvml"], capture_output=True, text=True).stdout
    assert left == ""


@pytest.mark.parametrize("env", [NVML_ENV, {}], ids=["nvml", "nvidia-smi"])
def test_each_gpus_temperature_and_power_are_metrics(scenario, env):
    report, _ = run_agent(scenario, L1, env=env)
    thermal = check(report, "driver.clocks_thermal")
    recorded = {}  # from the check's own evidence, i.e. the recorded nvidia-smi/NVML answer
    for line in thermal["evidence"].splitlines():
        index, _, fields = line.partition(": ")
        values = dict(field.split("=", 1) for field in fields.split(", "))
        recorded[index.split()[-1]] = (float(values["temperature.gpu"]), float(values["power.draw"].split()[0]))
    assert len(recorded) == 2
    for gpu, (temperature, power) in recorded.items():
        assert thermal["metrics"]["temperature_c.gpu%s" % gpu] == temperature
        assert thermal["metrics"]["power_w.gpu%s" % gpu] == pytest.approx(power)
    assert thermal["metrics"]["max_temperature_c"] == max(t for t, _ in recorded.values())
