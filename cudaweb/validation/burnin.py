"""Burn-in mode: its lengths, the agent's time budget and arguments, and the stress series its report carries."""

import csv
import io

from django.conf import settings

DEFAULT_SECONDS = 300
MIN_SECONDS = 60
MAX_SECONDS = 24 * 3600
# What the pages offer; "custom" takes any length between MIN_SECONDS and MAX_SECONDS.
DURATIONS = ((300, "5 min"), (1800, "30 min"), (7200, "2 h"))
SUSTAINED_CHECK = "stress.sustained"
# One sample of the sustained load (agents/cudaprobe stress.sustained, check key "series"), one GPU at one moment.
SERIES_FIELDS = ("t", "gpu", "sm_clock_mhz", "mem_clock_mhz", "power_w", "power_limit_w", "temp_c", "mem_temp_c",
                 "throttle", "tflops")
SERIES_CAP = 20000  # samples kept from a report (the agent downsamples; host output is untrusted)


def is_burnin(mode):
    return mode == "burnin"


def seconds_of(mode, burnin_seconds):
    """The burn-in length a run of `mode` uses (None outside burn-in mode)."""
    if not is_burnin(mode):
        return None
    return burnin_seconds or DEFAULT_SECONDS


def agent_budget_s(node, mode, burnin_seconds=None):
    """Seconds the agent may run: the node's own budget or the mode's, and in burn-in mode the burn-in's length and
    a margin on top (the memory test and the consistency check follow the sustained load)."""
    base = node.agent_timeout_s or settings.CUDAWEB_AGENT_TIMEOUT[mode]
    if not is_burnin(mode):
        return base
    return base + seconds_of(mode, burnin_seconds) + settings.CUDAWEB_BURNIN_MARGIN_S


def agent_args(mode, burnin_seconds=None):
    """The agent's mode arguments: `--mode M`, and `--burnin-seconds N` in burn-in mode."""
    args = ["--mode", mode]
    if is_burnin(mode):
        args += ["--burnin-seconds", str(seconds_of(mode, burnin_seconds))]
    return args


def describe(mode, burnin_seconds):
    """"full + burn-in 30 min" / "standard": what a run or an acceptance record rests on, in words."""
    seconds = seconds_of(mode, burnin_seconds)
    if seconds is None:
        return mode
    named = dict(DURATIONS).get(seconds)
    if named is None:
        named = "%d min" % (seconds // 60) if seconds % 60 == 0 else "%d s" % seconds
    return "full + burn-in %s" % named


def _number(value):
    if isinstance(value, bool):
        return None
    return value if isinstance(value, (int, float)) else None


def series_of(check):
    """The samples of a stress.sustained check (its "series" key, or a list under metrics["series"]), each reduced
    to SERIES_FIELDS with numbers only: what a report from a host says is not trusted."""
    if not isinstance(check, dict):
        return []
    raw = check.get("series")
    if not isinstance(raw, list):
        raw = (check.get("metrics") or {}).get("series") if isinstance(check.get("metrics"), dict) else None
    if not isinstance(raw, list):
        return []
    samples = []
    for item in raw[:SERIES_CAP]:
        if isinstance(item, dict) and _number(item.get("t")) is not None:
            samples.append({field: _number(item.get(field)) for field in SERIES_FIELDS})
    return samples


def report_series(report):
    """The sustained-load series of a report ([] when it has none)."""
    for check in (report or {}).get("checks") or []:
        if isinstance(check, dict) and check.get("id") == SUSTAINED_CHECK:
            return series_of(check)
    return []


def series_csv(samples):
    """The series as CSV, one row per sample, SERIES_FIELDS as the header."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=SERIES_FIELDS, lineterminator="\n")
    writer.writeheader()
    for sample in samples:
        writer.writerow({k: "" if sample.get(k) is None else sample[k] for k in SERIES_FIELDS})
    return out.getvalue()
