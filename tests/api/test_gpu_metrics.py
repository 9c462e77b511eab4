"""Per-GPU series on /metrics in dcgm-exporter's shape (cudaweb/api/gpu_metrics.py): the labels dcgm-exporter uses,
each GPU's figures from real reports, health with a signature from a closed set, and the whole exposition clean
under Prometheus' own promtool (Debian's prometheus package; `make promtool`)."""

import copy
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
                          "Hostname": "gpu-a", "node": "gpu-a"}  # our name for the node, not the report's
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


# Two GPUs of another real host (tests/fixtures/real/h200-gpus2-full-issue9.json's nvidia-smi -L)
OTHER_HOSTS_UUIDS = ["GPU-8a45535b-09d9-52a6-cd64-be6ff614e1ae", "GPU-c756cd40-8c87-bcc9-9eee-330f2645fdaf"]


def _listing(report, uuids):
    """A copy of the report whose nvidia-smi -L gives its GPUs these UUIDs, the first first: what a host can send."""
    report = copy.deepcopy(report)
    check = _check(report, "driver.nvidia_smi")
    for gpu, uuid in enumerate(uuids):
        check["evidence"] = re.sub(r"^(GPU %d: .+? \(UUID: )[^)]*\)" % gpu, lambda m: m.group(1) + uuid + ")",
                                   check["evidence"], flags=re.M)
    assert [m.group(3) for m in GPU_LINE.finditer(check["evidence"])][:len(uuids)] == uuids
    return report


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
               _listing(_failing("GPU 0 fell off the bus (Xid 79)", ["gpu_fallen_off_bus"]), OTHER_HOSTS_UUIDS))
    stored_run(Node.objects.create(name="gpu-h", transport=Node.Transport.LOCAL),
               _listing(real_report("h200-gpus1-full.json"), [OTHER_HOSTS_UUIDS[0]]))  # a conflict: its gauge
    promtool = _promtool()
    text = scrape().content
    assert b"cudaweb_gpu_health{" in text and b"cudaweb_node_status{" in text
    assert b"\ncudaweb_gpu_uuid_conflicts 1.0\n" in text
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


def _by_node(samples, name):
    """{node: {gpu: (labels, value)}} of one per-GPU series."""
    found = {}
    for (n, labels), value in samples.items():
        if n == name:
            labels = dict(labels)
            found.setdefault(labels["node"], {})[labels["gpu"]] = (labels, value)
    return found


def test_hostname_is_the_nodes_name_in_our_records_not_the_hosts_word(scrape):
    report = real_report("h200-gpus2-full.json")
    report["host"]["hostname"] = "gpu-victim"  # a host may say it is any other
    stored_run(Node.objects.create(name="gpu-a", transport=Node.Transport.LOCAL), report)
    health = _gpu_series(_samples(scrape()), "cudaweb_gpu_health")
    assert sorted(health) == ["0", "1"]
    assert {labels["Hostname"] for labels, _ in health.values()} == {"gpu-a"}


def test_a_uuid_not_of_nvidias_form_has_no_series(scrape):
    report = _listing(real_report("h200-gpus2-full.json"), ["GPU-12345678-1234-1234-1234-12345678901Z"])
    stored_run(Node.objects.create(name="gpu-a", transport=Node.Transport.LOCAL), report)
    samples = _samples(scrape())
    kept = _gpu_series(samples, "cudaweb_gpu_health")
    assert sorted(kept) == ["1"] and kept["1"][0]["UUID"] == "GPU-244e70e4-b933-f5a1-7b46-83504846ad61"
    assert sorted(_gpu_series(samples, "cudaweb_gpu_matmul_bf16_tflops")) == ["1"]
    assert samples[("cudaweb_gpu_uuid_conflicts", ())] == 0


def test_a_uuid_two_nodes_list_has_no_series_under_either_counted_and_shown(scrape, operator_client):
    """A host that lists another's GPU (here in capitals: the same GPU to NVML) takes it out of /metrics for both,
    never into its own series, and both node pages say so; the GPUs each lists alone keep their series."""
    victim_report = real_report("h200-gpus2-full.json")
    victim_uuids = [m.group(3) for m in GPU_LINE.finditer(_check(victim_report, "driver.nvidia_smi")["evidence"])]
    victim = Node.objects.create(name="gpu-victim", transport=Node.Transport.LOCAL)
    stored_run(victim, victim_report)
    hostile = Node.objects.create(name="gpu-hostile", transport=Node.Transport.LOCAL)
    stored_run(hostile, _listing(real_report("h200-gpus2-full.json"), [victim_uuids[0].upper(), OTHER_HOSTS_UUIDS[1]]))
    samples = _samples(scrape())
    for series in ("cudaweb_gpu_health", "cudaweb_gpu_matmul_bf16_tflops"):
        exposed = _by_node(samples, series)
        assert {node: sorted((gpu, labels["UUID"]) for gpu, (labels, _) in gpus.items())
                for node, gpus in exposed.items()} == {"gpu-victim": [("1", victim_uuids[1])],
                                                       "gpu-hostile": [("1", OTHER_HOSTS_UUIDS[1])]}
    assert samples[("cudaweb_gpu_uuid_conflicts", ())] == 1
    for node in (victim, hostile):
        page = operator_client.get(node.get_absolute_url()).content.decode()
        shown = re.search(r'<span class="attention" id="gpu-uuid-conflicts">(.*?)</span>', page, re.S)
        assert shown and "%s (gpu-hostile, gpu-victim)" % victim_uuids[0].lower() in shown.group(1)
        assert victim_uuids[1] not in shown.group(1)


def test_a_host_split_into_nodes_gives_each_node_its_own_gpu_only(scrape, operator_client):
    """nvidia-smi lists the whole host to each node that is one of its GPUs (visible_devices): no conflict, each
    node's series carry its GPU's index and UUID and the figures the agent measured on it (its GPU 0)."""
    report = real_report("h200x2-cvd0-standard.json")  # CUDA_VISIBLE_DEVICES=0 on a 2-GPU host: both listed
    listed = [m.group(3) for m in GPU_LINE.finditer(_check(report, "driver.nvidia_smi")["evidence"])]
    assert len(listed) == 2
    for name, devices, factor in (("gpu-0", "0", 1.0), ("gpu-1", "1", 0.5)):
        stored_run(Node.objects.create(name=name, transport=Node.Transport.LOCAL, visible_devices=devices),
                   scaled(report, {"matmul_bf16_tflops": factor}))
    samples = _samples(scrape())
    matmul = _by_node(samples, "cudaweb_gpu_matmul_bf16_tflops")
    measured = _check(report, "cuda.matmul")["metrics"]["matmul_bf16_tflops.gpu0"]
    assert {node: {gpu: (labels["UUID"], value) for gpu, (labels, value) in gpus.items()}
            for node, gpus in matmul.items()} == {"gpu-0": {"0": (listed[0], measured)},
                                                  "gpu-1": {"1": (listed[1], pytest.approx(measured * 0.5))}}
    assert samples[("cudaweb_gpu_uuid_conflicts", ())] == 0
    node = Node.objects.get(name="gpu-1")
    assert 'id="gpu-uuid-conflicts"' not in operator_client.get(node.get_absolute_url()).content.decode()
