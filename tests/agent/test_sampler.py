"""The burn-in's NVML sampler (agents/cudaprobe/sampler.py), on a stand-in for pynvml: what cannot exist here."""

import threading
import time

from agents.cudaprobe.sampler import Sampler


class _NVMLError(Exception):
    pass


def _sampler_waiting_on(wait, interval_s):
    """A Sampler whose Xid event wait is `wait(events, ms)`, without NVML or torch behind it."""
    sampler = Sampler.__new__(Sampler)
    sampler.interval_s, sampler.started, sampler.events = interval_s, time.monotonic(), object()
    sampler.samples, sampler.xids, sampler.notes = [], [], []
    sampler.event_waits, sampler.event_errors, sampler.event_error = 0, 0, None
    sampler._stop = threading.Event()
    sampler.nv = type("FakeNVML", (), {"nvmlEventSetWait_v2": staticmethod(wait)})
    return sampler


def test_an_event_wait_that_fails_at_once_still_waits_out_the_interval():
    def lost(events, ms):
        raise _NVMLError("GPU is lost")  # NVML answers at once, no event, no timeout

    sampler = _sampler_waiting_on(lost, interval_s=0.3)
    began = time.monotonic()
    sampler._wait()
    assert time.monotonic() - began >= 0.25 and sampler.xids == []


def test_a_timed_out_event_wait_is_not_waited_twice_and_an_xid_is_kept():
    def timeout(events, ms):
        time.sleep(ms / 1000.0)
        raise _NVMLError("Timeout")

    sampler = _sampler_waiting_on(timeout, interval_s=0.3)
    began = time.monotonic()
    sampler._wait()
    assert 0.25 <= time.monotonic() - began < 0.5

    sampler = _sampler_waiting_on(lambda events, ms: type("Event", (), {"eventData": 79})(), interval_s=0.3)
    sampler._wait()
    assert [x["xid"] for x in sampler.xids] == [79]


def test_the_result_says_whether_xid_events_were_delivered():
    sampler = _sampler_waiting_on(lambda events, ms: None, interval_s=0.3)
    sampler.info = {}
    assert sampler.result()["xid_events"] is True
    sampler.events = None  # nvmlDeviceRegisterEvents refused: the note says why
    assert sampler.result()["xid_events"] is False
    del sampler.events  # NVML itself absent: the sampler never got as far as events
    assert sampler.result()["xid_events"] is False


def test_event_waits_that_all_fail_are_no_xid_watch_and_say_why():
    def unsupported(events, ms):
        raise _NVMLError("Not Supported")

    sampler = _sampler_waiting_on(unsupported, interval_s=0.01)
    sampler.info = {}
    for _ in range(3):
        sampler._wait()
    result = sampler.result()
    assert result["xid_events"] is False
    assert result["notes"] == ["NVML Xid event waits all failed (_NVMLError: Not Supported): Xid read from the "
                               "kernel log only"]

    def timeout(events, ms):
        raise _NVMLError("Timeout")  # no event in the interval: watched, nothing came

    sampler = _sampler_waiting_on(timeout, interval_s=0.01)
    sampler.info = {}
    sampler._wait()
    assert sampler.result()["xid_events"] is True and sampler.result()["notes"] == []
