"""What a pair shows, read from both ends' reports: the real NCCL pair between the two GPUs of the H200 host
(tests/fixtures/real/pair/, each end its own CUDA_VISIBLE_DEVICES) and the failures named."""

import json
import types
from pathlib import Path

from cudaweb.network.services import pair_outcome, suspects_of

PAIR = Path(__file__).resolve().parent / "fixtures" / "real" / "pair"
A = types.SimpleNamespace(name="h200-gpu0", is_local=False)
B = types.SimpleNamespace(name="h200-gpu1", is_local=False)


def _real():
    return {"rank0": (json.loads((PAIR / "h200-gpu0-rank0.json").read_text()), ""),
            "rank1": (json.loads((PAIR / "h200-gpu1-rank1.json").read_text()), "")}


def test_the_real_h200_pair_over_nccl():
    fields = pair_outcome(A, B, _real())
    assert fields["status"] == "pass" and fields["failure"] == ""
    assert fields["transport"] == "P2P/CUMEM" and fields["nccl_busbw_gbs"] == 293.0
    assert fields["gloo_latency_us"] == 261.4 and fields["gloo_busbw_gbs"] == 1.83


def test_the_connecting_sides_finding_names_the_failure():
    results = _real()
    for role, signatures in (("rank1", ["bad_interface"]), ("rank0", ["peer_timeout", "rendezvous_timeout"])):
        check = next(c for c in results[role][0]["checks"] if c["id"] == "comm.peer")
        check.update(status="fail", signatures=signatures, summary="failed")
    fields = pair_outcome(A, B, results)
    assert fields["status"] == "fail" and fields["failure"] == "wrong interface"
    assert fields["signatures"] == ["bad_interface", "peer_timeout", "rendezvous_timeout"]


def test_an_end_that_never_started_is_a_peer_that_never_came():
    results = _real()
    results["rank1"] = (None, "Unreachable: cannot start /nonexistent/python3")
    fields = pair_outcome(A, B, results)
    assert fields["failure"] == "peer never came" and "h200-gpu1: Unreachable" in fields["reason"]


def test_the_node_that_fails_with_every_partner():
    pair = lambda a, b, status: types.SimpleNamespace(node_a=a, node_b=b, status=status)  # noqa: E731
    c = types.SimpleNamespace(name="c", is_local=False)
    pairs = [pair(A, B, "pass"), pair(A, c, "fail"), pair(B, c, "fail")]
    assert suspects_of(pairs) == ["c"]
    assert suspects_of([pair(A, c, "fail"), pair(B, c, "fail")]) == []  # nothing passed: no one to blame
