"""The fix shown first follows what selected the playbook (issue 29): GPUs hidden by CUDA_VISIBLE_DEVICES are fixed
by the variable, not by `--gpus all`; an OOM whose numbers show fragmentation leads with the fragmentation fix; and
a playbook's counts agree (one fix a cause, one OOM-kind row a cause, no count in its summary that disagrees)."""

import re

import pytest

from cudaweb.playbooks import library
from cudaweb.playbooks.matcher import triage
from cudaweb.playbooks.root_cause import _playbook

FRAGMENTED = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a total capacity of "
              "79.33 GiB of which 1.10 GiB is free. Including non-PyTorch memory, this process has 78.21 GiB memory in "
              "use. Of the allocated memory 75.40 GiB is allocated by PyTorch, and 2.30 GiB is reserved by PyTorch but "
              "unallocated.")
REFUSED = "ValueError: Unrecognized key 'expandable_segment' in CUDA allocator config."


@pytest.mark.parametrize("signature, words", [
    ("gpus_hidden_by_cuda_visible_devices", "CUDA_VISIBLE_DEVICES"),
    ("cuda_visible_devices_empty", "CUDA_VISIBLE_DEVICES"),
    ("nvidia_uvm_missing", "nvidia_uvm"),
    ("dev_nodes_inaccessible", "/dev/nvidia"),
    ("libcuda_missing", "--gpus"),
])
def test_the_first_fix_follows_the_signature_that_selected_device_access(signature, words):
    found = triage("", signatures=[signature], similar=False).playbooks[0]
    assert found.playbook.id == "device_access"
    assert words in found.fixes[0], found.fixes[0]
    cause = _playbook({"summary": "", "evidence": "", "signatures": [signature]})
    assert cause["first_fix"] == found.fixes[0]


def test_an_oom_leads_with_what_its_numbers_show():
    result = triage(FRAGMENTED)
    lead = result.playbooks[0]
    assert lead.playbook.id == "oom" and result.oom_kinds[0]["kind"] == "fragmentation"
    assert lead.fixes[0].startswith("Fragmentation"), lead.fixes[0]
    refused = triage(REFUSED)
    assert refused.oom_kinds[0]["kind"] == "allocator_setting_refused"
    assert "PYTORCH_CUDA_ALLOC_CONF" in refused.playbooks[0].fixes[0], refused.playbooks[0].fixes[0]


def test_the_oom_playbooks_counts_agree():
    book = library.get("oom")
    kinds = triage(FRAGMENTED).oom_kinds
    assert len(book.causes) == len(book.fixes) == len(kinds)
    assert sorted(set(book.fix_for.values())) == list(range(len(book.fixes)))  # each fix answers a named cause


_COUNTS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def test_no_summary_counts_its_causes_or_fixes_wrongly():
    for book in library.load().values():
        for word, kind in re.findall(r"\b(\w+) (causes|fixes)\b", book.summary):
            number = _COUNTS.get(word.lower(), int(word) if word.isdigit() else None)
            if number is not None:
                assert number == len(book.causes if kind == "causes" else book.fixes), (book.id, word, kind)


def test_a_fix_for_names_only_signatures_or_kinds_of_its_playbook_and_real_fixes():
    for book in library.load().values():
        for key, index in book.fix_for.items():
            assert 0 <= index < len(book.fixes), (book.id, key)
