"""Training runs in workers of its own, started with the run (issue 22): they are the run's own processes for the
busy-GPU judging, a replayed run answers from its records, and none outlives the run."""

import os
import shutil
import uuid

from agents.cudaprobe import children, engine
from agents.cudaprobe.judge import busy_gpus
from tests.agent.harness import FAKE_TORCH, Scenario, processes_with_env, run_agent


class _Pids:
    def __init__(self, *pids):
        self._pids = set(pids)

    def pids(self):
        return set(self._pids)


def _snapshot(*pids):
    return {"index": 0, "activity": {"before": {"pids": list(pids), "self": pids[0], "util": 0}}}


def test_a_training_worker_and_a_measuring_worker_on_one_gpu_are_both_ours():
    ctx = engine.Context("standard")
    ctx.pool, ctx.trainers = _Pids(101), _Pids(202)
    assert busy_gpus(ctx, [_snapshot(202, 101)]) == {}
    assert busy_gpus(ctx, [_snapshot(202, 101, 303)]) == {0: "process 303 computing on it"}


def test_the_runs_own_workers_are_not_other_processes_holding_a_gpu():
    # seen on a lent H200 (issue 33): driver.processes read NVML while the measuring worker made its context, and
    # warned of "1 process(es) hold GPU memory: [N/A] (pid 2453, 14 MiB)", the run's own worker
    from agents.cudaprobe.checks import driver

    ctx = engine.Context("standard")
    ctx.pool, ctx.isolated, ctx.trainers = _Pids(2453), _Pids(2454), _Pids(2455)
    ours = [{"pid": pid, "process_name": "[N/A]", "used_gpu_memory": "14 MiB", "gpu_uuid": "GPU-0"}
            for pid in (2453, 2454, 2455)]
    ctx.facts["nvml"] = {"apps": ours}
    outcome = driver._gpu_processes(ctx)
    assert (outcome.status, outcome.metrics["compute_processes"]) == ("pass", 0)
    assert "this run's own GPU workers, not counted: 2453, 2454, 2455" in outcome.evidence
    ctx.facts["nvml"] = {"apps": ours + [dict(ours[0], pid=4242)]}
    outcome = driver._gpu_processes(ctx)
    assert (outcome.status, outcome.signatures) == ("warn", ["gpu_memory_held_by_process"])
    assert "pid 4242" in outcome.summary and "2453" not in outcome.summary


def test_a_replayed_run_trains_on_its_records():
    ctx = engine.Context("standard")
    ctx.pool = children.ReplayPool([])
    assert children.train_pool(ctx) is ctx.pool and ctx.trainers is None
    children.hand_gpus_to_trainers(ctx)  # nothing to end in a replay


def test_no_worker_of_either_kind_outlives_the_run(tmp_path):
    # the recorded torch, whose torch._dynamo takes 60 s to import: a training worker still preloading it when
    # the run ends must be ended by the agent, not left to finish
    slow_torch = tmp_path / "slow-torch"
    shutil.copytree(FAKE_TORCH, slow_torch)
    (slow_torch / "torch" / "_dynamo.py").write_text("import time\ntime.sleep(60)\n")
    tag = uuid.uuid4().hex
    report, _ = run_agent(Scenario(tmp_path / "host"), args=["--mode", "standard"],
                          env={"PYTHONPATH": "%s:%s" % (slow_torch, os.getcwd()), "CUDAWEB_TEST_TAG": tag})
    assert {w["role"] for w in report["timing"]["workers"]} == {"measure", "train"}
    assert processes_with_env("CUDAWEB_TEST_TAG", tag) == []


def test_the_training_workers_end_before_the_stress_layer_and_stay_ours():
    # Seen on the lent H200 (2026-12-01): a training worker still held its context and cached memory during L7, and
    # the burn-in named it another process (gpu_busy, memory_taken_during_test).
    ctx = engine.Context("burnin", {})
    ctx.trainers = children.Pool(ctx, role="train")
    ended = []

    class Worker:
        def close(self):
            ended.append(True)

    ctx.trainers.workers, ctx.trainers.started_pids = {0: Worker()}, {4242}
    try:
        children.end_trainers(ctx)
        assert ended == [True] and ctx.trainers.workers == {}
        assert 4242 in children.our_pids(ctx)
    finally:
        ctx.trainers.remove()
    source = open(children.__file__.replace("children.py", "checks/stress.py")).read()
    for check_id in ("stress.sustained", "stress.memory_test", "stress.consistency"):
        body = source[source.index('@check("%s"' % check_id):]
        body = body[:body.index("\n@check(") if "\n@check(" in body[1:] else len(body)]
        assert "children.end_trainers(ctx)" in body, check_id
