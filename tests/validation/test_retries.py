"""Which checks are run a second time, and what two attempts make of a check and of the run, on real H200 reports."""

import copy

import pytest

from cudaweb.nodes.models import Node
from cudaweb.validation import retries
from tests.drift.helpers import real_report


def by_id(report):
    return {c["id"]: c for c in report["checks"]}


def test_a_figure_judged_busy_is_run_again_and_a_state_reading_is_not():
    report = real_report("faults/busy-gpu1.json")
    again, blocked = retries.retry_plan(report)
    assert again == ["cuda.copy_bandwidth", "cuda.matmul", "cuda.p2p", "comm.nccl", "train.resnet18", "train.ddp"]
    assert blocked == []
    # the SW power cap and the other process's memory are readings of a state, not measured figures
    warned = {c["id"] for c in report["checks"] if c["status"] == "warn"}
    assert warned - set(again) == {"driver.clocks_thermal", "driver.processes"}


def test_a_missing_thing_or_a_named_setting_is_not_run_again():
    report = real_report("faults/memory-hog-gpu0.json")  # cuda.context failed: out of memory
    assert retries.retry_plan(report) == ([], [])
    for name in ("faults/gpu-hidden-by-cvd.json", "faults/no-torch-in-venv.json", "faults/bad-socket-interface.json",
                 "faults/p2p-disabled.json", "burnin/faults/memory-taken-during-memtest.json"):
        assert retries.retry_plan(real_report(name))[0] == [], name
    # TF32 turned off by NVIDIA_TF32_OVERRIDE=0: the matmul falls short, and the check names the setting
    (matmul,) = [c for c in real_report("burnin/faults/tf32-override-off.json")["checks"] if c["id"] == "cuda.matmul"]
    assert matmul["signatures"] == ["matmul_below_expected", "env_setting_named"] and not retries.on_a_figure(matmul)


def test_a_burnin_another_process_joined_is_run_again():
    report = real_report("burnin/faults/busy-during-burnin.json")
    assert retries.retry_plan(report) == (["stress.sustained"], [])


@pytest.mark.parametrize("signatures, metrics, retried", [
    (["matmul_below_expected"], {"tflops": 300.0}, True),
    (["nccl_busbw_low", "gpu_slower_than_siblings"], {"busbw": 20.0}, True),
    (["matmul_below_expected"], {}, False),  # no figure to judge
    (["matmul_below_expected", "oom"], {"tflops": 1.0}, False),  # a broken thing among them
    ([], {"tflops": 1.0}, False),
    (["silent_data_corruption"], {"mismatches": 1}, False),  # a wrong result seen once is a finding, not noise
    (["gpu_slower_than_siblings", "no_reference_for_model"], {"tflops": 1.0}, True),  # a remark does not count
    (["no_reference_for_model"], {"tflops": 1.0}, False),
    (["throughput_decay", "throttle_thermal"], {"tflops": 1.0}, False),  # the GPU said why: hot
])
def test_the_rule_reads_the_signatures_and_the_metrics(signatures, metrics, retried):
    check = {"id": "cuda.matmul", "status": "fail", "signatures": signatures, "metrics": metrics}
    assert retries.on_a_figure(check) is retried


@pytest.mark.parametrize("signature", ["ib_rate_low", "memory_test_coverage_low"])
def test_a_state_named_like_a_figure_is_never_run_again(signature):
    # a port trained at a lower rate, memory held before the memory test began: a second attempt reads the same
    check = {"id": "fabric.infiniband", "layer": "L1", "status": "warn", "signatures": [signature],
             "metrics": {"rate_gbps": 200.0}}
    assert not retries.on_a_figure(check)
    assert retries.on_a_figure(dict(check, signatures=["nccl_busbw_low"]))  # a measured figure beside it is


@pytest.mark.parametrize("status, signatures", [
    ("fail", ["throughput_decay"]), ("warn", ["throughput_decay"]), ("fail", ["sustained_below_expected"]),
    ("warn", ["gpu_slower_than_siblings"]), ("warn", ["memory_clock_low"]), ("warn", ["memory_test_coverage_low"]),
])
def test_the_burnins_own_findings_stand_and_are_never_run_again(status, signatures):
    check = {"id": "stress.sustained", "layer": "L7", "status": status, "signatures": signatures,
             "metrics": {"sustained_bf16_tflops": 500.0}}
    assert not retries.on_a_figure(check)


