"""Every pattern the triage runs, compiled by RE2: matching time grows linearly with the input, whatever it holds.

Python's `re` backtracks, so one pattern and one hostile log (200 kB of digits after "CUDA out of memory.")
took minutes; RE2 (google-re2) has no backtracking and refuses the constructs that need it (lookaround,
backreferences) when a pattern is loaded, so a slow pattern cannot be added by accident. docs/adr/0007.

Patterns match UTF-8 bytes: the matcher encodes a log once (`utf8`), where RE2's str interface would encode
it again for every pattern and every match (half a second per MiB of non-ASCII text).
"""

import re2

error = re2.error
escape = re2.escape


def _options(case_sensitive):
    options = re2.Options()
    options.case_sensitive = case_sensitive
    options.log_errors = False  # a bad pattern raises `error` at load; RE2's own log line would only repeat it
    options.max_mem = 64 << 20  # room for the large alternations of the knowledge tables
    return options


def compile(pattern, case_sensitive=False):  # noqa: A001 - the name re and re2 use
    """A multi-line (^ and $ at every line), by default case-insensitive, linear-time pattern over UTF-8 bytes."""
    return re2.compile(("(?m)" + pattern).encode("utf-8"), _options(case_sensitive))


def utf8(text):
    """The bytes the patterns match: str encoded once (unpaired surrogates replaced), bytes as they are."""
    return text if isinstance(text, bytes) else text.encode("utf-8", "replace")


def text_of(data):
    return data.decode("utf-8", "replace")


class Screen:
    """Which of many patterns occur in a text, in one pass over it (RE2's set matching): the matcher then
    searches only those, instead of passing over a 2 MiB log once per pattern."""

    def __init__(self, patterns, case_sensitive=False):
        self._set = re2.Set.SearchSet(_options(case_sensitive))
        for pattern in patterns:
            self._set.Add(("(?m)" + pattern).encode("utf-8"))
        self._set.Compile()

    def occurring(self, data):
        return frozenset(self._set.Match(data) or ())
