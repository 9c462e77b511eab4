"""Per-GPU series on /metrics in dcgm-exporter's shape (cudaweb/api/gpu_metrics.py): the labels dcgm-exporter uses,
each GPU's figures from real reports, health with a signature from a closed set, and the whole exposition clean
under Prometheus' own promtool (Debian's prometheus package; `make promtool`)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cudaweb.api.gpu_metrics import OTHER, known_signatures
from cudaweb.nodes.models import Node
from tests.api.conftest import bearer
from tests.api.test_metrics import _samples
from tests.drift.helpers import real_report, scaled, stored_run

pytestmark = pytest.mark.django_db
GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (\S+)\)", re.M)
PROMTOOL = Path(__file__).resolve().parents[2] / "var" / "prometheus" / "usr" / "bin" / "promtool"  # make promtool


def _promtool():
    found = str(PROMTOOL) if PROMTOOL.exists() else shutil.which("promtool")
    assert found, "promtool is missing: `make promtool` unpacks it from Debian's prometheus package"
    return found


def _check(report, check_id):
    return next(c for c in report["checks"] if c["id"] == check_id)


def _gpu_series(samples, name):
    return {dict(labels)["gpu"]: (dict(labels), value) for (n, labels), value in samples.items() if n == name}


@pytest.fixture
def scrape(client, token_for, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # the queue depth is not what these tests are about
    token = token_for("viewer")
    return lambda: client.get("/metrics", **bearer(token))


def test_each_gpu_has_dcgm_exporters_labels_and_its_own_figures(scrape):
    report = real_report("h200-gpus2-full.json")
    stored_run(Node.objects.create(name="gpu-a", transport=Node.Transport.LOCAL), report)
    samples = _samples(scrape())
    listed = {m.group(1): (m.group(2), m.group(3)) for m in GPU_LINE.finditer(
        _check(report, "driver.nvidia_smi")["evidence"])}
    assert len(listed) == 2
    matmul = _gpu_series(samples, "cudaweb_gpu_matmul_bf16_tflops")
    assert set(matmul) == set(listed)
    for gpu, (model, uuid) in listed.items():
        labels, value = matmul[gpu]
        assert labels == {"gpu": gpu, "UUID": uuid, "device": "nvidia%s" % gpu, "modelName": model,
                          "Hostname": report["host"]["hostname"], "node": "gpu-a"}
        assert value == _check(report, "cuda.matmul")["metrics"]["matmul_bf16_tflops.gpu%s" % gpu]
        for series, check_id, metric, scale in (
                ("cudaweb_gpu_h2d_pinned_bytes_per_second", "cuda.copy_bandwidth", "h2d_pinned_gbs", 1e9),
                ("cudaweb_gpu_resnet18_images_per_second", "train.resnet18", "resnet18_amp_bf16_img_s", 1)):
            assert _gpu_series(samples, series)[gpu][1] == pytest.approx(_check(report, check_id)["metrics"][
                "%s.gpu%s" % (metric, gpu)] * scale)
    # This report predates per-GPU temperature metrics: read from the check's evidence lines.
    thermal = dict(re.findall(r"^GPU (\d+): temperature\.gpu=(\d+)", _check(report, "driver.clocks_thermal")[
        "evidence"], re.M))
    assert {gpu: value for gpu, (_, value) in _gpu_series(samples, "cudaweb_gpu_temperature_celsius").items()} == \
        {gpu: float(value) for gpu, value in thermal.items()}
    health = _gpu_series(samples, "cudaweb_gpu_health")
    assert {gpu: (labels["signature"], value) for gpu, (labels, value) in health.items()} == {
        "0": ("", 1.0), "1": ("", 1.0)}
    assert not _gpu_series(samples, "cudaweb_gpu_memory_copy_bytes_per_second")  # a full run without it


def test_memory_bandwidth_and_the_agents_own_temperature_metrics(scrape):
    report = real_report("merged/standard-1.json")
    thermal = _check(report, "driver.clocks_thermal")
    thermal["metrics"].update({"temperature_c.gpu0": 41, "power_w.gpu0": 301.5})  # as agents since issue 31 send
    stored_run(Node.objects.create(name="gpu-b", transport=Node.Transport.LOCAL), report)
    samples = _samples(scrape())
    assert _gpu_series(samples, "cudaweb_gpu_memory_copy_bytes_per_second")["0"][1] == pytest.approx(
        _check(report, "cuda.memory_bandwidth")["metrics"]["memory_copy_gbs.gpu0"] * 1e9)
    assert _gpu_series(samples, "cudaweb_gpu_temperature_celsius")["0"][1] == 41  # the metric before the evidence
    assert _gpu_series(samples, "cudaweb_gpu_power_watts")["0"][1] == 301.5


def _failing(summary, signatures, check_id="driver.gpu_health"):
    report = scaled(real_report("h200-gpus2-full.json"), statuses={check_id: "fail"})
    _check(report, check_id).update(summary=summary, signatures=signatures)
    return report


def test_a_failure_naming_one_gpu_marks_that_gpu_only(scrape):
    stored_run(Node.objects.create(name="gpu-c", transport=Node.Transport.LOCAL),
               _failing("GPU 1 fell off the bus (Xid 79)", ["gpu_fallen_off_bus"]))
    health = _gpu_series(_samples(scrape()), "cudaweb_gpu_health")
    assert "gpu_fallen_off_bus" in known_signatures()
    assert {gpu: (labels["signature"], value) for gpu, (labels, value) in health.items()} == {
        "0": ("", 1.0), "1": ("gpu_fallen_off_bus", 0.0)}


def test_a_failure_naming_no_gpu_marks_all_and_an_unknown_signature_is_other(scrape):
    stored_run(Node.objects.create(name="gpu-d", transport=Node.Transport.LOCAL),
               _failing("the host wrote <script> into its report", ["made-up-by-the-host\n{x=\"y\"}"]))
    health = _gpu_series(_samples(scrape()), "cudaweb_gpu_health")
    assert {gpu: (labels["signature"], value) for gpu, (labels, value) in health.items()} == {
        "0": (OTHER, 0.0), "1": (OTHER, 0.0)}


def test_the_exposition_is_promtool_clean(scrape):
    stored_run(Node.objects.create(name="gpu-e", transport=Node.Transport.LOCAL, labels=["rack-07"]),
               real_report("h200-gpus2-full.json"))
    stored_run(Node.objects.create(name="gpu-f", transport=Node.Transport.LOCAL),
               _failing("GPU 0 fell off the bus (Xid 79)", ["gpu_fallen_off_bus"]))
    promtool = _promtool()
    text = scrape().content
    assert b"cudaweb_gpu_health{" in text and b"cudaweb_node_status{" in text
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=60)
    findings = (checked.stdout + checked.stderr).decode().splitlines()
    # promtool exits 1 on text it cannot parse, 3 on lint findings. Allowed: dcgm-exporter's own camelCase label
    # (modelName) on our per-GPU series, and the node series named in gigabytes before issue 31 (renaming them
    # would break the boards built on them).
    allowed = re.compile(r"^cudaweb_gpu_\w+ label names should be written in 'snake_case' not 'camelCase'$|"
                         r"^cudaweb_node_\w+_gigabytes_per_second use base unit \"bytes\" instead of \"gigabytes\"$")
    assert checked.returncode in (0, 3) and [line for line in findings if not allowed.match(line.strip())] == []
    assert any("cudaweb_gpu_health label names" in line for line in findings)  # promtool did lint our series


def _selector(name, labels):
    return "%s{%s}" % (name, ",".join('%s="%s"' % (key, value.replace("\\", "\\\\").replace('"', '\\"'))
                                      for key, value in sorted(labels.items())))


def test_the_readme_grafana_queries_join_on_uuid(scrape, tmp_path):
    """The README's two PromQL joins, evaluated by promtool on our scrape beside dcgm-exporter-shaped series for
    the same GPUs (label names as dcgm-exporter writes them; the DCGM values are this test's inputs)."""
    import json

    stored_run(Node.objects.create(name="gpu-g", transport=Node.Transport.LOCAL),
               _failing("GPU 1 fell off the bus (Xid 79)", ["gpu_fallen_off_bus"]))
    samples = _samples(scrape())
    ours = {name: _gpu_series(samples, name) for name in ("cudaweb_gpu_health", "cudaweb_gpu_matmul_bf16_tflops")}
    temperature, power = {"0": 45.0, "1": 71.0}, {"0": 420.0, "1": 650.5}
    series, expected_hot, expected_ratio = [], [], []
    for gpu, (labels, value) in ours["cudaweb_gpu_health"].items():
        series.append({"series": _selector("cudaweb_gpu_health", labels), "values": repr(value)})
        dcgm = {"gpu": gpu, "UUID": labels["UUID"], "device": "nvidia%s" % gpu, "modelName": labels["modelName"],
                "Hostname": labels["Hostname"], "DCGM_FI_DRIVER_VERSION": "580.159.04"}
        series.append({"series": _selector("DCGM_FI_DEV_GPU_TEMP", dcgm), "values": repr(temperature[gpu])})
        series.append({"series": _selector("DCGM_FI_DEV_POWER_USAGE", dcgm), "values": repr(power[gpu])})
        if value == 0:
            expected_hot.append({"labels": "{%s}" % _selector("", dict(dcgm, signature=labels["signature"],
                                                                       node=labels["node"]))[1:-1],
                                 "value": temperature[gpu]})
    for gpu, (labels, value) in ours["cudaweb_gpu_matmul_bf16_tflops"].items():
        series.append({"series": _selector("cudaweb_gpu_matmul_bf16_tflops", labels), "values": repr(value)})
        expected_ratio.append({"labels": "{%s}" % _selector("", labels)[1:-1], "value": value / power[gpu]})
    assert [sample["value"] for sample in expected_hot] == [71.0]  # GPU 1 only: the one the failure names
    queries = re.findall(r"^(DCGM_FI_DEV_GPU_TEMP .+|cudaweb_gpu_matmul_bf16_tflops / .+)$",
                         (Path(__file__).resolve().parents[2] / "README.md").read_text(), re.M)
    assert len(queries) == 2
    test_file = tmp_path / "joins.test.yml"
    test_file.write_text(json.dumps({"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series, "promql_expr_test": [
            {"expr": queries[0], "eval_time": "0m", "exp_samples": expected_hot},
            {"expr": queries[1], "eval_time": "0m", "exp_samples": expected_ratio}]}]}))
    checked = subprocess.run([_promtool(), "test", "rules", str(test_file)], capture_output=True,
                             timeout=60)
    assert checked.returncode == 0, (checked.stdout + checked.stderr).decode()[-3000:]
