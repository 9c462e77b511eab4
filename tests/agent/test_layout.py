"""The agent's layout: one module per check group holding its checks and their GPU tasks, ids named after their
module, a worker that runs only declared GPU tasks, one failure helper, and a new check module found by itself."""

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from agents.cudaprobe import proc, registry
from agents.cudaprobe.children import TaskOutcome
from agents.cudaprobe.checks import cuda
from agents.cudaprobe.judge import task_failure
from tests.agent.harness import REPO


def test_check_ids_start_with_their_module_name():
    specs = registry.load_all()
    assert len(specs) >= 30
    for spec in specs:
        assert spec.func.__module__ == "agents.cudaprobe.checks." + spec.id.split(".")[0], spec.id


def test_a_check_named_after_another_module_is_refused():
    with pytest.raises(ValueError, match="ids start with their module's name"):
        registry.check("driver.smuggled", "L1", "declared in cuda.py")(type("f", (), {"__module__": cuda.__name__}))


def test_every_check_runs_after_what_it_requires():
    seen = set()
    for spec in registry.load_all():
        assert all(r in seen for r in spec.requires), spec.id
        seen.add(spec.id)


def test_gpu_tasks_resolve_by_name_and_nothing_else_does():
    assert registry.resolve_task(registry.task_name(cuda.gpu_matmul)) is cuda.gpu_matmul
    for name in ("agents.cudaprobe.checks.cuda:cuda_matmul", "os:system", "agents.cudaprobe.worker:serve", "junk"):
        with pytest.raises(LookupError):
            registry.resolve_task(name)
    with pytest.raises(ValueError):
        registry.task_name(cuda.cuda_matmul)


def test_the_worker_answers_each_request_with_one_result_line():
    requests = "\n".join([
        "not json",
        json.dumps({"task": "os:system", "args": {}}),
        json.dumps({"task": "agents.cudaprobe.checks.torch:gpu_torch_info"}),
    ]) + "\n"
    done = subprocess.run([sys.executable, "-m", "agents.cudaprobe.worker", "--serve"], input=requests, cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    results = [json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines()
               if line.startswith("CUDAPROBE_RESULT ")]
    assert [r.get("error") for r in results] == ["BadRequest", "LookupError", None]
    assert results[2]["torch_version"].startswith("2.") and results[2]["import_s"] > 0


def _outcome(result=None, timed_out=False, returncode=None, stderr=""):
    return TaskOutcome(result, proc.CommandResult(["task"], returncode, "", stderr, timed_out))


def test_a_rank_that_says_why_beats_the_ranks_that_hung_waiting_for_it():
    outcomes = [_outcome({"error": "RuntimeError", "message": "CUDA error: out of memory"}),
                _outcome(timed_out=True)]
    result = task_failure(outcomes, "NCCL all-reduce", "nccl_failed", "nccl_hang")
    assert result.signatures == ["oom"] and result.summary == "NCCL all-reduce failed: CUDA error: out of memory"


def test_a_hang_is_named_only_when_no_rank_said_why():
    result = task_failure([_outcome(timed_out=True), _outcome(timed_out=True)], "DDP", "training_failed", "nccl_hang")
    assert result.signatures == ["nccl_hang"] and "every rank was killed" in result.summary
    single = task_failure(_outcome(timed_out=True), "matmul benchmark", "matmul_failed")
    assert single.signatures == ["matmul_failed_hang"] and "the child was killed" in single.summary
    died = task_failure(_outcome(returncode=-9), "P2P test", "p2p_failed")
    assert died.signatures == ["p2p_failed"] and died.summary == "P2P test failed: exit -9"


NEW_CHECK = '''
"""A check group written for the test: one check and the GPU task it sends to a worker."""

import os

from agents.cudaprobe import children
from agents.cudaprobe.model import passed
from agents.cudaprobe.registry import check, gpu_task


@gpu_task
def gpu_whoami(args):
    return {"pid": os.getpid(), "echo": args["echo"]}


@check("extra.whoami", "L4", "A GPU task in a worker, declared in one module")
def extra_whoami(ctx):
    outcome = children.run_task(ctx, gpu_whoami, {"echo": "hello"})
    assert outcome.ok, outcome.evidence()
    return passed("worker %d said %s" % (outcome.result["pid"], outcome.result["echo"]),
                  metrics={"worker_pid": outcome.result["pid"], "agent_pid": os.getpid()})
'''


def test_a_new_check_module_is_all_it_takes(tmp_path):
    shutil.copytree(REPO / "agents", tmp_path / "agents", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "agents" / "cudaprobe" / "checks" / "extra.py").write_text(textwrap.dedent(NEW_CHECK))
    listed = subprocess.run([sys.executable, "-m", "agents.cudaprobe", "--list"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60).stdout
    assert "extra.whoami" in listed
    done = subprocess.run([sys.executable, "-m", "agents.cudaprobe", "--json", "--only", "extra"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    checks = json.loads(done.stdout)["checks"]
    (result,) = [c for c in checks if not c["summary"].startswith("not run: --only")]
    assert len(checks) > 1 and all(c["status"] == "skip" for c in checks if c is not result)  # the rest, with why
    assert result["id"] == "extra.whoami" and result["status"] == "pass", result
    assert result["summary"].endswith("said hello")
    assert result["metrics"]["worker_pid"] != result["metrics"]["agent_pid"]


@pytest.mark.parametrize("text, signature", [
    # NVIDIA/nccl issue texts and NCCL source strings (docs/adr/0005-judging-against-expectations.md)
    ("ncclInternalError: Internal check failed.\nLast error:\nBootstrap : no socket interface found", "nccl_bad_interface"),
    ("ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)",
     "nccl_bad_interface"),
    ("misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> returned 113(No route to host) "
     "errno 115(Operation now in progress)", "nccl_no_route"),
    ("NCCL INFO socketPollConnect: connect to 10.29.224.148<52333> returned Connection refused, retrying (18/34)",
     "nccl_peer_unreachable"),
    ("misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637892 bytes, error: No space "
     "left on device (28)", "nccl_shm_too_small"),
    ("Last error:\nError while creating shared memory segment /dev/shm/nccl-EoOvZr (size 7340384)",
     "nccl_shm_too_small"),
    ("misc/socket.cc:409 NCCL WARN Call to bind failed: Address already in use", "rendezvous_port_in_use"),
    ("but store->get('0') got error: Socket Timeout", "rendezvous_timeout"),
    ("NCCL INFO NET/IB : No device found.\nncclSystemError: System call (e.g. socket, malloc) failed",
     "nccl_network"),
])
def test_nccl_failures_are_named(text, signature):
    from agents.cudaprobe.judge import signature_for_error

    assert signature_for_error(text, "nccl_failed") == signature
