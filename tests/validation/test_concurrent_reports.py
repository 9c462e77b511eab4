"""Reports of many nodes of one GPU model stored at the same moment (a rack validated at once) are all kept: the
shared peer bands are refreshed after each report's transaction, by upsert, never by delete and insert."""

import threading

import pytest
from django.db import connection

from cudaweb.drift.models import PeerBand
from cudaweb.nodes.models import Node
from cudaweb.validation.models import ValidationRun
from cudaweb.validation.services import run_store_report
from tests.drift.helpers import real_report

NODES = 16


@pytest.mark.django_db(transaction=True)
def test_reports_stored_at_once_are_all_kept():
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL (SQLite takes one writer at a time); CI runs it there")
    report = real_report()
    runs = [ValidationRun.objects.create(node=Node.objects.create(name="rack-%02d" % i, transport="local"),
                                         status=ValidationRun.Status.RUNNING, mode="standard")
            for i in range(NODES)]
    start, errors = threading.Barrier(NODES), []

    def store(run):
        try:
            start.wait()
            run_store_report(run=run, report=report)
        except Exception as exc:  # noqa: BLE001 - any failure is what this test looks for
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=store, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    statuses = set(ValidationRun.objects.values_list("status", flat=True))
    assert statuses == {ValidationRun.Status.PASSED}
    assert all(run.report for run in ValidationRun.objects.all())
    band = PeerBand.objects.get(gpu_model="NVIDIA H200", metric="matmul_bf16_tflops")
    assert band.count == NODES
