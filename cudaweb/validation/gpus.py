"""Each GPU of a run, read from its stored checks: index, UUID and model (the `nvidia-smi -L` lines driver.nvidia_smi
keeps as evidence, NVIDIA's documented format), the figures the agent measured on it (metrics named
`<metric>.gpu<index>`), and whether a failing check of the run holds against it (for /metrics' per-GPU series).

Reads many runs in two queries whatever their number.

A node speaks only for its own GPUs: `node_gpus` keeps those that are the node's (nvidia-smi lists the whole host,
where the node is some of its GPUs) and whose UUID has NVIDIA's form; `uuid_conflicts` finds a UUID more than one
node lists (a host claiming another's GPUs, or a stale listing), which no per-GPU series may then carry."""

import re
from collections import Counter
from dataclasses import dataclass, field

from django.db.models import F, Q

from cudaweb.common import numbers
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
# Host text: numbers are ASCII digits (\d would take any script's) and read by cudaweb.common.numbers.
GPU_LINE = re.compile(r"^GPU ([0-9]+): (.+?) \(UUID: ([^)\s]+)\)", re.M)  # nvidia-smi -L
# Reports from agents before temperature_c/power_w were metrics: driver.clocks_thermal's evidence lines.
THERMAL_LINE = re.compile(r"^GPU ([0-9]+): temperature\.gpu=(-?[0-9.]+), power\.draw=([0-9.]+) W", re.M)
NAMED_GPU = re.compile(r"\bGPU ([0-9]+)\b")
FIELD_CAP = 128  # a UUID or model name longer than this is not one: cut (host text, and a label value)
# NVIDIA's GPU UUID as nvidia-smi -L and NVML print it. MIG devices are not listed as GPUs there (GPU_LINE), so their
# MIG- UUIDs never come this way.
NVIDIA_UUID = re.compile(r"GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


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
    gpus = {}
    for m in GPU_LINE.finditer(evidence or ""):
        index = numbers.integer(m.group(1))
        if index is not None:
            gpus[index] = Gpu(index=index, model=m.group(2).strip()[:FIELD_CAP], uuid=m.group(3)[:FIELD_CAP])
    return gpus


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
                index = numbers.integer(match.group(1))
                temperature, power = numbers.decimal(match.group(2)), numbers.decimal(match.group(3))
                if index in listed and temperature is not None and power is not None:
                    listed[index].figures.setdefault("temperature_c", temperature)
                    listed[index].figures.setdefault("power_w", power)
    for run_id, checks in failing.items():
        listed = gpus.get(run_id) or {}
        for check in sorted(checks, key=_rank):
            named = {numbers.integer(index) for index in NAMED_GPU.findall(check.summary or "")} & set(listed)
            # A failure that names no GPU of the node (the driver, the host) holds against every GPU.
            for index in named or listed:
                signatures = check.signatures if isinstance(check.signatures, list) else []
                listed[index].failing.append(str(signatures[0]) if signatures else "")
    return {run_id: [listed[index] for index in sorted(listed)] for run_id, listed in gpus.items() if listed}


def _visible(gpus, token):
    """The host's GPU a CUDA_VISIBLE_DEVICES entry names: an index, or a UUID or an unambiguous start of one."""
    if re.fullmatch(r"[0-9]+", token):
        return next((gpu for gpu in gpus if gpu.index == int(token)), None)
    named = [gpu for gpu in gpus if token[:4].upper() == "GPU-" and gpu.uuid.lower().startswith(token.lower())]
    return named[0] if len(named) == 1 else None


def node_gpus(gpus, visible_devices=""):
    """The GPUs of a node's run (runs_gpus) that are the node's own, each with a UUID of NVIDIA's form. Where the
    node is some GPUs of its host (visible_devices), only those: each keeps the host's index and UUID and carries
    what the agent measured under its CUDA index (the n-th visible GPU is the agent's GPU n)."""
    gpus = list(gpus)
    own = gpus
    if visible_devices:
        by_index = {gpu.index: gpu for gpu in gpus}
        own = []
        for cuda_index, token in enumerate(token.strip() for token in visible_devices.split(",")):
            host_gpu, measured = _visible(gpus, token), by_index.get(cuda_index)
            if host_gpu is not None and measured is not None:
                own.append(Gpu(index=host_gpu.index, uuid=host_gpu.uuid, model=host_gpu.model,
                               figures=measured.figures, failing=measured.failing))
    return [gpu for gpu in own if NVIDIA_UUID.fullmatch(gpu.uuid)]


def uuid_conflicts(claims):
    """{UUID in lower case: the claimants} of each UUID listed more than once; `claims` is [(claimant, UUID)]."""
    counts = Counter(uuid.lower() for _, uuid in claims)
    conflicts = {}
    for claimant, uuid in claims:
        if counts[uuid.lower()] > 1:
            conflicts.setdefault(uuid.lower(), []).append(claimant)
    return conflicts


def node_uuid_conflicts(*, node):
    """{UUID: the names of the nodes that list it} for each GPU of the node's last run that another node's last run
    (or the same run, twice) lists too: two queries, none without a run."""
    if not node.last_run_id:
        return {}
    listing = CheckResult.objects.filter(run_id=node.last_run_id, check_id=LISTING).values_list("evidence", flat=True)
    own = node_gpus(_listing(listing.first()).values(), node.visible_devices)
    if not own:
        return {}
    mentions = Q()
    for gpu in own:
        mentions |= Q(evidence__icontains=gpu.uuid)
    # Only other nodes' last runs whose listing names one of these UUIDs at all; node_gpus then says whether it is
    # theirs.
    others = CheckResult.objects.filter(mentions, check_id=LISTING, run__node__last_run_id=F("run_id")).exclude(
        run__node_id=node.id).values_list("run__node__name", "run__node__visible_devices", "evidence")
    claims = [(node.name, gpu.uuid) for gpu in own]
    for name, visible_devices, evidence in others:
        claims += [(name, gpu.uuid) for gpu in node_gpus(_listing(evidence).values(), visible_devices)]
    mine = {gpu.uuid.lower() for gpu in own}
    return {uuid: sorted(set(names)) for uuid, names in uuid_conflicts(claims).items() if uuid in mine}
