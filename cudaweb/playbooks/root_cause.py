"""A run's root cause as data, the one function every surface uses (API, CLI, hooks, metrics, fleet page):
`{check, layer, status, summary, signatures, playbook: {id, title, first_fix}}`, None when the run passed."""

import copy
from collections import OrderedDict

from cudaweb.playbooks.matcher import triage_check
from cudaweb.validation.root_cause import check_cause, root_checks

CACHE_SIZE = 4096
_cache = OrderedDict()  # a finished run never changes: (run id, status, finished, check id) -> the playbook


def _playbook(check):
    """The check's best playbook by the rules (no guesses), or None."""
    found = triage_check(check).playbooks
    if not found:
        return None
    book = found[0].playbook
    return {"id": book.id, "title": book.title, "first_fix": found[0].fixes[0] if book.fixes else ""}


def _playbook_cached(run, check):
    key = (run.id, run.status, run.finished, check.check_id)
    if key in _cache:
        _cache.move_to_end(key)
    else:
        _cache[key] = _playbook(check)
        if len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return copy.deepcopy(_cache[key])


def runs_root_causes(*, runs):
    """{run id: root cause or None} for many runs, reading their checks in one query."""
    runs = [run for run in runs if run is not None]
    checks = root_checks(runs=runs) if runs else {}
    causes = {}
    for run in runs:
        check = checks.get(run.id)
        cause = causes[run.id] = check_cause(run=run, check=check)
        if cause is not None:
            cause["playbook"] = _playbook_cached(run, check) if check is not None else None
    return causes


def run_root_cause(*, run):
    """The root cause of one run (see the module docstring); None when it passed or is still live."""
    if run is None:
        return None
    return runs_root_causes(runs=[run])[run.id]
