"""A run's root cause as data, the one function every surface uses (API, CLI, hooks, metrics, fleet page):
`{check, layer, status, summary, signatures, playbook: {id, title, first_fix}}`, None when the run passed."""

import copy
from collections import OrderedDict

from cudaweb.playbooks.matcher import triage_check
from cudaweb.validation.root_cause import check_cause, root_checks

CACHE_SIZE = 4096
_cache = OrderedDict()  # a finished run never changes: (run id, status, finished) -> its root cause


def _playbook(check):
    """The check's best playbook by the rules (no guesses), or None."""
    found = triage_check(check).playbooks
    if not found:
        return None
    book = found[0].playbook
    return {"id": book.id, "title": book.title, "first_fix": book.fixes[0] if book.fixes else ""}


def _cause(run, check):
    key = (run.id, run.status, run.finished)
    if key in _cache:
        _cache.move_to_end(key)
        return copy.deepcopy(_cache[key])
    cause = check_cause(run=run, check=check)
    if cause is not None:
        cause["playbook"] = _playbook(check) if check is not None else None
    if run.finished is not None:
        _cache[key] = cause
        if len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return copy.deepcopy(cause)


def runs_root_causes(*, runs):
    """{run id: root cause or None} for many runs, reading their checks in one query."""
    runs = [run for run in runs if run is not None]
    fresh = [run for run in runs if (run.id, run.status, run.finished) not in _cache]
    checks = root_checks(runs=fresh) if fresh else {}
    return {run.id: _cause(run, checks.get(run.id)) for run in runs}


def run_root_cause(*, run):
    """The root cause of one run (see the module docstring); None when it passed or is still live."""
    if run is None:
        return None
    return runs_root_causes(runs=[run])[run.id]
