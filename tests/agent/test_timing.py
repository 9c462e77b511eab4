"""The report says where the time went (issue 22): every check's start, the GPU task calls each check made with
their wall and worker time, and when each GPU worker started and imported torch, which is before L0 runs."""

import os

from tests.agent.harness import FAKE_TORCH, Scenario, check, run_agent


def test_every_check_has_its_start_and_gpu_checks_their_task_calls(tmp_path):
    report, _ = run_agent(Scenario(tmp_path), args=["--mode", "standard"],
                          env={"PYTHONPATH": "%s:%s" % (FAKE_TORCH, os.getcwd())})
    starts = [c["started_s"] for c in report["checks"]]
    assert all(0 <= s <= report["duration_s"] for s in starts)
    for c in report["checks"]:
        assert c["started_s"] + c["duration_s"] <= report["duration_s"] + 0.01, c["id"]
    (call,) = check(report, "torch.import")["tasks"]
    assert call["task"] == "gpu_torch_info" and call["ranks"] == [0]
    assert 0 < call["task_s"] <= call["wall_s"] <= check(report, "torch.import")["duration_s"]
    assert "tasks" not in check(report, "host.system")  # no GPU work, no task entry


def test_the_first_workers_start_before_l0_and_report_their_torch_import(tmp_path):
    report, _ = run_agent(Scenario(tmp_path), args=["--mode", "standard"],
                          env={"PYTHONPATH": "%s:%s" % (FAKE_TORCH, os.getcwd())})
    workers = {}
    for worker in report["timing"]["workers"]:  # a failed task ends its pool: later workers are listed too
        workers.setdefault((worker["role"], worker["rank"]), worker)
    # gloo's two ranks, even before L1 has counted the GPUs, and GPU 0's training worker
    assert {("measure", 0), ("measure", 1), ("train", 0)} <= set(workers)
    first_check = min(c["started_s"] for c in report["checks"])
    assert all(workers[key]["started_s"] <= first_check for key in [("measure", 0), ("measure", 1), ("train", 0)])
    assert workers[("measure", 0)]["import_s"] >= 0


def test_quick_starts_one_measuring_worker_and_no_training_worker(tmp_path):
    report, _ = run_agent(Scenario(tmp_path), args=["--mode", "quick"],
                          env={"PYTHONPATH": "%s:%s" % (FAKE_TORCH, os.getcwd())})
    first = report["timing"]["workers"][0]
    assert (first["role"], first["rank"]) == ("measure", 0)
    assert not [w for w in report["timing"]["workers"] if w["role"] == "train"]


def test_no_worker_starts_when_no_selected_check_needs_torch(tmp_path):
    report, _ = run_agent(Scenario(tmp_path), args=["--mode", "standard", "--only", "L0,L1"])
    assert report["timing"]["workers"] == []


def test_a_task_timing_below_zero_is_kept_at_zero():
    # Seen on the simulated cluster: comm's measured_s came out negative, and the schema refused the whole report.
    from agents.cudaprobe import children, engine

    class Outcome:
        result = {"timing": {"task_s": 1.0, "setup_s": 0.5, "measured_s": -0.16, "phases": {"x.measured_s": -1.0}}}

    def task():
        return None

    ctx = engine.Context("standard")
    entry = children.call_timing(ctx, task, [0], __import__("time").monotonic(), [Outcome()])
    assert entry["measured_s"] == 0.0 and entry["setup_s"] == 0.5 and entry["phases"] == {"x.measured_s": 0.0}
