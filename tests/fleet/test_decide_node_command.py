"""`manage.py decide_node`: an operator's accept or quarantine from a command line, as the onboarding page records it
(on the node's newest finished run, evidence and digest kept, audited); refusals exit 2."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from cudaweb.accounts.models import AuditEvent
from cudaweb.fleet.models import AcceptanceRecord
from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
from tests.conftest import user_with_role
from tests.drift.helpers import real_report, stored_run

pytestmark = pytest.mark.django_db


def decide(*args):
    out = StringIO()
    call_command("decide_node", *[str(a) for a in args], stdout=out)
    return out.getvalue()


def test_an_operator_accepts_a_node_on_its_newest_run(django_user_model):
    user_with_role(django_user_model, "olga", "operator")
    node = Node.objects.create(name="gpu-d01", transport=Node.Transport.LOCAL)
    older = stored_run(node, real_report())
    newest = stored_run(node, real_report())
    with pytest.raises(CommandError, match="newest finished run, %s, not %s" % (newest.id, older.id)):
        decide("gpu-d01", "--accept", "--run", older.id, "--as", "olga")
    out = decide("gpu-d01", "--accept", "--run", newest.id, "--as", "olga", "--note", "burn-in clean")
    record = AcceptanceRecord.objects.get(node=node)
    assert out.strip() == "gpu-d01 accepted on run %s (PASSED): record %s" % (newest.id, record.id)
    assert (record.run, record.decided_by.username, record.note) == (newest, "olga", "burn-in clean")
    event = AuditEvent.objects.get(action="node.accepted")
    assert (event.actor_name, event.detail["run"], event.detail["digest"]) == ("olga", str(newest.id), record.digest)
    node.refresh_from_db()
    assert node.baseline_id == newest.id  # the first accepted run is the baseline, as on the page


def test_refusals_exit_2(django_user_model):
    user_with_role(django_user_model, "olga", "operator")
    user_with_role(django_user_model, "vic", "viewer")
    node = Node.objects.create(name="gpu-d02", transport=Node.Transport.LOCAL)
    for args, said in ((("gpu-d02", "--quarantine"), "--as USER"),
                       (("gpu-d02", "--quarantine", "--as", "vic"), "vic does not have the operator role"),
                       (("gpu-d02", "--quarantine", "--as", "olga"), "no finished run with a verdict"),
                       (("nope", "--accept", "--as", "olga"), "no node named 'nope'")):
        with pytest.raises(CommandError, match=said) as refused:
            decide(*args)
        assert refused.value.returncode == 2
    ValidationRun.objects.create(node=node, status=ValidationRun.Status.FAILED, verdict="fail")
    with pytest.raises(CommandError, match="needs a reason in the note"):
        decide("gpu-d02", "--accept", "--as", "olga")
    decide("gpu-d02", "--quarantine", "--as", "olga", "--note", "Xid 79")
    node.refresh_from_db()
    assert node.status == Node.Status.QUARANTINED
