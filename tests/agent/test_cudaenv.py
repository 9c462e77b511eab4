"""CUDA / cuBLAS / cuDNN / PyTorch settings: what each does with its value, which values the stack refuses, and
the pointer a check whose figure one explains gets. The real H200 runs with such settings are in
tests/agent/test_real_burnin.py (NVIDIA_TF32_OVERRIDE=0, PYTORCH_*ALLOC_CONF refused, CUDA_VISIBLE_DEVICES)."""

import pytest

from agents.cudaprobe import cudaenv
from agents.cudaprobe.checks.advice import advice_environment
from agents.cudaprobe.engine import Context
from agents.cudaprobe.model import Outcome


@pytest.mark.parametrize("value, refused", [
    ("expandable_segments:True", False), ("max_split_size_mb:512,garbage_collection_threshold:0.6", False),
    ("backend:cudaMallocAsync", False), ("roundup_power2_divisions:[256:1,512:2,>:8]", False),
    ("expandable_segments:maybe", True), ("max_split_size_mb:lots", True), ("bogus_option:1", True),
    ("expandable_segments", True), ("garbage_collection_threshold:1.5", True), ("backend:malloc", True)])
def test_allocator_settings_pytorch_refuses(value, refused):
    (item,) = cudaenv.settings({"PYTORCH_ALLOC_CONF": value})
    assert bool(item["refused"]) == refused, item


def test_settings_that_do_nothing_are_not_named():
    environ = {"NVIDIA_TF32_OVERRIDE": "1", "CUDA_LAUNCH_BLOCKING": "0", "CUDA_MODULE_LOADING": "LAZY",
               "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "NVIDIA_VISIBLE_DEVICES": "0,1", "TORCH_CUDA_ARCH_LIST": "9.0a"}
    assert cudaenv.settings(environ) == []
    assert [i["name"] for i in cudaenv.settings({"CUDA_MODULE_LOADING": "eager"})] == ["CUDA_MODULE_LOADING"]
    assert cudaenv.settings({"CUBLAS_WORKSPACE_CONFIG": "4096:8"})[0]["refused"]
    assert not cudaenv.settings({"CUBLAS_WORKSPACE_CONFIG": ":4096:8:16:8"})[0]["refused"]


def test_a_failing_figure_points_to_the_setting_that_explains_it_and_a_pass_does_not():
    environ = {"NVIDIA_TF32_OVERRIDE": "0"}
    slow = cudaenv.point("cuda.matmul", Outcome("fail", "GPU 0 tf32 matmul 50.8 TFLOP/s is 15%"), environ)
    assert "set here: NVIDIA_TF32_OVERRIDE=0 (turns TF32 off" in slow.summary
    assert slow.signatures == ["env_setting_named"] and "advice.environment" in slow.evidence
    fine = cudaenv.point("cuda.matmul", Outcome("pass", "bf16 790"), environ)
    assert fine.summary == "bf16 790" and fine.signatures == []
    other = cudaenv.point("cuda.copy_bandwidth", Outcome("warn", "pinned H2D low"), environ)
    assert other.signatures == []  # TF32 does not explain a copy


def test_no_setting_is_named_as_the_cause_of_what_the_hardware_got_wrong():
    environ = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    flipped = Outcome("fail", "GPU 1: 2 word(s) read back wrong", signatures=["memory_test_mismatch"])
    assert cudaenv.point("stress.memory_test", flipped, environ).summary == "GPU 1: 2 word(s) read back wrong"
    differs = Outcome("fail", "GPU 0: matmul_bf16 gave 2 different results", signatures=["silent_data_corruption"])
    assert cudaenv.point("stress.consistency", differs, environ).signatures == ["silent_data_corruption"]
    # a figure among them is still pointed to
    slow = Outcome("fail", "hot and slow", signatures=["throttle_thermal", "sustained_below_expected"])
    assert "env_setting_named" in cudaenv.point("stress.sustained", slow, environ).signatures


def test_a_check_that_already_names_the_setting_is_left_alone_and_visibility_only_named_on_failure():
    environ = {"CUDA_VISIBLE_DEVICES": "0"}
    warned = Outcome("warn", "torch sees 1 of the 2 GPUs the driver lists: CUDA_VISIBLE_DEVICES='0' hides the others")
    assert cudaenv.point("cuda.available", warned, environ).signatures == []
    failed = cudaenv.point("cuda.available", Outcome("fail", "torch.cuda.is_available() is False"), environ)
    assert "set here: CUDA_VISIBLE_DEVICES=0" in failed.summary


def test_advice_environment_names_cuda_and_torch_settings():
    ctx = Context("standard", environ={"NVIDIA_TF32_OVERRIDE": "0", "PYTORCH_CUDA_ALLOC_CONF": "nope:1",
                                       "CUDA_VISIBLE_DEVICES": "0", "HOME": "/nonexistent"})
    outcome = advice_environment(ctx)
    assert outcome.status == "warn"
    assert set(outcome.signatures) == {"advice_env_override", "advice_env_refused"}
    assert "NVIDIA_TF32_OVERRIDE=0: turns TF32 off" in outcome.evidence
    assert "PYTORCH_CUDA_ALLOC_CONF=nope:1: refused by the stack: unknown option 'nope'" in outcome.evidence
    assert "CUDA_VISIBLE_DEVICES=0: limits and orders" in outcome.evidence  # noted, not a warning of its own
