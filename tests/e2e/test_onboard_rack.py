"""Onboarding with no browser (bench/onboard_rack.sh) against hosts of the simulated cluster (tests/simcluster.py):
Debian's ssh-keyscan reads each namespace's sshd, the operator's fingerprint list comes from the cluster's own host
keys, `import_nodes --known-hosts --fingerprints` pins them, and `validate_node --label ... --wait` exits 0 with every
node validated over SSH (each host's interpreter replays a real healthy H200 report: tests/fakes/replay-python)."""

import json
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from django.db import connection

from cudaweb.accounts.models import AuditEvent
from cudaweb.nodes.models import HostKey, Node
from tests import simcluster
from tests.conftest import _database_url, user_with_role
from tests.services import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ssh-keyscan"),
                                 reason="network namespaces need root; ssh-keyscan is Debian's openssh-client")]
HOSTS = int(os.environ.get("CUDAWEB_ONBOARD_HOSTS", "20"))
REPLAY_PYTHON = REPO / "tests" / "fakes" / "replay-python"


@pytest.fixture
def rack(tmp_path):
    """HOSTS simulated hosts: the import CSV, the operator's fingerprint list (ssh-keygen -lf of each host key, as
    read on each host's console) and the login key."""
    tag = uuid.uuid4().hex[:5]
    hosts, user_key = simcluster.up(HOSTS, tag)
    try:
        nodes = tmp_path / "rack.csv"
        nodes.write_text("name,address,port,user,labels,transport\n" + "".join(
            "%s,%s,22,root,sim,ssh\n" % (host["name"], host["address"]) for host in hosts))
        fingerprints = {}
        for index, host in enumerate(hosts):
            printed = subprocess.run(["ssh-keygen", "-lf", str(simcluster.home(tag) / ("host_key_%d.pub" % index))],
                                     check=True, capture_output=True, text=True).stdout
            fingerprints[host["name"]] = printed.split()[1]
        yield {"hosts": hosts, "csv": nodes, "fingerprints": fingerprints, "user_key": user_key}
    finally:
        simcluster.down(tag)


def onboard(tmp_path, rack, fingerprints, label):
    listed = tmp_path / ("%s.fingerprints" % label)
    listed.write_text("".join("%s\n" % fp for fp in fingerprints))
    env = dict(os.environ, DATABASE_URL=_database_url(connection.settings_dict),
               DJANGO_SETTINGS_MODULE="tests.settings", PYTHON=sys.executable, OUT=str(tmp_path / label))
    started = time.monotonic()
    done = subprocess.run(["sh", "bench/onboard_rack.sh", str(rack["csv"]), str(listed), label,
                           "--credential", "sim key", "--key-file", str(rack["user_key"]), "--as", "alice",
                           "--python", str(REPLAY_PYTHON)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900)
    return done, time.monotonic() - started


def test_a_script_with_no_browser_onboards_the_rack_from_keyscan_and_validates_it_by_label(
        celery_worker, tmp_path, rack, django_user_model):
    user_with_role(django_user_model, "alice", "admin")
    names = sorted(rack["fingerprints"])
    # one host's fingerprint missing from the operator's list: its key is refused by name, nothing is imported
    left_out = names[-1]
    done, _ = onboard(tmp_path, rack, [fp for name, fp in rack["fingerprints"].items() if name != left_out], "rack-a")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "%s: refused, none of its keys in the file has a fingerprint you gave" % left_out in done.stderr
    assert not Node.objects.exists() and not HostKey.objects.exists()

    done, seconds = onboard(tmp_path, rack, rack["fingerprints"].values(), "rack-b")
    print("\nonboarded %d hosts in %.1f s:\n%s" % (HOSTS, seconds, done.stderr[-1500:]))
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "rack-b" / "results.json").read_text())
    assert sorted(result["node"] for result in results) == names
    assert {result["status"] for result in results} == {"PASSED"}, [(r["node"], r["reason"]) for r in results]
    keys = {key.node.name: key for key in HostKey.objects.select_related("node", "accepted_by")}
    assert {name: (key.fingerprint_sha256, key.accepted_by.username) for name, key in keys.items()} == {
        name: (fp, "alice") for name, fp in rack["fingerprints"].items()}
    for host in rack["hosts"]:  # pinned as the page pins it: the very key each sshd holds
        assert (keys[host["name"]].key_type, keys[host["name"]].key_base64) == tuple(host["host_key"])
    accepted = AuditEvent.objects.filter(action="host_key.accepted")
    assert sorted(e.object_repr for e in accepted) == names
    assert {(e.actor_name, e.detail["via"]) for e in accepted} == {("alice", "manage.py import_nodes --known-hosts")}
    assert set(Node.objects.values_list("status", flat=True)) == {Node.Status.PASSING}
