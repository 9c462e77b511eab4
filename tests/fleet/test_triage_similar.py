"""A triage guess "similar to bench/faults/faults.py::..." was a relative link that 404s (issue 29): a source that
is no web address is shown as text, not linked, with the known error's own text inline."""

import pytest
from django.template.loader import render_to_string

from cudaweb.playbooks.similarity import Document


class _Similar:
    def __init__(self, source, excerpt=""):
        self.document, self.score = Document("x", "oom", source, excerpt), 7.5


class _Book:
    id, title, category, severity = "oom", "Out of memory", "memory", "error"


class _Match:
    def __init__(self, source, excerpt=""):
        self.playbook, self.score, self.confident, self.basis = _Book(), 0.4, False, "similar"
        self.similar_to, self.evidence, self.causes = _Similar(source, excerpt), [], []


@pytest.mark.parametrize("source", ["bench/faults/faults.py::oom_fragmented", "faults.py"])
def test_a_source_that_is_no_web_address_is_text_not_a_link(source):
    html = render_to_string("playbooks/_match.html", {"match": _Match(source)})
    assert "a known error from <code>%s</code>" % source in html and 'href="%s"' % source not in html


def test_a_web_address_stays_a_link():
    html = render_to_string("playbooks/_match.html", {"match": _Match("https://docs.nvidia.com/x")})
    assert 'href="https://docs.nvidia.com/x"' in html


def test_the_known_errors_text_is_shown_inline_and_escaped():
    html = render_to_string("playbooks/_match.html", {"match": _Match(
        "bench/faults/faults.py::oom_fragmented", "torch.OutOfMemoryError: CUDA out of memory <script>")})
    assert '<pre class="similar-excerpt">torch.OutOfMemoryError: CUDA out of memory &lt;script&gt;</pre>' in html


def test_the_index_keeps_each_known_errors_opening_for_the_page():
    from cudaweb.playbooks.similarity import EXCERPT_CHARS, default_index

    hits = default_index().search("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert hits and all(len(hit.document.excerpt) <= EXCERPT_CHARS for hit in hits)
    assert any(hit.document.excerpt for hit in hits)
