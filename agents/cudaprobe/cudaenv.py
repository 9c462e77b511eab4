"""The CUDA, cuBLAS, cuDNN and PyTorch environment settings that change precision, speed, memory behaviour or which
GPUs are visible: what each does with the value found, whether the stack refuses the value, and which checks'
figures it explains. advice.environment names them all; a check whose figure one explains points to it (point).

Sources: PyTorch, "CUDA Environment Variables" (https://docs.pytorch.org/docs/stable/cuda_environment_variables.html:
PYTORCH_*, TORCH_CUDNN_V8_API_*, TORCH_ALLOW_TF32_CUBLAS_OVERRIDE, CUBLAS_WORKSPACE_CONFIG, CUBLASLT_WORKSPACE_SIZE,
CUDNN_CONV_WSCAP_DBG, CUDNN_ERRATA_JSON_FILE, NVIDIA_TF32_OVERRIDE); PyTorch, "CUDA semantics / Memory management"
(https://docs.pytorch.org/docs/stable/notes/cuda.html, "Optimizing memory usage with PYTORCH_CUDA_ALLOC_CONF": the
allocator's options); CUDA C++ Programming Guide, "CUDA Environment Variables"
(https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-environment-variables: CUDA_VISIBLE_DEVICES,
CUDA_DEVICE_ORDER, CUDA_LAUNCH_BLOCKING, CUDA_DEVICE_MAX_CONNECTIONS, CUDA_MODULE_LOADING, CUDA_CACHE_DISABLE,
CUDA_FORCE_PTX_JIT, CUDA_DISABLE_PTX_JIT, CUDA_MANAGED_FORCE_DEVICE_ALLOC); cuBLAS, "Results reproducibility" and
"cuBLAS logging" (https://docs.nvidia.com/cuda/cublas/: CUBLAS_WORKSPACE_CONFIG, NVIDIA_TF32_OVERRIDE,
CUBLAS_LOGINFO_DBG, CUBLASLT_LOG_LEVEL); cuDNN, "Logging" (https://docs.nvidia.com/deeplearning/cudnn/: CUDNN_LOGINFO_DBG,
CUDNN_LOGLEVEL_DBG); NVIDIA Container Toolkit (NVIDIA_VISIBLE_DEVICES).
"""

import re

from agents.cudaprobe.model import ERROR, FAIL, WARN

MATMUL = ("cuda.matmul", "stress.sustained", "stress.consistency")
TRAINING = ("train.resnet18", "train.ddp")
STARTUP = ("torch.import", "cuda.available", "cuda.context")
ALLOCATION = ("torch.import", "cuda.context", "train.resnet18", "train.ddp", "stress.memory_test")
VISIBILITY = ("host.cuda_visible_devices", "cuda.available")  # not cuda.context: an OOM there is no visibility matter
EVERY_FIGURE = MATMUL + TRAINING + ("cuda.copy_bandwidth", "cuda.memory_bandwidth", "comm.nccl", "cuda.p2p")

# PyTorch's caching-allocator options (c10/cuda/CUDAAllocatorConfig and c10/core/AllocatorConfig): value kinds
ALLOC_OPTIONS = {
    "max_split_size_mb": "size", "max_non_split_rounding_mb": "size", "garbage_collection_threshold": "fraction",
    "roundup_power2_divisions": "divisions", "expandable_segments": "bool", "release_lock_on_cudamalloc": "bool",
    "pinned_use_cuda_host_register": "bool", "pinned_num_register_threads": "int", "pinned_use_background_threads":
    "bool", "backend": ("native", "cudaMallocAsync"), "per_process_memory_fraction": "fraction",
    "graph_capture_record_stream_reuse": "bool", "pinned_reserve_segment_size_mb": "size",
}


def _alloc_conf_refused(value):
    """Why PyTorch refuses this allocator setting when it starts (it stops with an error, or the process dies), or
    None when it parses: comma-separated option:value pairs of known options."""
    for item in re.split(r",(?![^\[]*\])", value):  # commas inside [..] lists belong to the list
        item = item.strip()
        if not item:
            continue
        key, sep, setting = item.partition(":")
        key = key.strip()
        if not sep:
            return "%r has no ':value'" % item
        kind = ALLOC_OPTIONS.get(key)
        setting = setting.strip()
        if kind is None:
            return "unknown option %r (known: %s)" % (key, ", ".join(sorted(ALLOC_OPTIONS)))
        if isinstance(kind, tuple):
            ok = setting in kind
        elif kind == "bool":
            ok = setting in ("True", "False", "true", "false")
        elif kind in ("size", "int"):
            ok = setting.isdigit() and (kind == "int" or int(setting) > 0)
        elif kind == "fraction":
            ok = bool(re.fullmatch(r"0?\.[0-9]+|1(\.0*)?", setting)) and 0.0 < float(setting) <= 1.0
        else:  # roundup_power2_divisions: a power of two, or [<size>:<n>,...] lists
            ok = setting.isdigit() or setting.startswith("[")
        if not ok:
            return "%s:%s is not a valid value for %s" % (key, setting, key)
    return None


