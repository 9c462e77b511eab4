"""What drift looks at: the headline metrics of a report (worst GPU), their direction and default
thresholds, and the software inventory keys whose change is drift by itself."""

import math
from dataclasses import dataclass

HIGHER, LOWER = "higher", "lower"  # which way is better


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    better: str
    threshold_pct: float  # default: a change this much worse than the baseline is drift


METRICS = {m.name: m for m in (
    Metric("matmul_bf16_tflops", "bf16 matmul", "TFLOP/s", HIGHER, 10),
    Metric("matmul_fp16_tflops", "fp16 matmul", "TFLOP/s", HIGHER, 10),
    Metric("matmul_tf32_tflops", "TF32 matmul", "TFLOP/s", HIGHER, 10),
    Metric("matmul_fp32_tflops", "fp32 matmul", "TFLOP/s", HIGHER, 10),
    Metric("h2d_pinned_gbs", "H2D pinned", "GB/s", HIGHER, 10),
    Metric("d2h_pinned_gbs", "D2H pinned", "GB/s", HIGHER, 10),
    Metric("p2p_copy_gbs", "P2P copy", "GB/s", HIGHER, 10),
    Metric("nccl_busbw_gbs", "NCCL busbw (largest)", "GB/s", HIGHER, 10),
    Metric("resnet18_amp_bf16_img_s", "ResNet-18 AMP bf16", "img/s", HIGHER, 10),
    Metric("resnet18_amp_fp16_img_s", "ResNet-18 AMP fp16", "img/s", HIGHER, 10),
    Metric("ddp_amp_bf16_img_s", "DDP AMP bf16 total", "img/s", HIGHER, 10),
    Metric("ddp_scaling", "DDP scaling", "", HIGHER, 5),
    Metric("gloo_4mib_ms", "gloo all-reduce 4 MiB", "ms", LOWER, 50),
    Metric("context_s", "CUDA context creation", "s", LOWER, 100),
    Metric("max_temperature_c", "hottest GPU", "C", LOWER, 25),
    Metric("nvlink_errors_total", "NVLink error counters", "", LOWER, 0),
    Metric("ib_errors_total", "InfiniBand port error counters", "", LOWER, 0),
    Metric("pcie_aer_errors_total", "PCIe AER error counters", "", LOWER, 0),
)}
SOFTWARE_KEYS = ("driver_version", "cuda_driver_version", "torch", "torch_cuda", "cudnn", "nccl", "gpu_count",
                 "gpu_model", "vbios", "kernel")
LAYERS = ("L0", "L1", "L2", "L3", "L4", "L5", "L6", "L7")  # L7: burn-in mode's stress layer
STATUS_RANK = {"fail": 4, "error": 4, "warn": 3, "pass": 2, "skip": 1}


def headline_metrics(checks):
    """The catalogue's metrics from a report's checks (each check names its worst GPU under the bare key)."""
    found = {}
    for check in checks:
        for key, value in (check.get("metrics") or {}).items():
            if key in METRICS and finite(value):
                found[key] = value
    return found


def layer_status(checks):
    """Worst status per layer L0-L7 (fail > warn > pass > skip); a layer with no check is absent."""
    worst = {}
    for check in checks:
        layer = check.get("layer")
        if layer in LAYERS and STATUS_RANK.get(check["status"], 0) > STATUS_RANK.get(worst.get(layer), 0):
            worst[layer] = "fail" if check["status"] == "error" else check["status"]
    return worst


def software(inventory):
    return {key: str(inventory[key]) for key in SOFTWARE_KEYS if inventory.get(key) not in (None, "")}


def finite(value):
    """A figure arithmetic survives (reports are checked at the door, cudaweb.validation.reports; older rows and
    peer bands are not): a number, not a bool, finite as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer beyond a float
        return False


def delta_pct(old, new):
    """The change from `old` to `new` in percent; None where there is none to give (no old figure, or one that would
    make the result infinite: PostgreSQL's jsonb refuses Infinity)."""
    if not old or not finite(old) or not finite(new):
        return None
    try:
        change = 100.0 * (float(new) - float(old)) / abs(float(old))
    except (OverflowError, ZeroDivisionError):
        return None
    return round(change, 2) if math.isfinite(change) else None


def worse_by(metric, old, new):
    """How many percent worse `new` is than `old` for this metric's direction (negative: better)."""
    change = delta_pct(old, new)
    if change is None:
        return None
    return -change if metric.better == HIGHER else change
