"""Today's dtype mismatches (issue 32): what torch 2.13 itself raises for float32 / bfloat16 / float16 / float8
(e4m3fn, e5m2, fnuz) operands that do not agree, produced here by running the ops on the CPU, goes to the AMP /
numerics playbook with the fix for that mismatch first; a convolution whose input and weight differ by device, not
dtype, stays a device mismatch."""

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from cudaweb.playbooks.matcher import triage  # noqa: E402

F8, F8B = torch.float8_e4m3fn, torch.float8_e5m2
A = torch.randn(4, 4)
MIXED, FLOAT8, ATTENTION, INDEXED = "Mixed dtypes", "float8 is a storage format", "Attention / RNN", "Indexed writes"
CASES = {
    "mm float32 @ bfloat16": (lambda: A @ A.bfloat16(), MIXED),
    "mm float16 @ bfloat16": (lambda: A.half() @ A.bfloat16(), MIXED),
    "addmm": (lambda: torch.addmm(A, A.bfloat16(), A.bfloat16()), MIXED),
    "nn.Linear on bfloat16 input": (lambda: torch.nn.Linear(4, 4)(A.bfloat16()), MIXED),
    "baddbmm": (lambda: torch.baddbmm(A[None], A.half()[None], A.half()[None]), MIXED),
    "bmm": (lambda: torch.bmm(A[None], A.bfloat16()[None]), MIXED),
    "conv bias": (lambda: F.conv2d(torch.randn(1, 1, 4, 4).bfloat16(), torch.randn(1, 1, 3, 3).bfloat16(),
                                   torch.randn(1)), MIXED),
    "nn.Conv2d on float16 input": (lambda: torch.nn.Conv2d(1, 1, 3)(torch.randn(1, 1, 4, 4).half()), MIXED),
    "conv weight": (lambda: F.conv2d(torch.randn(1, 1, 4, 4).bfloat16(), torch.randn(1, 1, 3, 3)), MIXED),
    "mm float8_e4m3fn @ float32": (lambda: torch.mm(A.to(F8), A), FLOAT8),
    "mm float8_e4m3fn @ float8_e5m2": (lambda: torch.mm(A.to(F8), A.to(F8B)), FLOAT8),
    "nn.Linear on float8 input": (lambda: torch.nn.Linear(4, 4)(A.to(F8)), FLOAT8),
    "float8 promoted in cat": (lambda: torch.cat([A.to(F8), A]), FLOAT8),
    "float8 add": (lambda: A.to(F8) + A.to(F8), FLOAT8),
    "float8_e5m2 mul": (lambda: A.to(F8B) * 2, FLOAT8),
    "fnuz with float32": (lambda: torch.cat([A.to(torch.float8_e4m3fnuz), A]), FLOAT8),
    "_scaled_mm of float32": (lambda: torch._scaled_mm(A, A.t(), scale_a=torch.tensor(1.), scale_b=torch.tensor(1.)),
                              FLOAT8),
    "sdpa": (lambda: F.scaled_dot_product_attention(A[None, None], A.bfloat16()[None, None],
                                                    A.bfloat16()[None, None]), ATTENTION),
    "lstm": (lambda: torch.nn.LSTM(4, 4)(A.bfloat16()[None]), ATTENTION),
    "index_put_": (lambda: A.index_put_((torch.tensor([0]),), A.bfloat16()[0]), INDEXED),
}


def _message(op):
    try:
        op()
    except (RuntimeError, ValueError, NotImplementedError) as exc:
        return "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0])
    pytest.fail("the op ran: no message to triage")


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_dtype_mismatch_of_todays_torch_goes_to_amp_numerics_with_its_fix_first(name):
    op, fix = CASES[name]
    message = _message(op)
    found = triage("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n" + message)
    if "Invalid scaling configuration" in message:
        # torch 2.13's CPU kernel on some CPUs (an AMD EPYC here; CI's named the dtype) checks _scaled_mm's scales
        # before its operands' dtypes: the text names no dtype, so it is read as the recorded GPU text of the same
        # refusal is (holdout-gpu-e's scaled_mm_rowwise_scales_one_dimensional: cublas_cudnn)
        assert found.playbooks[0].playbook.id == "cublas_cudnn", message
        return
    first = found.playbooks[0]
    assert first.playbook.id == "amp_numerics" and first.confident, (message, [
        (m.playbook.id, m.score) for m in found.playbooks])
    assert first.fixes[0].startswith(fix), (message, first.fixes[0])


def test_a_convolution_across_devices_stays_a_device_mismatch_and_one_across_dtypes_on_the_gpu_does_not():
    across = "RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same"
    assert triage(across).playbooks[0].playbook.id == "device_mismatch"
    dtype = ("RuntimeError: Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be "
             "the same")
    assert triage(dtype).playbooks[0].playbook.id == "amp_numerics"
