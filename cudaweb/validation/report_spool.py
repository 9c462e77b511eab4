"""Reports a worker holds but has not stored yet, as files on the worker's host (CUDAWEB_REPORT_SPOOL_DIR): one is
written, and locked by its worker, before the report is stored and removed once it is, so a report the database could
not take (down longer than the retries last) waits there for the reaper (reaper.reports_sweep), which stores it with
its check rows once its worker lets it go."""

import contextlib
import fcntl
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
    """Write the report atomically (a temporary file renamed), readable only by the worker's user, and hold it: the
    answer is an open file locked (flock) by this process until `release`, so that no reaper stores the report while
    its worker is still trying to (a reaper takes only a file nobody holds; a killed worker's lock goes with it)."""
    folder = _dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = _path(run_id)
    scratch = target.with_suffix(".tmp")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with open(fd, "w", closefd=False) as fh:  # a file object writes it all (os.write may write part)
            json.dump(report, fh)
        os.replace(scratch, target)
    except BaseException:
        os.close(fd)
        raise
    return Held(fd)


class Held:
    """A kept report's file as its holder has it open and locked."""

    def __init__(self, fd):
        self.fd = fd

    def release(self):
        if self.fd is not None:
            os.close(self.fd)  # the lock goes with the last descriptor
            self.fd = None


def report_drop(*, run_id):
    try:
        _path(run_id).unlink()
    except FileNotFoundError:
        pass


@contextlib.contextmanager
def report_claimed(*, run_id):
    """Hold the kept report of `run_id` for the block if nobody holds it (its worker is done with it): True, else
    False (held by its worker or another reaper, or gone)."""
    try:
        fd = os.open(_path(run_id), os.O_RDONLY)
    except FileNotFoundError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield os.fstat(fd).st_nlink > 0  # not removed by a holder since it was opened here
    finally:
        os.close(fd)


def _held_by_another(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def reports_kept():
    """[(run_id, report, age in seconds)] of every report waiting here that no worker holds (is storing now); an
    unreadable file is logged and left."""
    folder = _dir()
    if not folder.is_dir():
        return []
    kept = []
    for path in sorted(folder.glob("*.json")):
        try:
            if _held_by_another(path):
                continue
            kept.append((uuid.UUID(path.stem), json.loads(path.read_text()), time.time() - path.stat().st_mtime))
        except (OSError, ValueError) as exc:
            log.error("kept report %s cannot be read: %s", path, exc)
    return kept
