"""Kept texts (labelled examples, corpora, playbooks, knowledge tables) hold no path of a development machine, and
triage gives one answer for a text whatever its line endings (the triage page submits CRLF)."""

import re
from pathlib import Path

import pytest

from cudaweb.playbooks import matcher

REPO = Path(__file__).resolve().parent.parent.parent
KEPT = [*sorted((REPO / "cudaweb" / "playbooks").rglob("*.yaml")),
        *sorted((REPO / "cudaweb" / "playbooks").rglob("*.jsonl")),
        *sorted((REPO / "tests" / "data").rglob("*.jsonl")),
        *sorted((REPO / "bench" / "faults" / "results").glob("*.jsonl"))]  # what the GPU corpus was built from
# A checkout of this project on a development machine: /work/main/..., a .dev-NN work tree, its .venv.
DEVELOPMENT_PATH = re.compile(r"\.dev-\d+|/work/main\b")


def test_the_kept_texts_are_found():
    names = {path.name for path in KEPT}
    assert {"examples.jsonl", "triage_gpu_corpus.jsonl", "oom.yaml", "gpu_faults-2026-12-01.jsonl"} <= names


@pytest.mark.parametrize("path", KEPT, ids=lambda path: str(path.relative_to(REPO)))
def test_a_kept_text_holds_no_development_machine_path(path):
    found = [(number, match.group(0)) for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for match in DEVELOPMENT_PATH.finditer(line)]
    assert found == []


TEXT = ("Traceback (most recent call last):\n  File \"/opt/job/train.py\", line 12, in <module>\n"
        "    x = torch.empty(1 << 40, device=\"cuda\")\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1024.00 GiB. GPU 0 has a total capacity of "
        "79.19 GiB of which 78.50 GiB is free.\n")


def _answer(result):
    return ([(m.playbook.id, round(m.score, 6), m.basis, [str(line) for line in m.evidence]) for m in result.playbooks],
            result.facts, result.oom_kinds)


@pytest.mark.parametrize("text", [TEXT, "NCCL WARN Net : Connection closed by remote peer\nsomething else\n",
                                  "nothing a playbook knows\nbut two lines of it\n"])
def test_crlf_and_lf_line_endings_give_the_same_triage(text):
    assert _answer(matcher.triage(text.replace("\n", "\r\n"))) == _answer(matcher.triage(text))
    assert _answer(matcher.triage(text.replace("\n", "\r\n").encode())) == _answer(matcher.triage(text))
