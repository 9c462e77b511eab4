"""Pages: the run page shows playbooks inline with the matched evidence; library, playbook, triage, votes."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from cudaweb.nodes.models import Node
from cudaweb.playbooks.models import PlaybookVote
from cudaweb.validation.models import CheckResult, ValidationRun

pytestmark = pytest.mark.django_db
EVIDENCE = ("loaded: nvidia\n<script>alert(1)</script>\n"
            "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable")


@pytest.fixture
def failed_run(admin_user):
    node = Node.objects.create(name="gpu-7", transport=Node.Transport.LOCAL)
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.FAILED, requested_by=admin_user)
    CheckResult.objects.create(run=run, position=0, check_id="cuda.context", layer="L4", title="Context",
                               status="fail", summary="CUDA context test failed", evidence=EVIDENCE,
                               signatures=["compute_mode_busy"])
    CheckResult.objects.create(run=run, position=1, check_id="host.system", layer="L0", title="OS", status="pass",
                               summary="Linux", evidence="")
    return run


def test_run_page_shows_the_playbook_inline_with_matched_lines_marked(operator_client, failed_run):
    page = operator_client.get(reverse("runs:run_detail", args=[failed_run.id])).content.decode()
    root = page[page.index('id="root-cause"'):page.index('id="passes"')]
    assert "GPU busy or unavailable" in root
    assert "<mark>RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable</mark>" in root
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "playbook-card" not in page  # the root cause's playbook is in its card, not again below


def test_votes_are_stored_and_shown(operator_client, failed_run, admin_user):
    url = reverse("playbooks:vote", args=[failed_run.id, "compute_mode_busy"])
    operator_client.post(url, {"helped": "1"})
    operator_client.post(url, {"helped": "0"})  # a second vote by the same user replaces the first
    vote = PlaybookVote.objects.get()
    assert vote.user == admin_user and vote.helped is False
    page = operator_client.get(reverse("runs:run_detail", args=[failed_run.id])).content.decode()
    assert "0 fixed it, 1 did not help; your vote: did not help" in page
    operator_client.post(url, {"helped": "1"})
    library = operator_client.get(reverse("playbooks:list")).content.decode()
    row = library.split("GPU busy or unavailable", 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">1</td><td class="num">1</td>' in row
    assert operator_client.post(reverse("playbooks:vote", args=[failed_run.id, "no-such"]),
                                {"helped": "1"}).status_code == 404


def test_playbook_page_lists_causes_and_commands(operator_client):
    page = operator_client.get(reverse("playbooks:detail", args=["oom"])).content.decode()
    assert "expandable_segments" in page and "memory_summary" in page
    assert operator_client.get(reverse("playbooks:detail", args=["nope"])).status_code == 404


def test_triage_page_from_text_and_from_a_file(operator_client):
    url = reverse("playbooks:triage")
    page = operator_client.post(url, {"text": "[rank3]: Watchdog caught collective operation timeout: "
                                              "WorkNCCL(SeqNum=9, OpType=BROADCAST, Timeout(ms)=600000)"})
    body = page.content.decode()
    assert "NCCL collective timed out" in body and "op_type=BROADCAST" in body and "rank=3" in body
    upload = SimpleUploadedFile("job.log", b"AssertionError: Torch not compiled with CUDA enabled\n")
    assert "A CPU-only build of PyTorch" in operator_client.post(url, {"upload": upload}).content.decode()
    assert "No playbook matches" in operator_client.post(url, {"text": "hello world"}).content.decode()


def test_triage_upload_over_the_cap_is_refused(operator_client, settings):
    settings.CUDAWEB_TRIAGE_CAP = 100
    upload = SimpleUploadedFile("big.log", b"x" * 101)
    body = operator_client.post(reverse("playbooks:triage"), {"upload": upload}).content.decode()
    assert "the limit is 100 bytes" in body and 'id="triage-result"' not in body


def test_run_page_opens_with_the_root_cause_then_findings_and_folds_the_passes(operator_client, admin_user):
    node = Node.objects.create(name="gpu-8", transport=Node.Transport.LOCAL)
    run = ValidationRun.objects.create(node=node, status=ValidationRun.Status.FAILED, requested_by=admin_user)
    rows = [  # (check, layer, status, signatures, blocked_by), in report order
        ("host.system", "L0", "pass", [], ""),
        ("driver.processes", "L1", "warn", ["gpu_memory_held_by_process"], ""),
        ("cuda.context", "L4", "fail", ["compute_mode_busy"], ""),
        ("comm.nccl", "L5", "fail", ["nccl_failed"], ""),
        ("cuda.matmul", "L4", "skip", [], "cuda.context"),
        ("train.resnet18", "L6", "skip", [], "cuda.context"),
    ]
    for position, (check_id, layer, status, signatures, blocked_by) in enumerate(rows):
        CheckResult.objects.create(run=run, position=position, check_id=check_id, layer=layer, title=check_id,
                                   status=status, summary="%s summary" % check_id, signatures=signatures,
                                   blocked_by=blocked_by)
    page = operator_client.get(reverse("runs:run_detail", args=[run.id])).content.decode()
    root = page[page.index('id="root-cause"'):page.index("</section>")]
    assert "Root cause: cuda.context" in root and "GPU busy or unavailable" in root and 'id="first-fix"' in root
    assert "2 checks skipped because of it: cuda.matmul, train.resnet18" in root
    rest = page[page.index("</section>"):]
    # the warning's own playbook, then the failure above the root cause's layer, folded as a possible consequence;
    # then the skips and the passes, folded
    order = [rest.index(needle) for needle in ('id="playbook-oom"', ">driver.processes<",
                                                'May follow from the root cause', ">comm.nccl<", 'id="skips"',
                                                ">cuda.matmul<", 'id="passes"', ">host.system<")]
    assert order == sorted(order)
    assert '<details class="card accent-skip playbook-card"' in rest  # the possible consequence is folded
    assert rest.count("Root cause") == 0 and page.count('id="playbook-') == 2  # one card per playbook


def test_playbook_page_shows_each_pattern_as_the_text_written_not_as_python_bytes(operator_client):
    from django.utils.html import escape

    from cudaweb.playbooks import library

    page = operator_client.get(reverse("playbooks:detail", args=["oom"])).content.decode()
    assert "<code>b&#x27;" not in page and "<code>b'" not in page
    for pattern in library.get("oom").patterns:
        assert "<code>%s</code>" % escape(pattern.source) in page
