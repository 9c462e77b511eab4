"""Per-GPU series on /metrics in dcgm-exporter's shape, so that a Grafana board built on DCGM_FI_* can join them on
`UUID` (or `Hostname` and `gpu`): labels gpu, UUID, device, modelName, Hostname as dcgm-exporter names them, plus
our `node`. promtool's one finding on them is dcgm-exporter's own: `modelName` is not snake_case; we keep the name,
as the join is the point (tests/api/test_gpu_metrics.py allows that finding and no other).

What the node's report says is only taken for its own GPUs (cudaweb.validation.gpus.node_gpus): `Hostname` is the
node's name in our records, not the host's word (dcgm-exporter's is the host's name, or its Kubernetes node name,
which the node's name in the dashboard usually is; the joins the README shows are on UUID alone); a GPU whose UUID is
not of NVIDIA's form has no series; a UUID that more than one node lists has none under any of them (who listed it
first proves nothing: a stale listing or a host claiming another's GPUs), counted in cudaweb_gpu_uuid_conflicts and
shown on those nodes' pages. Two series with one UUID would also make the README's `on (UUID)` joins fail outright.

Figures are the node's last run's (absent where that run did not measure them: a quick run has no ResNet figure),
read in three queries whatever the size of the fleet. Cardinality: one series per GPU and figure; the health
series' `signature` takes one value per GPU at a time, from a closed set (the signatures the playbook library
names, "other" for any other, "" when healthy), so a host can not mint label values."""

from prometheus_client.core import GaugeMetricFamily

from cudaweb.nodes.models import Node
from cudaweb.playbooks.library import load as playbooks
from cudaweb.validation.gpus import node_gpus, runs_gpus, uuid_conflicts

LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "node")
GB = 1e9
# (series, help, Gpu.figures key, scale): base units where Prometheus has one (bytes, not gigabytes).
SERIES = (
    ("cudaweb_gpu_matmul_bf16_tflops", "bf16 matmul of the GPU (TFLOP/s), last run", "matmul_bf16_tflops", 1),
    ("cudaweb_gpu_h2d_pinned_bytes_per_second", "pinned host-to-device copy, last run", "h2d_pinned_gbs", GB),
    ("cudaweb_gpu_d2h_pinned_bytes_per_second", "pinned device-to-host copy, last run", "d2h_pinned_gbs", GB),
    ("cudaweb_gpu_memory_copy_bytes_per_second", "device-memory copy, read + write, last run", "memory_copy_gbs",
     GB),
    ("cudaweb_gpu_resnet18_images_per_second", "ResNet-18 training, AMP bf16 (images/s), last run",
     "resnet18_amp_bf16_img_s", 1),
    ("cudaweb_gpu_temperature_celsius", "GPU temperature at the last run", "temperature_c", 1),
    ("cudaweb_gpu_power_watts", "GPU power draw at the last run", "power_w", 1),
)
OTHER = "other"


def known_signatures():
    """The closed set the health series' signature label is drawn from."""
    return frozenset().union(*(book.signatures for book in playbooks().values()))


def signature_label(signature, known):
    if not signature:
        return ""
    return signature if signature in known else OTHER


class GpuCollector:
    """prometheus_client calls collect() per scrape."""

    def collect(self):
        families = [(GaugeMetricFamily(name, text, labels=LABELS), key, scale) for name, text, key, scale in SERIES]
        health = GaugeMetricFamily("cudaweb_gpu_health", "1 when no failing check of the node's last run holds "
                                   "against the GPU (a failure naming no GPU holds against all); signature: the "
                                   "lowest such check's, from the playbooks' closed set, else other",
                                   labels=LABELS + ("signature",))
        conflicted = GaugeMetricFamily("cudaweb_gpu_uuid_conflicts", "GPU UUIDs that more than one node's last run "
                                       "lists (or one run twice): none of them has a per-GPU series")
        rows = list(Node.objects.exclude(last_run=None).order_by("name").values_list(
            "name", "last_run_id", "visible_devices"))
        gpus = runs_gpus(run_ids=[run_id for _, run_id, _ in rows])
        own = {name: node_gpus(gpus.get(run_id, ()), visible_devices) for name, run_id, visible_devices in rows}
        conflicts = uuid_conflicts([(name, gpu.uuid) for name, listed in own.items() for gpu in listed])
        conflicted.add_metric([], len(conflicts))
        known = known_signatures()
        for name, listed in own.items():
            for gpu in listed:
                if gpu.uuid.lower() in conflicts:
                    continue
                labels = [str(gpu.index), gpu.uuid, "nvidia%d" % gpu.index, gpu.model, name, name]
                for family, key, scale in families:
                    if key in gpu.figures:
                        family.add_metric(labels, gpu.figures[key] * scale)
                signature = "" if gpu.healthy else signature_label(gpu.failing[0], known) or OTHER
                health.add_metric(labels + [signature], 1.0 if gpu.healthy else 0.0)
        for family, _, _ in families:
            yield family
        yield health
        yield conflicted