def _workspace_refused(value):
    if not re.fullmatch(r"(:[0-9]+:[0-9]+)+", value.strip()):
        return "cuBLAS expects :SIZE_KiB:COUNT pairs (e.g. :4096:8) and ignores %r" % value
    return None


def _one_of(*allowed):
    def refused(value):
        if value.strip() not in allowed:
            return "%r is none of %s: it is ignored" % (value, ", ".join(allowed))
        return None
    return refused


def _when(expected, text):
    """An effect that applies when the value is `expected` (after stripping), else none."""
    return lambda value: text if value.strip() == expected else None


def _always(text):
    return lambda value: text


# name: (kind, effect(value) -> text or None, refused(value) -> reason or None, the checks whose figures it explains)
SETTINGS = {
    "CUDA_VISIBLE_DEVICES": ("visibility", _always("limits and orders the GPUs CUDA and torch see; an entry CUDA "
                                                   "cannot read hides itself and every entry after it"),
                             None, VISIBILITY),
    "CUDA_DEVICE_ORDER": ("visibility", lambda v: None if v.strip() == "PCI_BUS_ID" else
                          "CUDA numbers the GPUs fastest first, not in PCI bus order as nvidia-smi and NVML do",
                          _one_of("FASTEST_FIRST", "PCI_BUS_ID"), VISIBILITY),
    "NVIDIA_VISIBLE_DEVICES": ("visibility", lambda v: "the container runtime mounts no GPU into this container"
                               if v.strip().lower() in ("none", "void", "") else None, None, VISIBILITY),
    "PYTORCH_NVML_BASED_CUDA_CHECK": ("visibility", _when("1", "torch.cuda.is_available asks NVML, not the CUDA "
                                                          "runtime, whether a GPU is there"), None, VISIBILITY),
    "NVIDIA_TF32_OVERRIDE": ("precision", _when("0", "turns TF32 off in cuBLAS and cuDNN whatever the program asks: "
                                                     "TF32 matmuls and convolutions run at fp32 speed"),
                             _one_of("0", "1"), MATMUL + TRAINING),
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": ("precision", _when("1", "forces TF32 for fp32 matmuls whatever "
                                                            "set_float32_matmul_precision says: fp32 results have "
                                                            "TF32 precision"), None, MATMUL),
    "CUBLAS_WORKSPACE_CONFIG": ("speed", _always("fixes cuBLAS's workspace per allocation: small workspaces slow "
                                                 "matmuls; :4096:8 or :16:8 make cuBLAS deterministic"),
                                _workspace_refused, MATMUL + TRAINING),
    "CUBLASLT_WORKSPACE_SIZE": ("speed", _always("sets cuBLASLt's workspace (KiB): a small one slows matmuls"),
                                lambda v: None if v.strip().isdigit() else "%r is not a size in KiB" % v,
                                MATMUL + TRAINING),
    "TORCH_BLAS_PREFER_CUBLASLT": ("speed", _always("changes which BLAS library torch calls for matmuls"), None,
                                   MATMUL),
    "CUDA_LAUNCH_BLOCKING": ("speed", _when("1", "serialises every kernel launch with the host: a debugging aid "
                                                 "that slows everything"), None, EVERY_FIGURE),
    "CUDA_DEVICE_MAX_CONNECTIONS": ("speed", _when("1", "one hardware queue per GPU: communication cannot overlap "
                                                        "computation"), None, ("train.ddp", "comm.nccl")),
    "CUDA_MODULE_LOADING": ("memory", _when("EAGER", "loads every kernel of every library when the context is "
                                                     "created: slower start, more device memory"),
                            _one_of("LAZY", "EAGER"), STARTUP),
    "CUDA_CACHE_DISABLE": ("speed", _when("1", "turns the JIT cache off: PTX is compiled again at every start"),
                           None, STARTUP),
    "CUDA_FORCE_PTX_JIT": ("speed", _when("1", "ignores the compiled kernels and JIT-compiles every one from PTX: "
                                               "slow first launches, and kernels without PTX fail"),
                           None, STARTUP + ("torch.arch",) + TRAINING),
    "CUDA_DISABLE_PTX_JIT": ("speed", _when("1", "kernels with no machine code for this GPU fail instead of being "
                                                 "compiled from PTX"), None, STARTUP + ("torch.arch",)),
    "CUDA_MANAGED_FORCE_DEVICE_ALLOC": ("memory", _when("1", "forces managed memory onto the device"), None,
                                        ALLOCATION),
    "PYTORCH_ALLOC_CONF": ("memory", _always("changes PyTorch's caching allocator"), _alloc_conf_refused,
                           ALLOCATION),
    "PYTORCH_CUDA_ALLOC_CONF": ("memory", _always("changes PyTorch's caching allocator (the older name of "
                                                  "PYTORCH_ALLOC_CONF)"), _alloc_conf_refused, ALLOCATION),
    "PYTORCH_NO_CUDA_MEMORY_CACHING": ("memory", _when("1", "turns PyTorch's caching allocator off: every "
                                                            "allocation goes to the driver"), None,
                                       ALLOCATION + MATMUL + TRAINING),
    "TORCH_CUDNN_V8_API_DISABLED": ("speed", _when("1", "falls back to cuDNN's v7 API (fewer, older convolution "
                                                        "engines)"), None, TRAINING),
    "TORCH_CUDNN_V8_API_LRU_CACHE_LIMIT": ("memory", _always("bounds cuDNN's plan cache (negative: no cache, every "
                                                             "convolution plans again)"), None, TRAINING),
    "CUDNN_CONV_WSCAP_DBG": ("speed", _always("caps cuDNN's convolution workspace (MiB): faster algorithms that "
                                              "need more are not used"), None, TRAINING),
    "CUDNN_ERRATA_JSON_FILE": ("speed", _always("filters cuDNN's engine configurations through an errata file"),
                               None, TRAINING),
    "CUDNN_LOGINFO_DBG": ("speed", _when("1", "logs every cuDNN call (slow)"), None, TRAINING),
    "CUDNN_LOGLEVEL_DBG": ("speed", lambda v: None if v.strip() in ("", "0") else "logs cuDNN calls (slow)", None,
                           TRAINING),
    "CUBLAS_LOGINFO_DBG": ("speed", _when("1", "logs every cuBLAS call (slow)"), None, MATMUL + TRAINING),
    "CUBLASLT_LOG_LEVEL": ("speed", lambda v: None if v.strip() in ("", "0") else "logs cuBLASLt calls (slow)",
                           None, MATMUL + TRAINING),
}
NOTED_ONLY = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PYTORCH_NVML_BASED_CUDA_CHECK")
# What the hardware itself reported or got wrong: no setting explains a bit read back wrong, results that differ
# between repetitions, ECC errors, an Xid or a throttle reason, so a check that found only these names none.
HARDWARE_FINDINGS = frozenset({
    "memory_test_mismatch", "silent_data_corruption", "ecc_uncorrected_under_load", "ecc_corrected_under_load",
    "xid_under_load", "pcie_replay_under_load", "throttle_hw_slowdown", "throttle_thermal", "throttle_power_brake",
})


