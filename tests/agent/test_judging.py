"""How the L4-L6 checks judge what their GPU tasks return: the rules applied to crafted facts here, and to the
raw results of real runs on H200 hosts in test_real_faults.py."""

import pytest

from agents.cudaprobe import expectations, proc
from agents.cudaprobe.checks import comm, train
from agents.cudaprobe.children import TaskOutcome
from agents.cudaprobe.engine import Context


def _torch(version, count=2):
    return TaskOutcome({"torch_version": version, "device_count": count}, proc.CommandResult(["torch_info"], 0))


@pytest.mark.parametrize("check", [comm.comm_nccl, train.train_resnet18, train.train_ddp])
def test_torch_older_than_2_2_is_too_old_for_the_check_not_an_nccl_failure(check):
    ctx = Context("standard")
    ctx.facts["torch_info"] = _torch("2.1.2+cu121")
    outcome = check(ctx)
    assert outcome.status == "warn" and outcome.signatures == ["torch_too_old_for_check"]
    assert "torch 2.1 is too old for this check (it needs 2.2 or newer)" in outcome.summary


def test_every_sku_row_is_complete_and_cites_its_sources():
    assert {"H200", "H100 SXM", "H100 PCIe", "H100 NVL", "A100 SXM 80GB", "A100 PCIe 80GB", "L40S", "L4", "A10",
            "B200"} <= {sku["key"] for sku in expectations.SKUS}
    for sku in expectations.SKUS:
        for field in ("bf16", "fp16", "tf32", "fp32", "memory_gbs"):
            assert sku[field] > 0, (sku["key"], field)
        assert sku["pcie"][0] in expectations.PCIE_GEN_GBS_PER_LANE and sku["pcie"][1] == 16
        assert sku["tf32"] <= sku["bf16"] and sku["fp32"] < sku["bf16"]
        assert (sku["nvlink_links"] > 0) == (sku["nvlink_link_gbs"] > 0)
        assert sku["names"] and all(n.startswith("NVIDIA ") for n in sku["names"])
        assert sku["sources"] and all(s.startswith("https://") for s in sku["sources"])
    names = [n for sku in expectations.SKUS for n in sku["names"]]
    assert len(names) == len(set(names))


def test_names_match_as_nvml_reports_them():
    assert expectations.sku_for("NVIDIA H200")["key"] == "H200"
    assert expectations.sku_for("NVIDIA  h100 80GB HBM3")["key"] == "H100 SXM"
    assert expectations.sku_for("NVIDIA H200 NVL")["key"] == "H200 NVL"
    assert expectations.sku_for("Tesla V100-SXM2-32GB") is None


@pytest.mark.parametrize("ratio, status", [(1.0, "pass"), (0.86, "pass"), (0.84, "warn"), (0.51, "warn"),
                                           (0.49, "fail"), (0.0, "fail")])
def test_half_of_expected_fails_and_85_percent_warns(ratio, status):
    expected = expectations.Expected(100.0, "test", True)
    assert expectations.judge(100.0 * ratio, expected)[0] == status


def test_expectations_on_the_h200_reference_host():
    h200 = expectations.sku_for("NVIDIA H200")
    assert round(expectations.expected_matmul(h200, "matmul_bf16_tflops").value) == 682  # held at the power limit (issue 22)
    assert round(expectations.expected_host_copy(h200, "h2d_pinned_gbs").value, 1) == 55.3
    assert round(expectations.expected_p2p(h200, "NV18").value) == 394
    busbw = expectations.expected_busbw(h200, ["NV18"])
    assert round(busbw.value) == 320 and busbw.calibrated
    # 8 GPUs over NVLink are judged by the slowest pair; a PCIe pair by its link, and not as calibrated
    pcie = expectations.expected_busbw(h200, ["NV18", "SYS"])
    assert pcie.value < 50 and not pcie.calibrated


def test_the_healthy_fractions_agree_with_the_real_h200_reports():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "calibrate_expectations.py"
    spec = importlib.util.spec_from_file_location("calibrate_expectations", path)
    calibrate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(calibrate)
    found = calibrate.fractions()
    for metric, kept in expectations.HEALTHY_FRACTION.items():
        value, count = found[metric]
        assert count >= 4 and abs(value - kept) <= 0.02, (metric, value, kept)
    value, count = found["resnet18_amp_bf16_img_s"]
    assert abs(value / expectations.MEASURED["H200"]["resnet18_amp_bf16_img_s"] - 1) <= 0.02
