"""One matcher for agent checks and free text: ranked playbooks, matched lines, extracted facts."""

import json
from pathlib import Path

from cudaweb.playbooks import similarity
from cudaweb.playbooks.matcher import MIN_SCORE, triage, triage_check

CORPUS = {e["id"]: e for e in map(json.loads, (Path(__file__).parent.parent / "data" / "triage_corpus.jsonl").open())}
REAL = Path(__file__).parent.parent / "fixtures" / "real"


def test_an_agent_check_is_matched_by_its_signature():
    check = {"summary": "compute mode EXCLUSIVE_PROCESS on GPU 0", "evidence": "GPU 0: compute_mode=Exclusive_Process",
             "signatures": ["compute_mode_exclusive"], "metrics": {}}
    result = triage_check(check)
    assert result.playbooks[0].playbook.id == "compute_mode_busy"
    assert result.playbooks[0].signatures == ["compute_mode_exclusive"]


def test_a_metric_condition_selects_a_playbook():
    result = triage_check({"summary": "DDP reaches 70% of 2 x single-GPU throughput", "evidence": "",
                           "signatures": [], "metrics": {"ddp_scaling": 0.7}})
    assert result.playbooks[0].playbook.id == "performance"
    assert result.playbooks[0].metrics == ["ddp_scaling 0.7 < 0.8"]


def test_the_evidence_of_a_healthy_real_report_matches_no_pattern():
    report = json.loads((REAL / "h200-gpus2-standard.json").read_text())  # NCCL INFO lines, nvidia-smi rows ...
    for check in report["checks"]:
        result = triage(check["summary"] + "\n" + check["evidence"])
        assert not [m for m in result.playbooks if m.confident and m.playbook.id != "performance"], check["id"]
        assert all(m.score < MIN_SCORE for m in result.playbooks if m.basis == "similar")  # a guess, shown as one
        found = [m for m in result.playbooks if m.basis == "rules"]
        assert triage_check(check).playbooks == found or check["signatures"]  # the run page: rules only
        if check["id"] == "advice.performance":  # advice is what the performance playbook is about
            assert [m.playbook.id for m in found] == ["performance"]
        else:
            assert found == [], check["id"]


def test_unknown_text_is_no_match_with_candidates_not_a_confident_answer():
    result = triage("KeyError: 'learning_rate'\n  File \"config.py\", line 12, in load")
    assert not result.matched and result.playbooks == []
    weak = triage("the loader printed pin_memory twice")  # one weak pattern only: a partial match, not an answer
    assert weak.candidates[0].playbook.id == "performance"
    ranked = [(m.playbook.id, m.basis, m.confident) for m in weak.playbooks]
    assert ("performance", "partial", False) in ranked and not any(confident for _, _, confident in ranked)
    assert all(m.score < MIN_SCORE for m in weak.playbooks)  # the fallback's similar ones too


def test_matched_lines_are_the_evidence():
    text = "epoch 3 step 120\n" + CORPUS["nccl_timeout-02"]["text"] + "\nbye"
    best = triage(text).playbooks[0]
    assert best.playbook.id == "nccl_timeout"
    assert any("Watchdog caught collective operation timeout" in line for line in best.evidence)
    assert "epoch 3 step 120" not in best.evidence


def test_facts_from_a_watchdog_timeout():
    facts = triage(CORPUS["nccl_timeout-02"]["text"]).facts
    assert facts["rank"] == 0 and facts["op_type"] == "ALLREDUCE" and facts["timeout_ms"] == 600000
    assert facts["seq_num"] == 1580


def test_oom_numbers_tell_fragmentation_from_another_process():
    fragmented = triage(CORPUS["oom-01"]["text"])  # 2.30 GiB reserved-unallocated, 1.70 GiB tried
    assert fragmented.facts["tried_gib"] == 1.7 and fragmented.facts["reserved_unallocated_gib"] == 2.3
    assert fragmented.facts["gpu"] == 0
    assert fragmented.oom_kinds[0]["kind"] == "fragmentation"
    old_format = triage(CORPUS["oom-02"]["text"])  # 1.01 GiB reserved in total, 649.97 MiB allocated
    assert abs(old_format.facts["reserved_unallocated_gib"] - 0.375) < 0.01
    shortage = triage(CORPUS["oom-05"]["text"])  # 55.57 GiB tried on a 12 GiB GPU
    assert shortage.oom_kinds[0]["kind"] == "real_shortage"
    crowded = triage(CORPUS["oom-06"]["text"])  # 22.78 tried; 12.73 free + 9.35 cached is less; all memory its own
    kinds = [k["kind"] for k in crowded.oom_kinds if k["shown"]]
    assert kinds[0] == "real_shortage" and "another_process" not in kinds
    assert triage("RuntimeError: CUDA out of memory.", signatures=["gpu_memory_held_by_process"]).oom_kinds[0][
        "kind"] == "another_process"


