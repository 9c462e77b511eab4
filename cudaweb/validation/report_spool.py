"""Reports a worker holds but has not stored yet, as files on the worker's host (CUDAWEB_REPORT_SPOOL_DIR): one is
written before the report is stored and removed once it is, so a report the database could not take (down longer
than the retries last) waits there for the reaper (reaper.reports_sweep), which stores it with its check rows."""

import json
import logging
import os
import time
import uuid
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)


def _dir():
    return Path(settings.CUDAWEB_REPORT_SPOOL_DIR)


def _path(run_id):
    return _dir() / ("%s.json" % uuid.UUID(str(run_id)))


def report_keep(*, run_id, report):
    """Write the report atomically (a temporary file renamed), readable only by the worker's user."""
    folder = _dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = _path(run_id)
    scratch = target.with_suffix(".tmp")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(report, fh)
    os.replace(scratch, target)


def report_drop(*, run_id):
    try:
        _path(run_id).unlink()
    except FileNotFoundError:
        pass


def reports_kept():
    """[(run_id, report, age in seconds)] of every report waiting here; an unreadable file is logged and left."""
    folder = _dir()
    if not folder.is_dir():
        return []
    kept = []
    for path in sorted(folder.glob("*.json")):
        try:
            kept.append((uuid.UUID(path.stem), json.loads(path.read_text()), time.time() - path.stat().st_mtime))
        except (OSError, ValueError) as exc:
            log.error("kept report %s cannot be read: %s", path, exc)
    return kept
