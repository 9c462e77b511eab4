"""Two nodes that are the two GPUs of one host, validated and pair-tested through the dashboard (issue 12).

    python bench/pair_through_dashboard.py OUT_DIR

Run by bench/pair_on_device.sh on a 2-GPU machine, after it has migrated a SQLite database and started Redis and
a Celery worker. Registers `gpu0` and `gpu1` as local nodes with CUDA_VISIBLE_DEVICES 0 and 1 (add_node
--visible-devices), requests a quick validation of both and then "test the network" for the pair, each through the
web views (Django's test client, logged in), waits for the worker, and prints and writes what the pages and the
stored results say: verdicts, the pair's transport, NCCL and gloo figures.
"""

import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main():
    out = Path(sys.argv[1])
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cudaweb.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    from cudaweb.network.models import NetworkTest
    from cudaweb.nodes.models import Node
    from cudaweb.validation.models import ValidationRun

    setup_test_environment()  # the test client's host name
    python = os.environ["AGENT_PYTHON"]
    for name, devices in (("gpu0", "0"), ("gpu1", "1")):
        call_command("add_node", name, "--transport", "local", "--python", python, "--visible-devices", devices)
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "x")
    client = Client()
    client.force_login(user)
    nodes = list(Node.objects.filter(name__in=["gpu0", "gpu1"]).order_by("name"))
    summary = {"nodes": {n.name: n.visible_devices for n in nodes}}

    started = time.monotonic()
    response = client.post(reverse("fleet:nodes_validate"), {"nodes": [str(n.id) for n in nodes], "mode": "quick"})
    assert response.status_code == 302, response.status_code
    runs = list(ValidationRun.objects.filter(node__in=nodes))
    while ValidationRun.objects.filter(id__in=[r.id for r in runs], status__in=ValidationRun.LIVE).exists():
        if time.monotonic() - started > 400:
            raise SystemExit("validations still live after 400 s")
        time.sleep(2)
    summary["validations"] = []
    for run in ValidationRun.objects.filter(id__in=[r.id for r in runs]).select_related("node").order_by("node__name"):
        checks = {c.check_id: c for c in run.checks.all()}
        available = checks.get("cuda.available")
        summary["validations"].append({
            "node": run.node.name, "status": run.status, "reason": run.reason, "wall_s": run.duration_s,
            "cuda.available": available and (available.status, available.summary),
            "not passing": sorted("%s %s" % (c.check_id, c.status) for c in checks.values() if c.status != "pass")})
        page = client.get(reverse("runs:run_detail", args=[run.id]))
        (out / ("run-%s.html" % run.node.name)).write_bytes(page.content)

    started = time.monotonic()
    response = client.post(reverse("network:start"), {"nodes": [str(n.id) for n in nodes]})
    assert response.status_code == 302, response.status_code
    test = NetworkTest.objects.latest("created")
    while NetworkTest.objects.filter(id=test.id, status__in=["PENDING", "RUNNING"]).exists():
        if time.monotonic() - started > 400:
            raise SystemExit("network test still live after 400 s")
        time.sleep(2)
    test.refresh_from_db()
    summary["network_test"] = {"status": test.status, "plan": test.plan, "wall_s": round(time.monotonic() - started, 1),
                               "pairs": [{k: getattr(p, k) for k in (
                                   "status", "failure", "reason", "transport", "nccl_busbw_gbs", "gloo_busbw_gbs",
                                   "gloo_latency_us", "duration_s")}
                                  | {"pair": "%s-%s" % (p.node_a.name, p.node_b.name)}
                                   for p in test.pairs.select_related("node_a", "node_b")],
                               "evidence": [p.evidence for p in test.pairs.all()]}
    page = client.get(test.get_absolute_url())
    (out / "network-test.html").write_bytes(page.content)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(json.dumps({k: v for k, v in summary.items() if k != "network_test"}, indent=2, default=str))
    print(json.dumps({k: v for k, v in summary["network_test"].items() if k != "evidence"}, indent=2, default=str))


if __name__ == "__main__":
    main()
