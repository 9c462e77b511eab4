"""Reports a worker holds but has not stored yet, as files on the worker's host (CUDAWEB_REPORT_SPOOL_DIR): one is
written, and locked by its worker, before the report is stored and removed once it is, so a report the database could
not take (down longer than the retries last) waits there for the reaper (reaper.reports_sweep), which stores it with
its check rows once its worker lets it go."""

import contextlib
import fcntl
import json
import logging
import os
import socket
import time
import uuid
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)


def _dir():
    return Path(settings.CUDAWEB_REPORT_SPOOL_DIR)


def _path(run_id):
    return _dir() / ("%s.json" % uuid.UUID(str(run_id)))


def location(run_id):
    """Where the kept report of `run_id` lies, for a person: host and path (the spool is on the worker's host)."""
    return "%s:%s" % (socket.gethostname(), _path(run_id))


QUARANTINE = "quarantine"  # a kept report that cannot be read or stored goes here, once, named in the log and its run
TMP_MAX_AGE_S = 3600  # a .tmp file this old is what a writer killed mid-write left


class SpoolFull(OSError):
    """The spool could not take the report (a full disk, no permission): nothing was kept."""


def report_keep(*, run_id, report):
    """Write the report crash-safely (a temporary file written, fsynced, renamed, the directory fsynced: a crash leaves
    the old state or the whole new file, never part of one), readable only by the worker's user, and hold it: the
    answer is an open file locked (flock) by this process until `release`, so that no reaper stores the report while
    its worker is still trying to (a reaper takes only a file nobody holds; a killed worker's lock goes with it).
    Raises SpoolFull, leaving no partial file behind, when the spool cannot take it."""
    folder = _dir()
    target = _path(run_id)
    scratch = target.with_suffix(".tmp")
    fd = None
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        with open(fd, "w", closefd=False) as fh:  # a file object writes it all (os.write may write part)
            json.dump(report, fh)
        os.fsync(fd)
        os.replace(scratch, target)
        _fsync_dir(folder)
    except OSError as exc:
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(OSError):
            scratch.unlink()
        raise SpoolFull("the report spool %s could not take the report: %s" % (folder, exc)) from exc
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    return Held(fd)


def _fsync_dir(folder):
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


def report_waits(*, run_id):
    """Whether this host's spool keeps a report of `run_id` (not stored yet, or stored and not removed yet)."""
    return _path(run_id).exists()


def report_held(*, run_id):
    """Whether a worker on this host holds the kept report of `run_id` now (it is alive and storing it)."""
    path = _path(run_id)
    return path.exists() and _held_by_another(path)


def reports_waiting():
    """[(run_id, age in seconds)] of every report waiting here that no worker holds, from the file names and their
    times only (the spool's index: nothing is read until a reaper claims a report); partial .tmp files a killed
    writer left are removed on the way."""
    folder = _dir()
    if not folder.is_dir():
        return []
    waiting = []
    now = time.time()
    for entry in os.scandir(folder):
        name = entry.name
        try:
            if name.endswith(".tmp"):
                if now - entry.stat().st_mtime > TMP_MAX_AGE_S and not _held_by_another(entry.path):
                    os.unlink(entry.path)
                    log.warning("removed %s: a report its writer never finished", entry.path)
                continue
            if not name.endswith(".json"):
                continue
            run_id = uuid.UUID(name[:-len(".json")])
            if _held_by_another(entry.path):
                continue
            waiting.append((run_id, now - entry.stat().st_mtime))
        except FileNotFoundError:
            continue  # stored and removed meanwhile
        except ValueError:
            report_quarantine(path=Path(entry.path), why="its name is no run's id")
    return sorted(waiting, key=lambda item: -item[1])


def report_read(*, run_id):
    """The kept report of `run_id` (claimed by the caller); ValueError when the file is no report (truncated, not
    JSON, not an object)."""
    text = _path(run_id).read_text()
    try:
        report = json.loads(text)
    except ValueError as exc:
        raise ValueError("not JSON (%d bytes): %s" % (len(text), exc)) from exc
    if not isinstance(report, dict) or not isinstance(report.get("checks"), list):
        raise ValueError("not a report")
    return report


def report_quarantine(*, path=None, run_id=None, why):
    """Move a kept report that cannot be read or stored into the spool's quarantine folder (so no reaper tries it
    again), log where it went, and answer that path."""
    path = Path(path) if path is not None else _path(run_id)
    folder = _dir() / QUARANTINE
    folder.mkdir(exist_ok=True, mode=0o700)
    moved = folder / path.name
    try:
        os.replace(path, moved)
    except FileNotFoundError:
        return None
    log.error("kept report %s cannot be stored (%s): moved to %s, where it stays for a person to look at",
              path, why, moved)
    return moved


def reports_kept():
    """[(run_id, report, age in seconds)] of every report waiting here that no worker holds; a file that is no report
    is quarantined (once)."""
    kept = []
    for run_id, age_s in reports_waiting():
        try:
            kept.append((run_id, report_read(run_id=run_id), age_s))
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            report_quarantine(run_id=run_id, why=exc)
    return kept
