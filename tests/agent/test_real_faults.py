"""The fault campaign made for real on a 2 x H200 host (bench/fault_campaign.sh, docs/benchmarks.md): every report is
named, none passes, and every L4-L6 judging rule gives the same verdict again when fed the GPU workers' raw results
of that run (--record), here with no GPU."""

import json
from pathlib import Path

import pytest

from agents.cudaprobe import engine, registry
from agents.cudaprobe.checks.torch import torch_info
from agents.cudaprobe.children import ReplayPool
from tests.agent.harness import VALIDATOR

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
FAULTS = REAL / "faults"
EXPECTED = {  # fault: (verdict, the check that names it, its signature)
    "p2p-disabled": ("fail", "comm.nccl", "nccl_p2p_not_used"),
    "p2p-and-shm-disabled": ("fail", "comm.nccl", "nccl_p2p_not_used"),
    "p2p-level-in-conf-file": ("fail", "comm.nccl", "nccl_p2p_not_used"),
    "bad-socket-interface": ("fail", "comm.nccl", "nccl_bad_interface"),
    "one-nccl-channel": ("fail", "comm.nccl", "nccl_busbw_low"),
    "busy-gpu1": ("warn", "cuda.matmul", "gpu_busy"),
    "memory-hog-gpu0": ("fail", "cuda.context", "oom"),
    "gpu-hidden-by-cvd": ("warn", "cuda.available", "gpus_hidden_by_cuda_visible_devices"),
    "no-torch-in-venv": ("fail", "torch.import", "torch_missing"),
    "rendezvous-port-taken": ("fail", "comm.gloo", "rendezvous_port_in_use"),
}
REPLAYED_LAYERS = ("L4", "L5", "L6")
SET_BY_REPLAYED = ("busy_gpus", "train", "copy_bandwidth", "matmul", "nccl_transports", "torch_info")


def _report(name):
    return json.loads((FAULTS / ("%s.json" % name)).read_text())


def test_every_fault_has_a_report_and_a_record():
    assert len(EXPECTED) >= 8
    assert {p.name[:-5] for p in FAULTS.glob("*.json") if not p.name.endswith(".record.json")} == set(EXPECTED)


@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_each_fault_is_named_and_none_passes(fault):
    report = _report(fault)
    assert not list(VALIDATOR.iter_errors(report))
    verdict, check_id, signature = EXPECTED[fault]
    assert report["verdict"] == verdict != "pass"
    (check,) = [c for c in report["checks"] if c["id"] == check_id]
    assert signature in check["signatures"], check


def replay(record):
    """Run the L4-L6 checks of a recorded run again on its raw GPU results; the lower layers and the advisories
    keep their recorded results (they read the host, not the GPU workers)."""
    report = record["report"]
    ctx = engine.Context(report["mode"], options=record["options"], environ=record["environ"])
    ctx.facts = {k: v for k, v in record["facts"].items() if k not in SET_BY_REPLAYED}
    ctx.pool = ReplayPool(record["tasks"])
    recorded = {c["id"]: c for c in report["checks"]}
    checks = []
    for spec in registry.load_all():
        if spec.id not in recorded:
            continue
        result = engine._run_one(spec, ctx) if spec.layer in REPLAYED_LAYERS else dict(recorded[spec.id])
        if spec.id == "torch.import":
            torch_info(ctx)  # the torch facts the L4-L6 checks read, answered by the recorded worker
        ctx.results[spec.id] = result
        checks.append(result)
    engine.enforce_layer_order(checks)
    return {c["id"]: c for c in checks}, recorded


RECORDS = sorted(FAULTS.glob("*.record.json")) + sorted((REAL / "records").glob("*.record.json"))


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name.split(".")[0])
def test_the_judging_gives_the_same_verdicts_on_the_recorded_raw_results(path):
    replayed, recorded = replay(json.loads(path.read_text()))
    for check_id, check in recorded.items():
        again = replayed[check_id]
        assert (again["status"], again["signatures"]) == (check["status"], check["signatures"]), check_id
        assert again["summary"] == check["summary"], check_id
        assert {k: v for k, v in again["metrics"].items()} == check["metrics"], check_id


def test_a_node_defined_as_some_gpus_of_its_host_is_not_warned_for_hiding_the_others():
    """The real run with CUDA_VISIBLE_DEVICES=0 on the 2 x H200 host, replayed as the dashboard runs a node that is
    GPU 0 of its host (CUDAWEB_NODE_DEVICES=0): the other GPU is another node, not a mistake."""
    record = json.loads((FAULTS / "gpu-hidden-by-cvd.record.json").read_text())
    record["environ"] = dict(record["environ"], CUDAWEB_NODE_DEVICES=record["environ"]["CUDA_VISIBLE_DEVICES"])
    replayed, _ = replay(record)
    check = replayed["cuda.available"]
    assert check["status"] == "pass" and "this node is GPU(s) 0 of the host's 2" in check["summary"]
