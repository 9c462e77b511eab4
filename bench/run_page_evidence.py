"""Server time of a run page whose failing check carries a 2 MiB evidence blob (target < 300 ms).

    python bench/run_page_evidence.py [--size BYTES] [--repeat N]

A real 2 x H200 report with driver.xid failing, its evidence replaced by SIZE bytes of host output: real error
lines, 1 MiB of digits after the OOM message, random bytes decoded with replacement, one line without a newline.
The page triages the check (the playbook matcher on the whole blob) and renders the evidence, escaped, with the
matched lines marked. Rendered in-process by Django's test client on a fresh SQLite database in a temp dir.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def blob(size):
    rnd = os.urandom(size // 4).decode("utf-8", "replace")
    parts = ["NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.\n",
             "CUDA out of memory. " + "9" * (size // 2) + "\n", rnd + "\n", "<script>alert(1)</script> " * 1000]
    text = "".join(parts)
    return (text * (size // len(text.encode()) + 1))[:size]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2 << 20)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="cudaweb-bench-")
    os.environ.update(DJANGO_SETTINGS_MODULE="cudaweb.settings", CUDAWEB_VAR_DIR=tmp,
                      DATABASE_URL="sqlite:///%s/db.sqlite3" % tmp, SECRET_KEY="bench-" + os.urandom(16).hex())
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    from cudaweb.nodes.models import Node
    from tests.drift.helpers import real_report, scaled, stored_run

    setup_test_environment()
    call_command("migrate", verbosity=0)
    node = Node.objects.create(name="bench-node", transport="local")
    run = stored_run(node, scaled(real_report(), statuses={"driver.xid": "fail"}))
    evidence = blob(args.size)
    run.checks.filter(check_id="driver.xid").update(evidence=evidence)
    user = get_user_model().objects.create_superuser("bench", "bench@example.com", "x")
    client = Client()
    client.force_login(user)
    url = reverse("runs:run_detail", args=[run.id])
    times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - started)
        assert response.status_code == 200
    page = response.content.decode()
    assert "<script>alert(1)</script>" not in page
    cold, warm = times[0], times[1:]
    print("run page, %d-byte evidence blob: first render of the process %.0f ms (loads the playbooks and the "
          "knowledge tables); then median %.0f ms, worst %.0f ms over %d renders; page %d bytes; target < 300 ms" % (
              len(evidence.encode()), 1000 * cold, 1000 * statistics.median(warm), 1000 * max(warm), len(warm),
              len(page)))


if __name__ == "__main__":
    main()
