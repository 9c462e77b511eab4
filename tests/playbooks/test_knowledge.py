"""The knowledge tables and the order of several failures in one log (issue 11), on real texts of the corpus."""

import json
from pathlib import Path

from cudaweb.playbooks import knowledge
from cudaweb.playbooks.library import CATEGORIES
from cudaweb.playbooks.matcher import triage

CORPUS = {e["id"]: e for e in map(json.loads, (Path(__file__).parent.parent / "data" / "triage_corpus.jsonl").open())}
TABLES = {"cuda_runtime", "cuda_driver", "nccl", "nvml", "xid", "torch_distributed", "amp", "performance"}


def test_every_table_entry_has_a_category_or_none_and_a_source():
    kb = knowledge.load()
    assert TABLES <= {t.name for t in kb.tables}
    for entry in knowledge.entries():
        assert entry.category is None or entry.category in CATEGORIES, entry
        assert entry.source.startswith(("https://", "cudaweb:")), entry  # cudaweb: a rule of ours, said so
    runtime = {e.name: e for t in kb.tables if t.name == "cuda_runtime" for e in t.entries}
    assert (runtime["cudaErrorDevicesUnavailable"].number, runtime["cudaErrorIllegalAddress"].number) == (46, 700)


def _named(text):
    return {(h.entry.table, h.entry.name, h.how) for h in knowledge.load().hits(text)}


def test_numbers_names_and_source_files_the_patterns_never_named():
    charm, gdrcopy = CORPUS["compute_mode_busy-dv1-01"]["text"], CORPUS["compute_mode_busy-dv1-02"]["text"]
    assert ("cuda_runtime", "cudaErrorDevicesUnavailable", "number") in _named(charm)
    assert ("cuda_driver", "CUDA_ERROR_DEVICE_UNAVAILABLE", "name") in _named(gdrcopy)
    assert any(t == "nccl" and how == "file" for t, _, how in _named(CORPUS["nccl_network-dv2-01"]["text"]))
    assert any(t == "xid" for t, _, _ in _named("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."))
    for case, category in (("compute_mode_busy-dv1-01", "compute_mode_busy"), ("amp_numerics-dv2-08", "amp_numerics"),
                           ("torch_cpu_build-dv1-06", "torch_cpu_build"), ("oom-dv1-04", "oom")):
        first = triage(CORPUS[case]["text"], exclude={case}).playbooks[0]
        assert first.playbook.category == category, case
    assert triage(CORPUS["compute_mode_busy-dv1-01"]["text"]).playbooks[0].knowledge[0].entry.meaning


def test_a_format_string_message_is_found_by_its_fixed_parts():
    hits = _named("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients "
                  "joined.")
    assert {("torch_distributed", "TCPStore", "message"), ("torch_distributed", "DistStoreError", "name")} <= hits


def test_the_first_failure_leads_and_its_consequences_follow():
    oom = "[rank3]: " + CORPUS["oom-01"]["text"]
    timeout = CORPUS["nccl_timeout-dv2-03"]["text"]  # the watchdog on rank 4, scored higher on its own
    result = triage(oom + "\n" + timeout)
    assert [(m.playbook.category, m.then) for m in result.sequence] == [("oom", False), ("nccl_timeout", True)]
    assert result.playbooks[0].playbook.category == "oom" and result.oom_kinds
    assert result.as_dict()["playbooks"][1]["then"] is True
    alone = triage(timeout)
    assert alone.playbooks[0].playbook.category == "nccl_timeout" and len(alone.sequence) == 1


def test_advice_printed_before_a_failure_does_not_lead():
    tf32 = CORPUS["performance-dv2-06"]["text"]
    result = triage(tf32 + "\n" + CORPUS["illegal_access-dv2-03"]["text"])
    assert result.playbooks[0].playbook.category == "illegal_access"


def test_a_timeout_printed_before_the_oom_is_still_its_consequence():
    result = triage(CORPUS["nccl_timeout-dv2-03"]["text"] + "\n" + CORPUS["oom-01"]["text"])
    assert [(m.playbook.category, m.then) for m in result.sequence] == [("oom", False), ("nccl_timeout", True)]


def test_xid_13_and_31_are_the_applications_unless_they_repeat_on_one_gpu():
    """NVIDIA's catalogue: Xid 31 once, or on several GPUs, is the application's (never a confident answer);
    repeated on one GPU it may be the hardware (run DCGM diagnostics)."""
    line = "NVRM: Xid (PCI:0000:%s:00): 31, pid=%d, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS\n"
    once = triage(line % ("3d", 1))
    assert once.playbooks[0].playbook.category == "illegal_access" and not once.playbooks[0].confident
    spread = triage(line % ("3d", 1) + line % ("db", 2))
    assert spread.playbooks[0].playbook.category == "illegal_access" and not spread.playbooks[0].confident
    repeated = triage(line % ("db", 1) + line % ("db", 2) + line % ("db", 3))
    first = repeated.playbooks[0]
    assert first.playbook.category == "gpu_hardware" and not first.confident
    assert any(hit.how == "repeat" and "dcgmi diag" in hit.entry.meaning for hit in first.knowledge)
    assert "illegal_access" in [m.playbook.category for m in repeated.playbooks[:3]]
