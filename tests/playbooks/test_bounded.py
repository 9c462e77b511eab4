"""No log can stall the triage: linear patterns, hostile inputs, any bytes (issue 11).

The timing targets are met in bench/triage_hostile.py (it prints each case); here the properties: the triage
never raises, answers the same for the same input, and only the playbooks' own categories come back; every
pattern of the library and the knowledge tables is RE2 (a backtracking construct fails at load).
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudaweb.playbooks import knowledge, linear
from cudaweb.playbooks.library import CATEGORIES, PlaybookError, load, parse
from cudaweb.playbooks.matcher import MIN_SCORE, triage

PIECES = ["CUDA out of memory. Tried to allocate ", "9" * 50, "GiB", "Watchdog caught collective operation timeout",
          "WorkNCCL(SeqNum=", "NVRM: Xid (PCI:0000:3b:00): ", "79", "cudaSuccess (", " vs. 0)", "Return value ",
          "NCCL WARN ", "transport/net_ib.cc:", "block: [0,0,0], thread: [", "] Assertion", "\n", " ", "\x00",
          "\ufffd", "é", "(((((", "cudaError", "CUDA_ERROR_", "Expected all tensors to be on the same device"]


def _log():
    return st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=40)), max_size=60).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_log())
def test_any_text_gets_an_answer_or_none_never_an_error(text):
    first = triage(text)
    again = triage(text)
    assert [m.as_dict() for m in first.playbooks] == [m.as_dict() for m in again.playbooks]
    assert all(m.playbook.category in CATEGORIES for m in first.playbooks)
    assert all(m.score >= MIN_SCORE for m in first.playbooks if m.basis == "rules")
    assert all(m.score < MIN_SCORE and not m.confident for m in first.playbooks if m.basis != "rules")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096))
def test_any_bytes_decoded_with_replacement(data):
    result = triage(data.decode("utf-8", "replace"))
    assert isinstance(result.as_dict()["playbooks"], list)


def test_unpaired_surrogates_do_not_break_the_encoding():
    assert triage("CUDA out of memory \ud800 tried").playbooks[0].playbook.id == "oom"


def test_a_backtracking_pattern_is_refused_at_load():
    book = {"id": "x", "title": "x", "category": "oom", "severity": "s", "summary": "s", "symptoms": [],
            "causes": [], "diagnostics": [], "fixes": [], "match": {"patterns": [{"regex": "(a+)\\1", "weight": 1}]}}
    with pytest.raises(PlaybookError):
        parse(book)
    with pytest.raises(linear.error):
        linear.compile("(?=lookahead)")


def test_every_pattern_is_compiled_by_re2():
    kinds = {type(p.regex) for book in load().values() for p in book.patterns}
    kb = knowledge.load()
    kinds |= {type(kb.names), type(kb.message_regex)} | {type(p) for t in kb.tables for _, p in t.number_patterns}
    assert kinds == {type(linear.compile("x"))}


def test_triage_log_reads_non_utf8_with_replacement(tmp_path):
    import io
    import json

    from django.core.management import call_command

    path = tmp_path / "latin1.log"
    path.write_bytes(b"\xff\xfe caf\xe9 RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n\x80\x81")
    out = io.StringIO()
    call_command("triage_log", str(path), "--json", stdout=out)
    [result] = json.loads(out.getvalue())
    assert result["playbooks"][0]["category"] == "oom" and result["facts"]["tried_gib"] == 2.0


def test_the_evidence_of_a_long_line_is_the_part_around_the_match():
    text = "é" * 5000 + " RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB " + "ü" * 5000
    line = triage(text).playbooks[0].evidence[0]
    assert "CUDA out of memory" in line and len(line) <= 400 and "\ufffd" not in line
