"""A Python without torch is its own finding (torch_missing), not "A CPU-only build of PyTorch"."""

import json
from pathlib import Path

from cudaweb.playbooks import matcher

RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "faults" / "no-torch-in-venv.json"


def test_the_recorded_run_without_torch_is_filed_under_torch_missing():
    report = json.loads(RECORDED.read_text())
    check = next(c for c in report["checks"] if c["id"] == "torch.import")
    assert check["signatures"] == ["torch_missing"]
    first = matcher.triage_check(check).playbooks[0].playbook
    assert first.id == "torch_missing" and first.category == "torch_missing"
    assert "CPU-only" not in first.title


def test_importlibs_message_is_torch_missing_and_a_cpu_wheel_is_still_a_cpu_build():
    text = "Traceback (most recent call last):\n  File \"train.py\", line 1, in <module>\n    import torch\n" \
           "ModuleNotFoundError: No module named 'torch'\n"
    assert matcher.triage(text).playbooks[0].playbook.id == "torch_missing"
    cpu_build = matcher.triage("AssertionError: Torch not compiled with CUDA enabled\n").playbooks[0].playbook
    assert cpu_build.id == "torch_cpu_build"
    other = matcher.triage("ModuleNotFoundError: No module named 'torchvision'\n")
    assert not other.matched  # at most a similar text, never the rule: torch itself imports
