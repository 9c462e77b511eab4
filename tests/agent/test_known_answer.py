"""stress.consistency has a known answer (stress.known_answer): integer matmuls whose exact product the CPU computes
in int64. A GPU that gives the same wrong answer every time (repetitions agree, and a one-GPU host has no sibling
to differ from) fails on its own.

The GPU is a stand-in: the real CPU torch behind a `torch` package that maps the worker's CUDA device onto the CPU,
and, asked to, adds 1 to one element of every fp32 matmul result the way a broken multiplier would, every time
alike. The task runs in a real `worker --serve` started by the agent's own children.Pool, and its result is judged
by the check's own judge_consistency."""

import pytest

from agents.cudaprobe import children, engine
from agents.cudaprobe.checks import stress
from agents.cudaprobe.registry import task_name

STAND_IN = '''
import os, sys, types, importlib
_here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules["torch"]
torch = importlib.import_module("torch")  # the real CPU build; it takes this name's place in sys.modules

def _cpu(device):
    return "cpu" if isinstance(device, int) or "cuda" in str(device) else device

_to = torch.Tensor.to
def _tensor_to(self, *args, **kwargs):
    args = tuple(_cpu(a) if isinstance(a, (int, str, torch.device)) and not isinstance(a, bool) else a for a in args)
    if "device" in kwargs:
        kwargs["device"] = _cpu(kwargs["device"])
    return _to(self, *args, **kwargs)
torch.Tensor.to = _tensor_to
_module_to = torch.nn.Module.to
torch.nn.Module.to = lambda self, *args, **kwargs: _module_to(self, *(_cpu(a) for a in args), **kwargs)

if os.environ["LOCAL_RANK"] in os.environ.get("STAND_IN_WRONG_RANKS", "").split(","):
    # this rank's GPU has one multiplier that is always off by one, in every fp32 matmul
    _matmul = torch.matmul

    def _wrong(a, b, *rest, **kw):
        out = _matmul(a, b, *rest, **kw)
        if out.dtype == torch.float32:
            out.view(-1)[out.numel() // 3] += 1
        return out
    torch.matmul = _wrong
    torch.Tensor.__matmul__ = lambda a, b: _wrong(a, b)

torch.cuda.set_device = lambda index: None
torch.cuda.get_device_name = lambda index=None: "NVIDIA H200"
torch.cuda.get_device_properties = lambda index: types.SimpleNamespace(name="NVIDIA H200", multi_processor_count=132,
                                                                       total_memory=141 * 2**30, uuid="")
torch.cuda.is_initialized = lambda: False
'''
ARGS = {"n": 64, "repeats": 2, "known_n": 64, "known_k": 512}


@pytest.fixture
def stand_in(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(STAND_IN)
    return tmp_path


def _consistency(stand_in, gpus, wrong_on=()):
    """gpu_consistency on `gpus` ranks at once, as the check runs it; the ranks in `wrong_on` multiply wrongly."""
    env = {"PYTHONPATH": str(stand_in), "CUDAPROBE_BYTECODE_CACHE": "off",
           "STAND_IN_WRONG_RANKS": ",".join(map(str, wrong_on))}
    pool = children.Pool(engine.Context("burnin", environ=env))
    try:
        outcomes = pool.call(stress.gpu_consistency, dict(ARGS), list(range(gpus)), 120)
    finally:
        pool.remove()
    assert all(o.ok for o in outcomes), [o.evidence() for o in outcomes]
    return [entry for o in outcomes for entry in o.result["gpus"]]


def test_a_healthy_gpu_gives_the_exact_answer_bit_for_bit(stand_in):
    (gpu,) = _consistency(stand_in, 1)
    assert set(gpu["known_answer"]) == {"matmul_int_fp32", "matmul_int_tf32"}
    assert all(run["wrong"] == 0 for runs in gpu["known_answer"].values() for run in runs)
    outcome = stress.judge_consistency([gpu])
    assert outcome.status == "pass", outcome.summary
    assert "2 integer matmuls equal to their exact answer, bit for bit" in outcome.summary


def test_a_deterministic_wrong_answer_fails_on_a_one_gpu_host(stand_in):
    (gpu,) = _consistency(stand_in, 1, wrong_on={0})
    # the same wrong bits every time: the repetitions alone see nothing
    assert all(len(set(digests)) == 1 for digests in gpu["digests"].values())
    outcome = stress.judge_consistency([gpu])
    assert outcome.status == "fail" and "silent_data_corruption" in outcome.signatures
    assert "GPU 0: matmul_int_fp32 gave a wrong answer in 2 of 2 runs (1 element(s) differ" in outcome.summary
    first = gpu["known_answer"]["matmul_int_fp32"][0]["first"]
    assert first["found"] == first["expected"] + 1 and first["row"] * 64 + first["col"] == 64 * 64 // 3


def test_the_gpu_with_the_wrong_answer_is_the_one_named(stand_in):
    gpus = _consistency(stand_in, 2, wrong_on={1})
    outcome = stress.judge_consistency(gpus)
    assert outcome.status == "fail"
    assert "GPU 1: matmul_int_fp32 gave a wrong answer" in outcome.summary
    assert "GPU 0: matmul_int" not in outcome.summary


def test_the_operands_keep_every_partial_sum_exact_in_fp32():
    # the bound the known answer rests on: |a*b| summed over K stays below 2^24 (fp32's exact integers)
    assert stress.KNOWN_RANGE ** 2 * stress.KNOWN_K < 2 ** 24 and stress.KNOWN_RANGE < 2 ** 11  # TF32's too


def test_a_result_from_before_the_known_answer_says_so():
    old = {"index": 0, "name": "NVIDIA H200", "sm_count": 132, "digests": {"matmul_fp32": ["a", "a"]}}
    outcome = stress.judge_consistency([old])
    assert outcome.status == "pass" and "no known-answer computation on GPU 0" in outcome.summary


def test_the_task_is_the_one_the_check_sends():
    assert task_name(stress.gpu_consistency) == "agents.cudaprobe.checks.stress:gpu_consistency"
