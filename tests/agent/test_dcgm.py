"""--with-dcgm rN (agents/cudaprobe/checks/dcgm.py): the agent runs `dcgmi diag -r N -j` (a stand-in that prints
outputs we wrote in DCGM 3.x's and 4.x's documented shapes, tests/fixtures/dcgm) and reports each DCGM test as its own
check."""

import json
import os

import pytest

from agents.cudaprobe.dcgmi import test_id as dcgm_test_id
from tests.agent.harness import TESTS, Scenario, check, run_agent

FIXTURES = TESTS / "fixtures" / "dcgm"
V4 = FIXTURES / "dcgm-4.x-h200x2-r2.json"
V3 = FIXTURES / "dcgm-3.x-h200x2-r3.json"
DCGM_BIN = TESTS / "fakes" / "dcgm-bin"
ONLY = ("--mode", "quick")


@pytest.fixture
def scenario(tmp_path):
    return Scenario(tmp_path / "host")


def _run(scenario, tmp_path, fixture, *extra, env=None, with_dcgm="r2", on_path=True):
    calls = tmp_path / "dcgmi-calls"
    environment = {"FAKE_DCGMI_FIXTURE": str(fixture), "FAKE_DCGMI_CALLS": str(calls)}
    if on_path:
        environment["PATH"] = os.pathsep.join([str(DCGM_BIN), str(TESTS / "fakes" / "bin"), "/usr/bin", "/bin"])
    environment.update(env or {})
    args = ONLY + (("--with-dcgm", with_dcgm) if with_dcgm else ()) + (extra or ("--only", "dcgm"))
    report, _ = run_agent(scenario, args, env=environment)
    return report, (calls.read_text().splitlines() if calls.exists() else [])


def test_dcgm_4x_output_becomes_one_check_per_test_with_dcgms_own_codes(scenario, tmp_path):
    report, calls = _run(scenario, tmp_path, V4)
    assert calls == ["diag -r 2 -j"]  # one run of dcgmi for all the tests' checks
    document = json.loads(V4.read_text())
    recorded = document["DCGM Diagnostic"]["test_categories"]
    software = check(report, "dcgm.software")
    failing = [r for r in recorded[0]["tests"][0]["results"] if r["status"] == "Fail"]
    assert len(failing) == 1 and len(recorded[0]["tests"][0]["results"]) > 1  # one GPU of several failed
    warning = failing[0]["warnings"][0]
    assert software["status"] == "fail" and software["layer"] == "L1"
    assert "failed on GPU %d:" % failing[0]["entity_id"] in software["summary"]
    assert warning["warning"][:60] in software["summary"]
    assert "DCGM error %d" % warning["error_id"] in software["evidence"]
    assert software["signatures"] == ["dcgm_software_failed", "dcgm_error_%d" % warning["error_id"]]
    assert check(report, "dcgm.memory")["status"] == check(report, "dcgm.pcie")["status"] == "pass"
    pcie_figures = recorded[2]["tests"][0]["results"][0]["info"]
    assert recorded[2]["tests"][0]["name"] == "pcie" and "GB/s" in pcie_figures[0]
    assert pcie_figures[0] in check(report, "dcgm.pcie")["evidence"]  # DCGM's own figures kept as evidence
    assert check(report, "dcgm.diagnostic")["status"] == "skip"
    assert check(report, "dcgm.diagnostic")["summary"] == "dcgmi diag -r 2 did not run this test"
    version = document["metadata"]["version"]
    assert check(report, "dcgm.diag")["status"] == "pass" and version in check(report, "dcgm.diag")["summary"]
    assert report["verdict"] == "fail"


