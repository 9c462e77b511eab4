"""--with-dcgm rN (agents/cudaprobe/checks/dcgm.py): the agent runs `dcgmi diag -r N -j` (a stand-in that prints
outputs we wrote in DCGM 3.x's and 4.x's shapes, tests/fixtures/dcgm) and reports each DCGM test as its own check."""

import copy
import json
import os

import pytest

from agents.cudaprobe.dcgmi import parse as dcgm_parse
from agents.cudaprobe.dcgmi import test_id as dcgm_test_id
from tests.agent.harness import TESTS, Scenario, check, run_agent

FIXTURES = TESTS / "fixtures" / "dcgm"
V4 = FIXTURES / "dcgm-4.x-h200x2-r2.json"
V3 = FIXTURES / "dcgm-3.x-h200x2-r3.json"  # DCGM 3.3.3-3.3.9's shape
V3_DEPLOYMENT_FAIL = FIXTURES / "dcgm-3.3-h200x2-r1-persistence-off.json"
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
    version = json.loads(V3.read_text())["version"]  # 3.x states its version beside the root, not in it
    assert check(report, "dcgm.diag")["status"] == "pass" and version in check(report, "dcgm.diag")["summary"]


def _as_dcgm_3_2(document):
    """The same run as DCGM 3.2.x writes it (dcgmi/Diag.cpp at v3.2.6; 3.1.7-3.1.8 the same but for the per-GPU
    "error_id"): a per-GPU result names its GPU under "gpu_ids", its warning is one string with the result's
    "error_id" beside it; a Deployment item has no GPU id and its warning is a string with no error id; no
    "GPU Device Serials" (3.3.1 added them)."""
    converted = copy.deepcopy(document)
    converted.pop("GPU Device Serials", None)
    for category in converted["DCGM GPU Diagnostic"]["test_categories"]:
        for test in category["tests"]:
            for result in test["results"]:
                warnings = result.pop("warnings", None)
                if category["category"] == "Deployment":
                    result.pop("gpu_id", None)
                    if warnings:
                        result["warnings"] = warnings[0]["warnings"]
                    continue
                result["gpu_ids"] = result.pop("gpu_id")
                if warnings:
                    result["warnings"], result["error_id"] = warnings[0]["warning"], warnings[0]["error_id"]
    return converted


def _in_shape(tmp_path, fixture, shape):
    """The fixture as DCGM `shape` ("3.3" as written, "3.2" converted) would print it: (path, document)."""
    document = json.loads(fixture.read_text())
    if shape == "3.3":
        return fixture, document
    document = _as_dcgm_3_2(document)
    path = tmp_path / ("dcgm-%s-%s" % (shape, fixture.name))
    path.write_text(json.dumps(document, indent="\t"))
    return path, document


@pytest.mark.parametrize("shape", ["3.3", "3.2"])
def test_dcgm_3x_stress_failure_keeps_dcgms_warning_text(scenario, tmp_path, shape):
    """3.3 lists the warning as an object with "warning" and "error_id"; 3.1/3.2 write it as one string under
    "warnings" (3.2 with "error_id" beside it): either way the whole text and the code reach the check."""
    fixture, document = _in_shape(tmp_path, V3, shape)
    tests = {t["name"]: t["results"] for cat in document["DCGM GPU Diagnostic"]["test_categories"]
             for t in cat["tests"]}
    failing = [r for r in tests["SM Stress"] if r["status"] == "Fail"]
    assert len(failing) == 1
    text = failing[0]["warnings"] if shape == "3.2" else failing[0]["warnings"][0]["warning"]
    assert isinstance(text, str) and len(text) > 40
    report, _ = _run(scenario, tmp_path, fixture, with_dcgm="r3")
    stress = check(report, "dcgm.sm_stress")
    assert stress["status"] == "fail"
    assert stress["summary"] == "DCGM SM Stress failed on GPU 1: %s" % text
    assert "GPU 1: DCGM error 50 (fail): %s" % text in stress["evidence"].splitlines()
    assert stress["signatures"] == ["dcgm_sm_stress_failed", "dcgm_error_50"]


def test_dcgm_3x_info_is_one_string_kept_whole(scenario, tmp_path):
    """3.x prints a result's info as one string (its lines joined by ", "): one evidence line, not one per character."""
    document = json.loads(V3.read_text())
    pcie = document["DCGM GPU Diagnostic"]["test_categories"][1]["tests"][0]
    infos = [result["info"] for result in pcie["results"]]
    assert pcie["name"] == "PCIe" and all(isinstance(info, str) and ", " in info for info in infos)
    report, _ = _run(scenario, tmp_path, V3, with_dcgm="r3")
    lines = check(report, "dcgm.pcie")["evidence"].splitlines()
    assert all(info in lines for info in infos)
    assert not [line for line in lines if len(line) == 1]


