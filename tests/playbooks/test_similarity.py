"""The similarity fallback's terms: what every text prints whatever its cause gives none."""

from cudaweb.playbooks import similarity

CUDA_TAIL = ("CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might "
             "be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
             "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
TORCHRUN_SUMMARY = """============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_11:45:44
  host      : node-7
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 4540)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_lines_printed_whatever_the_cause_give_no_terms():
    assert similarity.terms(CUDA_TAIL) == []
    assert set(similarity.terms(TORCHRUN_SUMMARY)) == {"train", "failed", "failures"}  # its name and verdict


def test_the_message_beside_them_keeps_its_terms():
    text = "torch.AcceleratorError: CUDA error: invalid resource handle\n" + CUDA_TAIL + TORCHRUN_SUMMARY
    found = set(similarity.terms(text))
    assert {"invalid", "resource", "handle", "acceleratorerror"} <= found
    assert not found & {"asynchronously", "debugging", "launch_blocking", "traceback", "exitcode", "elastic"}
