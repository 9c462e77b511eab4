"""Error codes as knowledge (issue 32): every value of cudaError_t and CUresult (CUDA 12.9 and 13.0), ncclResult_t
(NCCL 2.32.3) and nvmlReturn_t (nvidia-ml-py 13.615.71), as the published headers enumerate them
(knowledge/headers/codes.yaml, written by bench/code_headers.py), and every Xid of nverror.h, is in its knowledge
table with its number and meaning, and every code, and every Xid of NVIDIA's catalogue, names the playbook an operator
opens first. A text that
prints a code is judged by the code's meaning: system-not-ready goes to fabric, MPS to compute_mode_busy."""

import pytest
import yaml

from cudaweb.playbooks import knowledge
from cudaweb.playbooks.library import load
from cudaweb.playbooks.matcher import triage

CODES = yaml.safe_load((knowledge.KNOWLEDGE_DIR / "headers" / "codes.yaml").read_text(encoding="utf-8"))
TABLES = {t.name: t for t in knowledge.load().tables}
SUCCESS = {"cudaSuccess", "CUDA_SUCCESS", "ncclSuccess", "NVML_SUCCESS"}


def test_the_enumerations_are_those_of_the_headers_and_their_versions():
    found = {(c["table"], c["version"]): len(c["codes"]) for c in CODES}
    assert found == {("cuda_runtime", "CUDA 13.0"): 133, ("cuda_driver", "CUDA 13.0"): 101,
                     ("cuda_runtime", "CUDA 12.9"): 133, ("cuda_driver", "CUDA 12.9"): 100,
                     ("nccl", "NCCL 2.32.3"): 9, ("nvml", "nvidia-ml-py 13.615.71"): 32,
                     ("xid", "open-gpu-kernel-modules 0b7b804"): 71}


@pytest.mark.parametrize("enumeration", CODES, ids=lambda c: "%s %s" % (c["enum"], c["version"]))
def test_every_code_of_every_header_is_in_its_table_with_its_number_and_meaning(enumeration):
    if enumeration["table"] == "xid":  # nverror.h names some Xids by aliases (13, 63, 64): the number is the code
        numbers = {e.number: e for e in TABLES["xid"].entries}
        assert sorted(set(enumeration["codes"].values()) - set(numbers)) == []
        assert all(numbers[n].meaning and numbers[n].source.startswith("https://")
                   for n in enumeration["codes"].values())
        return
    entries = {e.name: e for e in TABLES[enumeration["table"]].entries}
    missing = sorted(name for name in enumeration["codes"] if name not in entries)
    assert missing == []
    wrong = sorted(name for name, value in enumeration["codes"].items() if entries[name].number != value)
    assert wrong == []
    assert all(entries[name].meaning and entries[name].source.startswith("https://") for name in enumeration["codes"])


@pytest.mark.parametrize("table", ["cuda_runtime", "cuda_driver", "nccl", "nvml", "xid"])
def test_every_code_and_every_xid_names_the_playbook_an_operator_opens_first(table):
    books = set(load())
    unmapped = [e.name for e in TABLES[table].entries if e.name not in SUCCESS and e.opens not in books]
    assert unmapped == []


@pytest.mark.parametrize("name, playbook", [
    ("cudaErrorSystemNotReady", "fabric"), ("CUDA_ERROR_SYSTEM_NOT_READY", "fabric"),
    ("cudaErrorMpsServerNotReady", "compute_mode_busy"), ("CUDA_ERROR_MPS_CONNECTION_FAILED", "compute_mode_busy"),
    ("cudaErrorMpsClientTerminated", "compute_mode_busy"), ("cudaErrorDevicesUnavailable", "compute_mode_busy"),
    ("cudaErrorECCUncorrectable", "gpu_hardware"), ("NVML_ERROR_RESET_REQUIRED", "gpu_hardware"),
    ("NVML_ERROR_GPU_IS_LOST", "gpu_hardware"), ("cudaErrorSystemDriverMismatch", "driver_runtime_mismatch"),
])
def test_the_codes_an_operator_meets_open_the_playbook_their_meaning_names(name, playbook):
    entry = next(e for t in TABLES.values() for e in t.entries if e.name == name)
    assert entry.opens == playbook


@pytest.mark.parametrize("text, playbook", [
    ("RuntimeError: CUDA error: system not yet initialized", "fabric"),
    ("UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions "
     "before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized",
     "fabric"),
    ("cuInit failed: CUDA_ERROR_SYSTEM_NOT_READY", "fabric"),
    ("RuntimeError: CUDA error: MPS client failed to connect to the MPS control daemon or the MPS server",
     "compute_mode_busy"),
    ("cudaErrorMpsServerNotReady", "compute_mode_busy"),
])
def test_a_text_that_prints_a_code_is_judged_by_the_codes_meaning(text, playbook):
    found = triage(text).playbooks
    assert found and found[0].playbook.id == playbook and found[0].confident, [
        (m.playbook.id, m.score) for m in found]


def test_every_nvml_code_as_pynvml_raises_it_names_its_code():
    """pynvml's exception classes (NVMLError_ResetRequired, ...) are the names a Python traceback prints."""
    pynvml = pytest.importorskip("pynvml")
    table = {e.number: e for e in TABLES["nvml"].entries if e.number is not None}
    for number, cls in pynvml.NVMLError._valClassMapping.items():
        entry = table[number]
        assert cls.__name__ in entry.aliases, (number, cls.__name__)
        hits = knowledge.load().hits("pynvml.%s: %s" % (cls.__name__, entry.messages[0] if entry.messages else ""))
        assert any(h.entry.name == entry.name and h.how == "name" for h in hits) or not entry.category, cls.__name__


def test_a_gpu_that_asks_for_a_reset_through_pynvml_opens_gpu_hardware():
    found = triage("pynvml.NVMLError_ResetRequired: GPU requires reset").playbooks
    assert found[0].playbook.id == "gpu_hardware" and found[0].confident
