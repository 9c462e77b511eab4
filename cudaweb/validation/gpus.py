"""Each GPU of a run, read from its stored checks: index, UUID and model (the `nvidia-smi -L` lines driver.nvidia_smi
keeps as evidence, NVIDIA's documented format), the figures the agent measured on it (metrics named
`<metric>.gpu<index>`), and whether a failing check of the run holds against it (for /metrics' per-GPU series).

Reads many runs in two queries whatever their number."""

import re
from dataclasses import dataclass, field

from cudaweb.validation.models import CheckResult
from cudaweb.validation.root_cause import LAYER_ORDER

# (name, check id, metric name before ".gpuN"): the figures of a GPU.
FIGURES = (
    ("matmul_bf16_tflops", "cuda.matmul", "matmul_bf16_tflops"),
    ("h2d_pinned_gbs", "cuda.copy_bandwidth", "h2d_pinned_gbs"),
    ("d2h_pinned_gbs", "cuda.copy_bandwidth", "d2h_pinned_gbs"),
    ("memory_copy_gbs", "cuda.memory_bandwidth", "memory_copy_gbs"),
    ("resnet18_amp_bf16_img_s", "train.resnet18", "resnet18_amp_bf16_img_s"),
    ("temperature_c", "driver.clocks_thermal", "temperature_c"),
    ("power_w", "driver.clocks_thermal", "power_w"),
)
LISTING = "driver.nvidia_smi"
FAILING = ("fail", "error")
GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)\s]+)\)", re.M)  # nvidia-smi -L
# Reports from agents before temperature_c/power_w were metrics: driver.clocks_thermal's evidence lines.
THERMAL_LINE = re.compile(r"^GPU (\d+): temperature\.gpu=(-?[0-9.]+), power\.draw=([0-9.]+) W", re.M)
NAMED_GPU = re.compile(r"\bGPU (\d+)\b")
FIELD_CAP = 128  # a UUID or model name longer than this is not one: cut (host text, and a label value)


@dataclass
class Gpu:
    index: int
    uuid: str
    model: str
    figures: dict = field(default_factory=dict)
    failing: list = field(default_factory=list)  # signatures of the failing checks that hold against it, lowest first

    @property
    def healthy(self):
        return not self.failing


def _listing(evidence):
    return {int(m.group(1)): Gpu(index=int(m.group(1)), model=m.group(2).strip()[:FIELD_CAP],
                                 uuid=m.group(3)[:FIELD_CAP]) for m in GPU_LINE.finditer(evidence or "")}


def _figure(gpus, index, name, value):
    gpu = gpus.get(index)
    if gpu is not None and isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        gpu.figures[name] = float(value)


def _rank(check):
    layers = {layer: i for i, layer in enumerate(LAYER_ORDER)}
    return layers.get(check.layer, len(layers)), check.position


def runs_gpus(*, run_ids):
    """{run id: [Gpu, by index]} for the runs whose driver.nvidia_smi listed GPUs."""
    run_ids = list(run_ids)
    if not run_ids:
        return {}
    gpus = {}
    for check in CheckResult.objects.filter(run_id__in=run_ids, check_id=LISTING).only("run_id", "evidence"):
        gpus[check.run_id] = _listing(check.evidence)
    wanted = {check_id for _, check_id, _ in FIGURES}
    rows = CheckResult.objects.filter(run_id__in=[run_id for run_id, listed in gpus.items() if listed]).filter(
        check_id__in=wanted) | CheckResult.objects.filter(run_id__in=list(gpus), status__in=FAILING)
    failing = {}
    for check in rows.only("run_id", "check_id", "layer", "position", "status", "summary", "metrics", "evidence",
                           "signatures"):
        listed = gpus.get(check.run_id) or {}
        if check.status in FAILING:
            failing.setdefault(check.run_id, []).append(check)
        metrics = check.metrics if isinstance(check.metrics, dict) else {}
        for name, check_id, metric in FIGURES:
            if check.check_id != check_id:
                continue
            for index in listed:
                _figure(listed, index, name, metrics.get("%s.gpu%d" % (metric, index)))
        if check.check_id == "driver.clocks_thermal":
            for match in THERMAL_LINE.finditer(check.evidence or ""):
                index = int(match.group(1))
                if index in listed:
                    listed[index].figures.setdefault("temperature_c", float(match.group(2)))
                    listed[index].figures.setdefault("power_w", float(match.group(3)))
    for run_id, checks in failing.items():
        listed = gpus.get(run_id) or {}
        for check in sorted(checks, key=_rank):
            named = {int(index) for index in NAMED_GPU.findall(check.summary or "")} & set(listed)
            # A failure that names no GPU of the node (the driver, the host) holds against every GPU.
            for index in named or listed:
                signatures = check.signatures if isinstance(check.signatures, list) else []
                listed[index].failing.append(str(signatures[0]) if signatures else "")
    return {run_id: [listed[index] for index in sorted(listed)] for run_id, listed in gpus.items() if listed}