def test_a_burnin_decay_that_fails_once_then_passes_is_no_flaky_pass():
    healthy = real_report("burnin/h200-burnin-300s.json")
    first = copy.deepcopy(healthy)
    sustained = by_id(first)["stress.sustained"]
    sustained.update(status="fail", signatures=["throughput_decay"],
                     summary="GPU 0: throughput fell 30% from the first minute to the last (676 -> 473 TFLOP/s)")
    first["verdict"] = "fail"
    again, blocked = retries.retry_plan(first)
    assert "stress.sustained" not in again
    merged, outcomes = retries.merge(first, healthy, again, blocked)  # even were a second run at hand
    assert "stress.sustained" not in outcomes
    assert by_id(merged)["stress.sustained"]["status"] == "fail" and merged["verdict"] == "fail"


def test_busy_then_idle_is_flaky_for_each_figure_and_the_state_warnings_remain():
    first, second = real_report("faults/busy-gpu1.json"), real_report("h200-gpus2-standard.json")
    again, blocked = retries.retry_plan(first)
    merged, outcomes = retries.merge(first, second, again, blocked)
    assert {cid: kind for cid, (kind, _) in outcomes.items()} == {cid: "flaky" for cid in again}
    assert by_id(merged)["cuda.matmul"] == by_id(second)["cuda.matmul"]
    assert [a["status"] for a in outcomes["cuda.matmul"][1]] == ["warn", "pass"]
    assert merged["verdict"] == "warn"  # driver.clocks_thermal and driver.processes still warn
    assert retries.label("flaky", outcomes["cuda.matmul"][1]) == "flaky (warned, then passed)"


def test_a_failed_figure_that_blocked_others_reruns_them_when_it_turns_out_flaky():
    healthy = real_report("h200-gpus2-standard.json")
    first = copy.deepcopy(healthy)
    checks = by_id(first)
    checks["cuda.matmul"].update(status="fail", signatures=["matmul_below_expected"])
    for cid in ("train.resnet18", "train.ddp"):
        checks[cid].update(status="skip", blocked_by="cuda.matmul", summary="blocked: cuda.matmul did not pass")
    first["verdict"] = "fail"
    again, blocked = retries.retry_plan(first)
    assert (again, blocked) == (["cuda.matmul"], ["train.resnet18", "train.ddp"])
    merged, outcomes = retries.merge(first, healthy, again, blocked)
    assert merged["verdict"] == "pass"
    assert outcomes["train.ddp"][0] == "rerun" and by_id(merged)["train.ddp"]["status"] == "pass"
    # twice failed: hard, the blocked checks stay skipped, the run fails
    merged, outcomes = retries.merge(first, first, again, blocked)
    assert outcomes["cuda.matmul"][0] == "hard" and "train.ddp" not in outcomes and merged["verdict"] == "fail"
    assert retries.label("hard", outcomes["cuda.matmul"][1]) == "hard (failed twice)"


def test_no_second_report_leaves_the_first_attempt_unconfirmed():
    first = real_report("faults/busy-gpu1.json")
    again, blocked = retries.retry_plan(first)
    merged, outcomes = retries.merge(first, None, again, blocked)
    assert merged["checks"] == first["checks"] and merged["verdict"] == "warn"
    assert {kind for kind, _ in outcomes.values()} == {"unconfirmed"}


@pytest.mark.django_db
def test_a_second_attempt_whose_interpreter_is_gone_keeps_the_first_report(tmp_path):
    from cudaweb.remote import bundle
    from cudaweb.validation.models import ValidationRun
    from cudaweb.validation.services import run_retry_figures

    node = Node.objects.create(name="gone", transport=Node.Transport.LOCAL, python_path=str(tmp_path / "no-python"))
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.RUNNING, mode="standard")
    first = real_report("faults/busy-gpu1.json")
    again, blocked = retries.retry_plan(first)
    payload, digest = bundle.build()
    merged, note, outcomes = run_retry_figures(run=run, report=first, again=again, blocked=blocked,
                                               agent_args=["--mode", "standard", "--json"], budget=30,
                                               payload=payload, digest=digest)
    assert merged["checks"] == first["checks"] and note["report"] is None
    # coreutils timeout finds no interpreter: 127, and nothing on stdout
    assert note["error"] == ("the second attempt printed no report (exit status 127): "
                             "the agent printed nothing on stdout")
    assert note["summary"] == "second attempt of 6 checks: 6 unconfirmed"
    assert {kind for kind, _ in outcomes.values()} == {"unconfirmed"}