def test_dcgm_3x_output_maps_onto_the_same_ids_per_gpu(scenario, tmp_path):
    report, _ = _run(scenario, tmp_path, V3, with_dcgm="r3")
    tests = {t["name"]: t["results"] for cat in json.loads(V3.read_text())["DCGM GPU Diagnostic"]["test_categories"]
             for t in cat["tests"]}
    stress = check(report, "dcgm.sm_stress")  # 3.x's display name "SM Stress"
    failing = sorted(r["gpu_id"] for r in tests["SM Stress"] if r["status"] == "Fail")
    assert failing and len(failing) < len(tests["SM Stress"])
    assert stress["status"] == "fail" and "on GPU %s:" % ", ".join(failing) in stress["summary"]
    assert "dcgm_error_50" in stress["signatures"]  # DCGM_FR_STRESS_LEVEL
    assert check(report, "dcgm.software")["status"] == "pass"  # the nine 3.x Deployment items as one check
    memory = check(report, "dcgm.memory")  # "GPU Memory": one GPU skipped (ECC off, error 55), the other passed
    skipped = [r["gpu_id"] for r in tests["GPU Memory"] if r["status"] == "Skip"]
    assert skipped and len(skipped) < len(tests["GPU Memory"])
    assert memory["status"] == "pass" and "skipped on GPU %s" % ", ".join(skipped) in memory["summary"]
    assert check(report, "dcgm.memory_bandwidth")["status"] == "skip"


def test_a_pass_with_an_error_logged_is_not_a_pass(scenario, tmp_path):
    """NVIDIA/DCGM#284: the memory test logs DCGM_FR_MEMORY_ALLOC (56) and still says Pass."""
    document = json.loads(V4.read_text())
    memory = document["DCGM Diagnostic"]["test_categories"][1]["tests"][0]
    assert memory["name"] == "memory" and memory["results"][0]["status"] == "Pass"
    memory["results"][0]["warnings"] = [{"error_category": 1, "error_id": 56, "error_severity": 2,
                                         "warning": "Couldn't allocate at least 90.0% of GPU memory on GPU 0"}]
    fixture = tmp_path / "memory-alloc.json"
    fixture.write_text(json.dumps(document))
    report, _ = _run(scenario, tmp_path, fixture)
    judged = check(report, "dcgm.memory")
    assert judged["status"] == "fail" and judged["signatures"][:2] == ["dcgm_error_despite_pass", "dcgm_error_56"]
    assert "Couldn't allocate" in judged["summary"]


def test_no_dcgmi_is_a_skip_with_the_reason(scenario, tmp_path):
    report, calls = _run(scenario, tmp_path, V4, on_path=False)
    assert calls == []
    diag = check(report, "dcgm.diag")
    assert diag["status"] == "skip" and "dcgmi is not installed" in diag["summary"]
    assert {c["status"] for c in report["checks"] if c["id"].startswith("dcgm.")} == {"skip"}
    assert report["verdict"] == "pass"


def test_without_the_flag_no_dcgm_check_runs(scenario, tmp_path):
    report, calls = _run(scenario, tmp_path, V4, "--only", "L1", with_dcgm=None)
    assert calls == [] and check(report, "driver.nvidia_smi")
    assert not [c["id"] for c in report["checks"] if c["id"].startswith("dcgm.")]


@pytest.mark.parametrize("behaviour, signature", [("hang", "dcgm_diag_timeout"),
                                                  ("noengine", "dcgm_diag_unavailable")])
def test_dcgmi_that_hangs_or_has_no_host_engine_fails_within_its_budget(scenario, tmp_path, behaviour, signature):
    report, _ = _run(scenario, tmp_path, V4,
                     env={"FAKE_DCGMI_BEHAVIOUR": behaviour, "CUDAPROBE_DCGM_TIMEOUT": "2"})
    diag = check(report, "dcgm.diag")
    assert diag["status"] == "fail" and diag["signatures"] == [signature] and diag["duration_s"] < 10
    if behaviour == "noengine":
        assert "Unable to connect to host engine" in diag["summary"]
    assert check(report, "dcgm.memory")["summary"] == "no DCGM result: see dcgm.diag"


@pytest.mark.parametrize("name, category, expected", [
    ("GPU Memory", "Hardware", "memory"), ("memory", "Hardware", "memory"), ("Diagnostic", "Hardware", "diagnostic"),
    ("PCIe", "Integration", "pcie"), ("Targeted Stress", "Stress", "targeted_stress"),
    ("targeted_stress", "Stress", "targeted_stress"), ("EUD Test", "Hardware", "eud"),
    ("Persistence Mode", "Deployment", "software"), ("software", "Deployment", "software")])
def test_both_test_name_sets_give_one_id(name, category, expected):
    assert dcgm_test_id(name, category) == expected

