"""The agent's copy in the local transport's cache: runs that start together on an empty cache each put it there
at once (the first runs after a worker starts, a bulk request), and none fails for another's copy."""

import hashlib
import multiprocessing
import os
import time

from cudaweb.remote.transports.local import LocalTransport


def _upload(cache_dir, payload, start, answers):
    start.wait()
    try:
        answers.put(LocalTransport(cache_dir).upload_agent(payload, hashlib.sha256(payload).hexdigest()))
    except Exception as exc:  # the failure itself is the answer the test looks at
        answers.put("%s: %s" % (type(exc).__name__, exc))


def test_uploads_at_once_into_an_empty_cache_all_succeed_and_leave_one_whole_copy(tmp_path):
    payload = os.urandom(4 << 20)
    context = multiprocessing.get_context("fork")
    for attempt in range(5):  # a race: several rounds, each on an empty cache
        cache = tmp_path / ("cache-%d" % attempt)
        start, answers = context.Barrier(8), context.Queue()
        workers = [context.Process(target=_upload, args=(str(cache), payload, start, answers)) for _ in range(8)]
        for worker in workers:
            worker.start()
        got = [answers.get(timeout=60) for _ in workers]
        for worker in workers:
            worker.join(timeout=60)
        assert len(set(got)) == 1, got  # every upload answered the same path, none an error
        path = got[0]
        assert path.startswith(str(cache)) and open(path, "rb").read() == payload
        assert sorted(os.listdir(cache)) == [os.path.basename(path)]  # no partial copy left behind


def test_a_partial_copy_left_by_an_upload_that_never_finished_goes_once_it_is_an_hour_old(tmp_path):
    payload = os.urandom(1 << 16)
    cache = tmp_path / "cache"
    cache.mkdir()
    old, fresh = cache / "cudaprobe-0123456789abcdef.pyz.dead1.part", cache / "cudaprobe-0123456789abcdef.pyz.live.part"
    for part in (old, fresh):
        part.write_bytes(b"half")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    path = LocalTransport(str(cache)).upload_agent(payload, hashlib.sha256(payload).hexdigest())
    assert sorted(os.listdir(cache)) == sorted([os.path.basename(path), fresh.name])  # another upload's stays