def test_what_todays_stack_prints_finds_its_playbook():
    """Wordings of torch 2.11 / NCCL 2.28 that no public thread of the corpus carried (issue 23), each as PyTorch's
    sources word it."""
    cases = {
        "RuntimeError: Function 'LogBackward0' returned nan values in its 0th output.": "amp_numerics",
        "epoch 3 step 200 loss: inf": "amp_numerics",
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=3, OpType=ALLREDUCE)": "nccl_timeout",
        "RuntimeError: Cannot re-initialize CUDA in forked subprocess.": "cuda_fork",
        "ValueError: Unrecognized key 'roundup_power2' in CUDA allocator config.": "oom",
        "torch.AcceleratorError: CUDA error: invalid device ordinal\nCompile with `TORCH_USE_CUDA_DSA` to enable "
        "device-side assertions.": "device_access",
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.":
            "ddp_unused_parameters",
        "RuntimeError: Attempting to deserialize object on CUDA device 7 but torch.cuda.device_count() is 2.":
            "checkpoint_device",
        "RuntimeError: index_put_ does not have a deterministic implementation, but you set "
        "'torch.use_deterministic_algorithms(True)'.": "deterministic_algorithms",
        "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED.": "cublas_cudnn",
    }
    for text, category in cases.items():
        first = triage(text).playbooks[0]
        assert (first.playbook.category, first.basis) == (category, "rules"), text


def test_traceback_frames_are_not_what_the_fallback_compares():
    """Every traceback has frame lines; a short example made mostly of them was 'similar' to any traceback."""
    frames = ("Traceback (most recent call last):\n  File \"/usr/lib/python3/site-packages/torch/nn/modules/module.py\", "
              "line 1775, in _call_impl\n    return forward_call(*args, **kwargs)\n           ^^^^^^^^^^^^^^^^^^^^^\n")
    assert similarity.terms(frames) == ["forward_call", "forward", "call", "args", "kwargs"]
    assert similarity.terms("[rank3]:   File \"/x/train.py\", line 9, in main\nValueError: bad") == ["valueerror", "bad"]


def test_the_communication_failure_printed_first_leads_the_ones_it_caused():
    text = ("[rank0]:[E1201 07:51:39.716 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) "
            "ran for 3001 milliseconds before timing out.\n"
            "[rank0]: Collective WorkNCCL(SeqNum=1) raised the following async exception: NCCL error: unhandled "
            "system error (run with NCCL_DEBUG=INFO for details)\nncclSystemError: System call (e.g. socket, malloc) "
            "or external library call failed or device error.\n")
    result = triage(text)
    assert [m.playbook.category for m in result.sequence] == ["nccl_timeout", "nccl_network"]


def test_a_backend_error_is_what_it_wraps():
    """DistBackendError wraps every backend error: the wrapped CUDA failure decides, not the wrapper."""
    text = ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3135, unhandled cuda error "
            "(run with NCCL_DEBUG=INFO for details)\nncclUnhandledCudaError: Call to CUDA function failed.\n"
            "Last error:\nCuda failure 'out of memory'")
    assert triage(text).playbooks[0].playbook.category == "oom"


def test_advice_never_leads_the_one_failure_of_a_log_however_much_of_it_is_printed():
    """Three performance advisories (confident each, 2.6 together) before one CUDA OOM: the OOM leads; the advice
    still follows it. With no failure in the log the advice leads."""
    advice = ("UserWarning: Anomaly Detection has been enabled. This mode will increase the runtime and should only "
              "be enabled for debugging.\nUserWarning: TensorFloat32 tensor cores for float32 matrix multiplication "
              "available but not enabled. Consider setting `torch.set_float32_matmul_precision('high')` for better "
              "performance.\nRecording too many CUDAGraphs may lead to extra overhead\n")
    failure = 'Traceback (most recent call last):\n  File "train.py", line 10, in <module>\nRuntimeError: CUDA error: ' \
              "out of memory\n"
    found = triage(advice + failure).playbooks
    assert [m.playbook.category for m in found[:2]] == ["oom", "performance"] and found[1].score > found[0].score
    assert triage(advice).playbooks[0].playbook.category == "performance"
