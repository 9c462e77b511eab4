"""A triage guess "similar to bench/faults/faults.py::..." was a relative link that 404s (issue 29): a source that
is no web address is shown as text, not linked."""

import pytest
from django.template.loader import render_to_string

from cudaweb.playbooks.similarity import Document


class _Similar:
    def __init__(self, source):
        self.document, self.score = Document("x", "oom", source), 7.5


class _Book:
    id, title, category, severity = "oom", "Out of memory", "memory", "error"


class _Match:
    def __init__(self, source):
        self.playbook, self.score, self.confident, self.basis = _Book(), 0.4, False, "similar"
        self.similar_to, self.evidence, self.causes = _Similar(source), [], []


@pytest.mark.parametrize("source", ["bench/faults/faults.py::oom_fragmented", "faults.py"])
def test_a_source_that_is_no_web_address_is_text_not_a_link(source):
    html = render_to_string("playbooks/_match.html", {"match": _Match(source)})
    assert "a known error from <code>%s</code>" % source in html and 'href="%s"' % source not in html


def test_a_web_address_stays_a_link():
    html = render_to_string("playbooks/_match.html", {"match": _Match("https://docs.nvidia.com/x")})
    assert 'href="https://docs.nvidia.com/x"' in html