@pytest.mark.parametrize("shape", ["3.3", "3.2"])
def test_dcgm_3x_deployment_failure_is_the_nodes_and_names_no_gpu(scenario, tmp_path, shape):
    """A Deployment item is about the node: 3.1/3.2 give it no GPU id; 3.3.3+ give it "gpu_id": 0 (an integer that
    the software test never sets, whichever GPU the text names) and put its text under "warnings" in each object."""
    fixture, document = _in_shape(tmp_path, V3_DEPLOYMENT_FAIL, shape)
    items = {t["name"]: t["results"] for t in document["DCGM GPU Diagnostic"]["test_categories"][0]["tests"]}
    assert len(items) == 9 and [r["status"] for r in items["Persistence Mode"]] == ["Fail"]
    result = items["Persistence Mode"][0]
    text = result["warnings"] if shape == "3.2" else result["warnings"][0]["warnings"]
    assert ("gpu_id" in result) == (shape == "3.3") and "GPU 1" in text
    report, _ = _run(scenario, tmp_path, fixture, with_dcgm="r1")
    software = check(report, "dcgm.software")
    assert software["status"] == "fail" and software["layer"] == "L1"
    assert software["summary"] == "DCGM software failed: Persistence Mode: %s" % text  # no "on GPU n"
    assert not [line for line in software["evidence"].splitlines() if line.startswith("GPU 0")]
    assert software["signatures"] == ["dcgm_software_failed"] + (["dcgm_error_29"] if shape == "3.3" else [])
    assert check(report, "dcgm.diag")["status"] == "pass" and report["verdict"] == "fail"


def _deployment_document(results):
    return {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
        {"name": "Denylist", "results": [{"status": "Pass"}]},
        {"name": "Page Retirement/Row Remap", "results": results}]}]}}


@pytest.mark.parametrize("shape, results, errors", [
    ("3.1-3.2", [{"status": "Fail", "warnings": "GPU 1 has 2 pages pending retirement"}],
     [(None, "Page Retirement/Row Remap: GPU 1 has 2 pages pending retirement")]),
    ("3.3.1", [{"status": "Fail", "warnings": "GPU 1 has 2 pages pending retirement", "error_id": 6,
                "error_category": 1, "error_severity": 2},
               {"warnings": "GPU 1 has a row remap pending", "error_id": 85, "error_category": 1,
                "error_severity": 2}],
     [(6, "Page Retirement/Row Remap: GPU 1 has 2 pages pending retirement"),
      (85, "Page Retirement/Row Remap: GPU 1 has a row remap pending")]),
    ("3.3.3+", [{"gpu_id": 0, "status": "Fail", "warnings": [
        {"warnings": "GPU 1 has 2 pages pending retirement", "error_id": 6, "error_category": 1, "error_severity": 2},
        None]}],
     [(6, "Page Retirement/Row Remap: GPU 1 has 2 pages pending retirement")]),
])
def test_each_3x_deployment_shape_reads_as_a_node_level_failure(shape, results, errors):
    """dcgmi/Diag.cpp HelperJsonAddBasicTests at v3.2.6, v3.3.1 and v3.3.9: three ways to write a Deployment error."""
    software = dcgm_parse(json.dumps(_deployment_document(results)))["tests"]["software"]
    assert software["status"] == "fail" and software["gpus"] == {}
    assert [(error_id, message) for gpus, error_id, message, _ in software["errors"]] == errors
    assert {gpus for gpus, _, _, _ in software["errors"]} == {""}


@pytest.mark.parametrize("mutate, where", [
    (lambda root: root.update(test_categories="Deployment"), "unreadable"),
    (lambda root: root["test_categories"].append(["PCIe"]), "unreadable"),
    (lambda root: root["test_categories"][1].update(tests={"PCIe": "Pass"}), "unreadable"),
    (lambda root: root["test_categories"][1]["tests"][0].pop("name"), "unreadable"),
    (lambda root: root["test_categories"][1]["tests"][0].update(results="Pass"), "pcie"),
    (lambda root: root["test_categories"][1]["tests"][0]["results"].append("GPU 2 Pass"), "pcie"),
    (lambda root: root["test_categories"][1]["tests"][0]["results"][0].pop("status"), "pcie"),
    (lambda root: root["test_categories"][1]["tests"][0]["results"][0].update(status="Passed?"), "pcie"),
    (lambda root: root["test_categories"][1]["tests"][0]["results"][0].update(warnings=7), "pcie"),
], ids=["categories-a-string", "category-a-list", "tests-an-object", "test-without-name", "results-a-string",
        "result-a-string", "no-status", "unknown-status", "warnings-a-number"])
def test_output_not_in_dcgms_shape_is_a_could_not_read_failure_not_an_exception(mutate, where):
    document = json.loads(V3.read_text())
    mutate(document["DCGM GPU Diagnostic"])
    entry = dcgm_parse(json.dumps(document))["tests"][where]
    assert entry["status"] == "fail"
    assert [message for _, _, message, _ in entry["errors"] if "could not read" in message]


def test_a_3x_output_the_agent_cannot_read_fails_that_test_with_the_reason(scenario, tmp_path):
    document = json.loads(V3.read_text())
    document["DCGM GPU Diagnostic"]["test_categories"][1]["tests"][0]["results"] = {"0": "Pass", "1": "Pass"}
    fixture = tmp_path / "results-as-object.json"
    fixture.write_text(json.dumps(document))
    report, _ = _run(scenario, tmp_path, fixture, with_dcgm="r3")
    pcie = check(report, "dcgm.pcie")
    assert pcie["status"] == "fail" and "could not read DCGM's results for PCIe" in pcie["summary"]
    assert check(report, "dcgm.sm_stress")["status"] == "fail"  # the rest is still read


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