def settings(environ):
    """The settings of SETTINGS present in `environ` that do something or that the stack refuses:
    [{"name", "value", "kind", "effect", "refused", "explains"}], in the table's order."""
    found = []
    for name, (kind, effect, refused, explains) in SETTINGS.items():
        if name not in environ:
            continue
        value = environ[name]
        why_refused = refused(value) if refused else None
        what = effect(value)
        if what or why_refused:
            found.append({"name": name, "value": value, "kind": kind, "effect": what, "refused": why_refused,
                          "explains": explains})
    return found


def describe(item):
    text = "%s=%s" % (item["name"], item["value"])
    if item["refused"]:
        return "%s: refused by the stack: %s" % (text, item["refused"])
    return "%s: %s" % (text, item["effect"])


def point(check_id, outcome, environ):
    """Name, in a warning or failing check, the settings that explain its figure (or that the stack refuses), unless
    its summary already names them; the evidence keeps the full line."""
    if outcome.status not in (WARN, FAIL, ERROR):
        return outcome
    if outcome.signatures and set(outcome.signatures) <= HARDWARE_FINDINGS:
        return outcome
    causes = [item for item in settings(environ) if check_id in item["explains"]
              and item["name"] not in outcome.summary and (item["refused"] or item["name"] not in NOTED_ONLY
                                                            or outcome.status != WARN)]
    if not causes:
        return outcome
    refused = [c for c in causes if c["refused"]]
    named = refused or causes
    outcome.summary = "%s; %s" % (outcome.summary, "; ".join(
        ("%s=%s is refused (%s)" % (c["name"], c["value"], c["refused"])) if c["refused"] else
        ("set here: %s=%s (%s)" % (c["name"], c["value"], c["effect"])) for c in named))
    outcome.evidence = "\n".join([outcome.evidence or ""] + ["cause named (see advice.environment): " + describe(c)
                                                             for c in causes]).strip()
    if "env_setting_named" not in outcome.signatures:
        outcome.signatures.append("env_setting_refused" if refused else "env_setting_named")
    return outcome
