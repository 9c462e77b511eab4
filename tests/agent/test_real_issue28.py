"""Issue 28 (part a) on a real H200 (bench/i28a_on_device.sh): the agent's GPU worker gone from nvidia-smi within 2 s
of a kill -9 of its agent mid-burn-in, and stress.consistency's known answer computed right on the GPU. The outputs
are kept in tests/fixtures/real/burnin/issue28/ (i28a-log.txt, and from i28a-reports.tar.gz consistency.json and
consistency.record.json); until a lease has made them these tests are skipped, saying so."""

import json
import re
from pathlib import Path

import pytest

from agents.cudaprobe.checks import stress
from tests.agent.harness import VALIDATOR

KEPT = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "burnin" / "issue28"
LOG = KEPT / "i28a-log.txt"
CONSISTENCY = KEPT / "consistency.json"
RECORD = KEPT / "consistency.record.json"
pending = pytest.mark.skipif(not LOG.exists(), reason="pending: bench/i28a_on_device.sh has not run on an H200 yet")


@pending
def test_the_worker_was_gone_from_nvidia_smi_within_two_seconds_of_its_agents_kill_9():
    text = LOG.read_text()
    assert "VOID" not in text, "the kill measured nothing: %s" % text
    (line,) = [line for line in text.splitlines() if "KILL RESULT" in line]
    found = re.search(r"gone from nvidia-smi (\d+) ms .* from /proc (\d+) ms", line)
    assert found, line
    assert int(found.group(1)) <= 2000 and int(found.group(2)) <= 2000, line


@pending
def test_the_known_answer_was_exact_on_the_h200():
    report = json.loads(CONSISTENCY.read_text())
    assert not list(VALIDATOR.iter_errors(report))
    (check,) = [c for c in report["checks"] if c["id"] == "stress.consistency"]
    assert check["status"] == "pass" and "integer matmuls equal to their exact answer, bit for bit" in check["summary"]
    (task,) = [t for t in json.loads(RECORD.read_text())["tasks"] if t["task"].endswith(":gpu_consistency")]
    gpus = [g for o in task["outcomes"] for g in o["result"]["gpus"]]
    assert all(run["wrong"] == 0 for g in gpus for runs in g["known_answer"].values() for run in runs)
    assert stress.judge_consistency(gpus).summary == check["summary"]  # judged today as it was then
