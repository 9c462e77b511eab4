"""The sources of the messages, not samples of them (issue 23): every canonical error string of CUDA, cuBLAS, cuDNN,
cuFFT, cuSOLVER, cuRAND, NCCL and PyTorch that the catalogue (cudaweb/playbooks/catalogue.yaml) or the
CUDA knowledge tables map to a playbook is ranked first by the real matcher, bare, in torch's printed forms and
inside a traceback. The catalogue's texts are also documents of the similarity fallback (similarity.py).
"""

import pytest
import yaml

from cudaweb.playbooks import knowledge, similarity
from cudaweb.playbooks.library import CATEGORIES
from cudaweb.playbooks.matcher import CONFIDENT, triage

from .test_gpu_corpus import REPO

CATALOGUE = yaml.safe_load(similarity.CATALOGUE_PATH.read_text(encoding="utf-8"))
CUDA_TABLES = ("cuda_runtime", "cuda_driver")
# How torch 2.x prints a cudaError_t (c10/cuda/CUDAException.cpp) and a CUresult (CUDAHooks, cupy), and NCCL's
# CUDACHECK (src/include/checks.h) inside the DistBackendError torch raises for ncclUnhandledCudaError.
CUDA_FORMS = (
    "RuntimeError: CUDA error: {message}",
    "torch.AcceleratorError: CUDA error: {message}\nCUDA kernel errors might be asynchronously reported at some other "
    "API call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
    "RuntimeError: CUDA driver error: {message}",
    "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure '{message}'",
    "{name}",
)
TRACEBACK = (
    "[rank3]: Traceback (most recent call last):\n"
    '[rank3]:   File "/home/user/project/train.py", line 218, in <module>\n'
    "[rank3]:     main(args)\n"
    '[rank3]:   File "/home/user/project/train.py", line 171, in main\n'
    "[rank3]:     loss = model(batch).sum()\n"
    "[rank3]:            ^^^^^^^^^^^^^\n"
    "{text}\n"
    "W1201 10:12:13.456000 4242 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 4243 closing "
    "signal SIGTERM\n"
)


def _first(text):
    found = triage(text).playbooks
    return (found[0].playbook.category, found[0].score, found[0].confident) if found else (None, 0.0, False)


def _cuda_strings():
    """(table, name, message, category) of every CUDA runtime and driver error the tables map to a playbook."""
    for table in knowledge.load().tables:
        if table.name in CUDA_TABLES:
            for entry in table.entries:
                if entry.category:
                    for message in entry.messages:
                        yield table.name, entry.name, message, entry.category


def test_the_catalogue_names_real_categories_and_sources():
    assert len(CATALOGUE) >= 150
    assert {row["category"] for row in CATALOGUE} >= set(CATEGORIES) - {"fabric"}  # fabric: the agent's checks
    for row in CATALOGUE:
        assert row["category"] in CATEGORIES, row
        assert row["source"].startswith("https://"), row
        assert row["text"].strip(), row
    assert len({row["text"] for row in CATALOGUE}) == len(CATALOGUE)


@pytest.mark.parametrize("row", CATALOGUE, ids=lambda row: row["text"][:60])
def test_each_canonical_text_ranks_its_playbook_first_confidently(row):
    for text in (row["text"], TRACEBACK.format(text="[rank3]: " + row["text"].replace("\n", "\n[rank3]: "))):
        category, score, confident = _first(text)
        assert category == row["category"] and confident == row.get("confident", True), (category, score, text)


def test_every_mapped_cuda_string_in_every_printed_form_ranks_its_playbook_first():
    strings = list(_cuda_strings())
    assert len(strings) >= 70  # the tables map most of cudaError_t and CUresult; a table that lost them fails here
    wrong = []
    for table, name, message, category in strings:
        for form in CUDA_FORMS:
            for text in (form.format(message=message, name=name), TRACEBACK.format(text=form.format(
                    message=message, name=name))):
                first, score, confident = _first(text)
                if first != category or not confident:
                    wrong.append((table, name, form[:24], first, round(score, 2)))
    assert not wrong, wrong


def test_a_cuda_string_no_playbook_owns_is_never_a_confident_answer():
    """cudaErrorInvalidValue ("invalid argument"), the stream-capture errors and the like say nothing an operator
    can act on alone: the matcher may rank near misses, never a confident playbook."""
    unowned = [(entry.name, message) for table in knowledge.load().tables if table.name in CUDA_TABLES
               for entry in table.entries if not entry.category and len(entry.messages[0]) >= knowledge.MIN_MESSAGE
               for message in entry.messages]
    assert len(unowned) >= 30
    for name, message in unowned:
        category, score, _ = _first("RuntimeError: CUDA error: %s" % message)
        assert score < CONFIDENT or message in OWNED_BY_A_PATTERN, (name, message, category, score)


OWNED_BY_A_PATTERN = {"device kernel image is invalid"}  # cudaErrorInvalidSource shares cudaErrorInvalidKernelImage's
