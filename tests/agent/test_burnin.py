"""Burn-in (--mode burnin, layer L7): the judging of a sustained series on a real healthy H200's 120 s
(shared/reference, copied to tests/fixtures/reference/h200x1/) and on that series with one fault written into it,
the memory-test and consistency rules, the patterns themselves (on CPU tensors), and the mode on a host without
GPUs."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agents.cudaprobe import burnin, expectations
from agents.cudaprobe.checks import stress
from agents.cudaprobe.engine import Context
from tests.agent.harness import REPO, VALIDATOR

REFERENCE = Path(__file__).resolve().parent.parent / "fixtures" / "reference" / "h200x1" / "burnin_120s.json"
H200 = expectations.sku_for("NVIDIA H200")


def reference_gpu(index=0):
    """The real 120 s series in the shape gpu_sustained returns."""
    data = json.loads(REFERENCE.read_text())
    count = len(data["tflops_series"])
    return {"index": index, "n": 16384, "seconds": data["seconds"],
            "windows": [{"t": round((i + 1) * data["seconds"] / count, 2), "tflops": v}
                        for i, v in enumerate(data["tflops_series"])],
            "sampler": {"info": data["info"], "samples": copy.deepcopy(data["samples"]), "xids": [], "notes": [],
                        "self_pid": 4242}}


def test_the_healthy_h200_series_is_normal_not_failed():
    findings, metrics = burnin.judge_sustained([reference_gpu()], H200)
    assert findings.status == "pass" and findings.signatures == []
    assert 670 < metrics["sustained_bf16_tflops"] < 680
    assert metrics["sm_mhz_median"] == 1425 and metrics["power_w_median"] > 680
    assert metrics["reasons_seen.gpu0"] == 0x4  # the SW power cap, and nothing else, once loaded
    assert abs(metrics["throughput_decay_pct"]) < 2


def _load(gpu):
    return [s for s in gpu["sampler"]["samples"] if s["t"] >= burnin.WARMUP_S]


@pytest.mark.parametrize("bit, signature", [(0x40, "throttle_thermal"), (0x20, "throttle_thermal"),
                                            (0x8, "throttle_hw_slowdown"), (0x80, "throttle_power_brake")])
def test_hardware_and_thermal_slowdown_fail(bit, signature):
    gpu = reference_gpu()
    for sample in _load(gpu)[40:50]:
        sample["reasons"] |= bit
    findings, _ = burnin.judge_sustained([gpu], H200)
    assert findings.status == "fail" and signature in findings.signatures
    assert "10 of 111 samples" in findings.problems[0]


def test_one_slowdown_sample_warns():
    gpu = reference_gpu()
    _load(gpu)[5]["reasons"] |= 0x40
    findings, _ = burnin.judge_sustained([gpu], H200)
    assert findings.status == "warn" and findings.signatures == ["throttle_thermal"]


@pytest.mark.parametrize("hits, status", [(1, "warn"), (2, "warn"), (3, "fail")])
def test_slowdown_samples_in_a_60_s_burnin_warn_at_one_or_two_and_fail_at_three(hits, status):
    # README and ADR 0011: 1-2 samples warn, 3 fail, however long the burn-in (2 of a 60 s run's ~50 load samples
    # are 4 %: a share would fail there what warns in a 300 s run)
    gpu = reference_gpu()
    gpu["seconds"] = 60.0
    gpu["windows"] = [w for w in gpu["windows"] if w["t"] <= 60]
    gpu["sampler"]["samples"] = [s for s in gpu["sampler"]["samples"] if s["t"] <= 61]
    for sample in _load(gpu)[10:10 + hits]:
        sample["reasons"] |= 0x8
    findings, _ = burnin.judge_sustained([gpu], H200)
    assert 45 <= len(_load(gpu)) <= 55
    assert findings.status == status and findings.signatures == ["throttle_hw_slowdown"], findings.problems


def test_throughput_that_decays_from_the_first_minute_to_the_last_fails():
    gpu = reference_gpu()
    for window in gpu["windows"]:
        if window["t"] > 70:
            window["tflops"] *= 0.7
    findings, metrics = burnin.judge_sustained([gpu], H200)
    assert "throughput_decay" in findings.signatures and findings.status == "fail"
    assert 25 < metrics["throughput_decay_pct"] < 35


def test_clocks_below_maximum_with_power_to_spare_and_no_reason_warn():
    gpu = reference_gpu()
    for sample in _load(gpu):
        sample.update(sm_mhz=1100, power_w=450.0, reasons=0)
    findings, _ = burnin.judge_sustained([gpu], H200)
    assert "clock_sag_unexplained" in findings.signatures
    # at the power cap the same clock is explained: the real series itself runs at 1425 of 1980 MHz and passes


def test_new_ecc_errors_pcie_replays_and_xid_under_load_are_named():
    gpu = reference_gpu()
    gpu["sampler"]["samples"][-1].update(ecc_corrected_volatile=3, pcie_replay=2)
    gpu["sampler"]["samples"][-1]["ecc_uncorrected_volatile"] = 1
    gpu["sampler"]["samples"][0]["ecc_uncorrected_volatile"] = 0
    gpu["sampler"]["xids"] = [{"t": 61.0, "xid": 79}]
    findings, _ = burnin.judge_sustained([gpu], H200)
    assert findings.status == "fail"
    assert {"ecc_corrected_under_load", "ecc_uncorrected_under_load", "pcie_replay_under_load",
            "xid_under_load"} <= set(findings.signatures)
    assert any("Xid 79 at 61 s" in p for p in findings.problems)


def test_another_process_computing_mid_run_is_named_and_its_figures_not_judged():
    gpu = reference_gpu()
    for sample in gpu["sampler"]["samples"]:
        sample["pids"] = [4242] + ([999] if sample["t"] >= 50 else [])
    for window in gpu["windows"]:
        if window["t"] >= 50:
            window["tflops"] /= 2
    findings, _ = burnin.judge_sustained([gpu], H200, ours=[4242])
    assert findings.signatures == ["gpu_busy"] and findings.status == "warn"
    assert "process 999 started computing on it 50 s into the burn-in" in findings.problems[0]


def test_one_gpu_slower_than_its_siblings_under_load_warns():
    slow = reference_gpu(1)
    for window in slow["windows"]:
        window["tflops"] *= 0.8
    findings, metrics = burnin.judge_sustained([reference_gpu(0), slow], H200)
    assert "gpu_slower_than_siblings" in findings.signatures and "GPU [1]" in findings.problems[-1]
    assert metrics["sustained_bf16_tflops"] == metrics["sustained_bf16_tflops.gpu1"]


def test_a_gpu_far_below_its_sustained_expectation_warns():
    gpu = reference_gpu()
    for window in gpu["windows"]:
        window["tflops"] *= 0.7
    findings, _ = burnin.judge_sustained([gpu], H200)
    assert findings.signatures == ["sustained_below_expected"] and findings.status == "warn"


def test_the_series_are_downsampled_for_the_report():
    gpu = reference_gpu()
    gpu["seconds"] = 3000  # a long run: buckets grow so that no series passes SERIES_POINTS
    series = burnin.downsample(gpu)
    assert series["bucket_s"] == round(3000 / (burnin.SERIES_POINTS - 1), 2) and len(series["t"]) <= 7
    short = burnin.downsample(reference_gpu())
    assert len(short["t"]) == 121 and len(short["tflops"]) <= 121 and max(short["reasons"]) == 0x4


def _memory_entry(index=0, mismatches=(), pids=None):
    snap = {"pids": pids or [100], "self": 100, "util": 0}
    return {"index": index, "free_gib_start": 138.0, "total_gib": 139.8, "seconds": 12.0,
            "mismatches": list(mismatches),
            "ecc": {"before": [0, 0], "after": [0, 0]}, "activity": {"before": snap, "after": snap},
            "passes": [{"pass": p, "chunks": 124, "target_chunks": 124, "gib": 124.0, "oom": None, "activity": snap}
                       for p in range(2)]}


def test_memory_test_mismatch_names_the_gpu_and_the_range():
    bad = {"pass": 1, "pattern": "walking_ones bit 3", "word": 300, "last_word": 302, "count": 2, "found": 0,
           "expected": 8, "byte_offset": 1200, "byte_end": 1212}
    outcome = stress.judge_memory_test(Context("full"), [_memory_entry(), _memory_entry(1, [bad])])
    assert outcome.status == "fail" and outcome.signatures == ["memory_test_mismatch"]
    assert outcome.summary.startswith(
        "GPU 1: 2 word(s) read back wrong in pass 1, walking_ones bit 3, bytes 0x4b0-0x4bc")


def test_memory_taken_by_another_process_during_the_test_is_named():
    entry = _memory_entry()
    entry["passes"][1].update(chunks=100, gib=100.0, activity={"pids": [100, 555], "self": 100})
    outcome = stress.judge_memory_test(Context("full"), [entry])
    assert outcome.status == "warn" and outcome.signatures == ["memory_taken_during_test"]
    assert "process 555 on it" in outcome.summary and "pass 1 covered 100.0 GiB" in outcome.summary
    assert stress.judge_memory_test(Context("full"), [_memory_entry()]).status == "pass"


def test_a_memory_test_that_covered_little_of_the_gpu_is_no_pass():
    entry = _memory_entry()
    entry["free_gib_start"] = 3.0  # held from the start by something NVML did not show
    for p in entry["passes"]:
        p.update(chunks=1, target_chunks=1, gib=1.0)
    outcome = stress.judge_memory_test(Context("full"), [entry])
    assert outcome.status == "warn" and outcome.signatures == ["memory_test_coverage_low"]
    assert outcome.summary.startswith("GPU 0: the memory test covered 1.0 of the GPU's 139.8 GiB (3.0 GiB were free")


def test_new_ecc_errors_during_the_memory_test_fail():
    entry = _memory_entry()
    entry["ecc"] = {"before": [0, 0], "after": [0, 2]}
    outcome = stress.judge_memory_test(Context("full"), [entry])
    assert outcome.status == "fail" and outcome.signatures == ["ecc_uncorrected_under_load"]


def test_ecc_is_said_unchanged_only_where_it_was_read_before_and_after():
    unread = _memory_entry()
    why = "NVML unavailable in the worker (NVMLError_LibraryNotFound: NVML Shared Library Not Found)"
    unread["ecc"] = {"before": [None, None], "after": [None, None], "unread": why}
    outcome = stress.judge_memory_test(Context("full"), [unread])
    assert "ECC unchanged" not in outcome.summary
    assert outcome.summary.endswith("ECC not read on GPU 0: NVML unavailable in the worker "
                                    "(NVMLError_LibraryNotFound: NVML Shared Library Not Found)")
    half = _memory_entry(1)
    half["ecc"] = {"before": [0, 0], "after": [0, None]}  # read before, not after: not known to be unchanged
    outcome = stress.judge_memory_test(Context("full"), [_memory_entry(), half])
    assert outcome.summary.endswith("ECC unchanged on GPU 0; ECC not read on GPU 1: no ECC count recorded")
    assert stress.judge_memory_test(Context("full"), [_memory_entry()]).summary.endswith(", ECC unchanged")


def _consistency(index, digests):
    return {"index": index, "name": "NVIDIA H200", "sm_count": 132, "digests": digests}


def test_consistency_repetitions_that_differ_are_silent_data_corruption():
    good = {"matmul_bf16": ["a"] * 5, "training_step": ["t", "t"]}
    flaky = {"matmul_bf16": ["a", "a", "b", "a", "a"], "training_step": ["t", "t"]}
    outcome = stress.judge_consistency([_consistency(0, good), _consistency(1, flaky)])
    assert outcome.status == "fail" and outcome.signatures == ["silent_data_corruption"]
    assert outcome.summary.startswith("GPU 1: matmul_bf16 gave 2 different results over 5")


def test_the_gpu_that_differs_from_its_siblings_is_named():
    same = {"matmul_fp16": ["x"] * 3}
    gpus = [_consistency(0, same), _consistency(1, {"matmul_fp16": ["y"] * 3}), _consistency(2, same)]
    outcome = stress.judge_consistency(gpus)
    assert outcome.status == "fail" and "GPU [1]: matmul_fp16 differs bitwise" in outcome.summary
    assert stress.judge_consistency([_consistency(0, same), _consistency(1, same)]).status == "pass"


def test_the_patterns_find_a_flipped_bit_on_real_tensors(monkeypatch):
    chunks = [torch.empty(1 << 14, dtype=torch.int32) for _ in range(3)]
    scratch = torch.empty(1 << 14, dtype=torch.int32)
    assert stress.pattern_passes(torch, chunks, 1, 5, scratch) == []
    fill = stress._fill

    def flip_after_writing(torch_, chunk, pattern, base, seed, bit=0):
        fill(torch_, chunk, pattern, base, seed, bit)
        if pattern == "random" and chunk.data_ptr() == chunks[2].data_ptr():
            chunk[77] ^= 1 << 9  # a bit that does not hold between write and read

    monkeypatch.setattr(stress, "_fill", flip_after_writing)
    (found,) = stress.pattern_passes(torch, chunks, 1, 5, scratch)
    assert (found["pattern"], found["chunk"], found["word"], found["count"]) == ("random", 2, 2 * (1 << 14) + 77, 1)
    assert found["found"] ^ found["expected"] == 1 << 9


def test_a_range_of_wrong_words_is_bounded_by_its_first_and_last(monkeypatch):
    chunks = [torch.empty(1 << 12, dtype=torch.int32) for _ in range(2)]
    fill = stress._fill

    def break_a_range(torch_, chunk, pattern, base, seed, bit=0):
        fill(torch_, chunk, pattern, base, seed, bit)
        if pattern == "address" and chunk.data_ptr() == chunks[1].data_ptr():
            chunk[100:3000] = -1  # a stretch of words gone bad, and one more apart
            chunk[4000] ^= 1

    monkeypatch.setattr(stress, "_fill", break_a_range)
    found = stress.pattern_passes(torch, chunks, 1, 5, torch.empty(1 << 12, dtype=torch.int32))
    (bad,) = [m for m in found if m["pattern"] == "address"]
    assert (bad["word"], bad["last_word"], bad["count"]) == ((1 << 12) + 100, (1 << 12) + 4000, 2901)
    assert bad["found"] == -1 and bad["expected"] == (1 << 12) + 100


def test_a_mismatch_found_before_memory_runs_out_mid_pass_is_kept(monkeypatch):
    chunks = [torch.empty(1 << 12, dtype=torch.int32) for _ in range(2)]
    scratch = torch.empty(1 << 12, dtype=torch.int32)
    fill = stress._fill

    class TakenMidPass(Exception):
        pass

    def flip_then_run_out(torch_, chunk, pattern, base, seed, bit=0):
        if pattern == "address":  # after "random": another process took the memory the compare needs
            raise TakenMidPass()
        fill(torch_, chunk, pattern, base, seed, bit)
        if pattern == "random" and chunk.data_ptr() == chunks[1].data_ptr():
            chunk[5] ^= 1 << 3

    monkeypatch.setattr(stress, "_fill", flip_then_run_out)
    found = []
    with pytest.raises(TakenMidPass):
        stress.pattern_passes(torch, chunks, 1, 5, scratch, found)
    assert [(m["pattern"], m["chunk"], m["word"]) for m in found] == [("random", 1, (1 << 12) + 5)]


def test_the_digest_sees_one_flipped_bit():
    tensor = torch.randn(64, 64).bfloat16()
    flipped = tensor.clone()
    flipped.view(torch.int16)[3, 5] ^= 1
    assert stress.digest(torch, tensor) == stress.digest(torch, tensor.clone())
    assert stress.digest(torch, tensor) != stress.digest(torch, flipped)


def test_the_seeded_training_step_repeats_bitwise_on_the_cpu():
    first = stress._training_step(torch, "cpu", 11)
    assert stress.digest(torch, first) == stress.digest(torch, stress._training_step(torch, "cpu", 11))


def test_list_shows_the_burnin_checks_and_memory_bandwidth():
    done = subprocess.run([sys.executable, "-m", "agents.cudaprobe", "--list"], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
    rows = {line.split()[1]: line.split()[0] for line in done.stdout.splitlines()}
    assert rows["cuda.memory_bandwidth"] == "L4"
    assert {rows[c] for c in ("stress.sustained", "stress.memory_test", "stress.consistency")} == {"L7"}


def test_burnin_without_gpus_runs_and_skips_l7_with_the_reason(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    done = subprocess.run([sys.executable, "-m", "agents.cudaprobe", "--mode", "burnin", "--burnin-seconds", "60",
                           "--json"], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    report = json.loads(done.stdout)
    assert not list(VALIDATOR.iter_errors(report))
    assert report["mode"] == "burnin"
    layer7 = [c for c in report["checks"] if c["layer"] == "L7"]
    assert [c["id"] for c in layer7] == ["stress.sustained", "stress.memory_test", "stress.consistency"]
    for check in layer7:
        assert check["status"] == "skip" and check["blocked_by"] and check["summary"].startswith("blocked: ")
    # everything full runs is there too
    assert {"train.resnet18", "cuda.memory_bandwidth", "comm.nccl"} <= {c["id"] for c in report["checks"]}


def test_burnin_seconds_below_ten_is_refused():
    done = subprocess.run([sys.executable, "-m", "agents.cudaprobe", "--mode", "burnin", "--burnin-seconds", "3"],
                          cwd=REPO, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 2 and "--burnin-seconds must be 10 or more" in done.stderr


def test_the_sku_table_has_hbm_bandwidth_boost_clock_and_power_limit():
    for sku in expectations.SKUS:
        assert sku["memory_gbs"] > 0 and sku["boost_mhz"] > 1000 and sku["power_w"] >= 70, sku["key"]
    assert (H200["memory_gbs"], H200["boost_mhz"], H200["power_w"]) == (4800, 1980, 700)
    # a plain device-to-device copy on the real H200 (read + write): 4255 and 4270 GB/s in shared/reference
    expected = expectations.expected_memory_copy(H200)
    assert 4200 < expected.value < 4300 and expected.calibrated
    assert expectations.judge(4255, expected)[0] == "pass" and expectations.judge(2000, expected)[0] == "fail"


def test_a_pass_cut_short_by_memory_taken_mid_pass_is_named_not_a_crash():
    entry = _memory_entry()
    entry["passes"][0]["oom"] = "out of memory during the pass: CUDA out of memory. Process 557 has 12.51 GiB"
    outcome = stress.judge_memory_test(Context("full"), [entry])
    assert outcome.status == "warn" and outcome.signatures == ["memory_taken_during_test"]
    assert "Process 557 has 12.51 GiB" in outcome.summary


def test_a_burnin_without_nvml_readings_warns_that_only_throughput_was_watched():
    gpu = reference_gpu()
    gpu["sampler"].update(samples=[], info={}, notes=["NVML unavailable in the worker (ImportError: No module named "
                                                      "'pynvml'): no clocks, power or throttle readings"])
    findings, metrics = burnin.judge_sustained([gpu], H200)
    assert findings.status == "warn" and findings.signatures == ["burnin_unmonitored"]
    problem = findings.problems[0]
    assert "ECC and Xid were not watched" in problem and "No module named 'pynvml'" in problem
    assert metrics["sustained_bf16_tflops"] > 600  # the throughput is judged all the same


def test_a_power_limit_or_clock_set_below_the_models_is_named():
    gpu = reference_gpu()
    gpu["sampler"]["info"] = dict(gpu["sampler"]["info"], power_limit_w=500.0, max_sm_mhz=1600)
    findings, _ = burnin.judge_sustained([gpu], H200)
    assert {"power_limit_lowered", "max_clock_lowered"} <= set(findings.signatures)
    assert "power limit 500 W, the H200's is 700 W" in findings.problems[0]
