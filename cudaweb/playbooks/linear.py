"""Every pattern the triage runs, compiled by RE2: matching time grows linearly with the input, whatever it holds.

Python's `re` backtracks, so one pattern and one hostile log (200 kB of digits after "CUDA out of memory.")
took minutes; RE2 (google-re2) has no backtracking and refuses the constructs that need it (lookaround,
backreferences) when a pattern is loaded, so a slow pattern cannot be added by accident. docs/adr/0007.
"""

import re2

error = re2.error
_OPTIONS = re2.Options()
_OPTIONS.case_sensitive = False
_OPTIONS.log_errors = False  # a bad pattern raises error at load; RE2's own log line would only repeat it
_OPTIONS.max_mem = 64 << 20  # room for the large alternations of the knowledge tables


def compile(pattern, case_sensitive=False):  # noqa: A001 - the name re and re2 use
    """A multi-line (^ and $ at every line), by default case-insensitive, linear-time pattern."""
    options = _OPTIONS
    if case_sensitive:
        options = re2.Options()
        options.log_errors = False
        options.max_mem = _OPTIONS.max_mem
    return re2.compile("(?m)" + pattern, options)


escape = re2.escape
