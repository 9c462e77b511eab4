"""manage.py triage_log: files in order, '-' for stdin, --json shape, text output, unreadable files."""

import io
import json
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.33 GiB"


def test_json_lists_one_object_per_input_in_order(tmp_path):
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_text(OOM)
    second.write_text("nothing to see here")
    out = io.StringIO()
    call_command("triage_log", str(first), str(second), "--json", stdout=out)
    results = json.loads(out.getvalue())
    assert [r["input"] for r in results] == [str(first), str(second)]
    assert {"id", "category", "score"} <= results[0]["playbooks"][0].keys()
    assert results[0]["playbooks"][0]["id"] == "oom" and results[1]["playbooks"] == []


def test_dash_reads_stdin_in_a_real_process():
    done = subprocess.run([sys.executable, "manage.py", "triage_log", "-", "--json"], input=OOM, text=True,
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)[0]
    assert result["input"] == "-" and result["playbooks"][0]["category"] == "oom"
    assert result["facts"]["total_gib"] == 79.33


def test_text_output_names_the_playbook_and_the_line(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("noise\nRuntimeError: Expected all tensors to be on the same device, but found at least two "
                   "devices, cuda:0 and cpu!\n")
    out = io.StringIO()
    call_command("triage_log", str(log), stdout=out)
    assert "device_mismatch" in out.getvalue() and "| RuntimeError: Expected all tensors" in out.getvalue()


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        call_command("triage_log", str(tmp_path / "nope.log"))
