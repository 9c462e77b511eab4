"""Burn-in mode: its lengths, the agent's time budget and arguments, and the stress series its report carries."""

import bisect
import csv
import io
import math

from django.conf import settings

from agents.cudaprobe import dcgmi
from cudaweb.common import numbers

DEFAULT_SECONDS = 300
MIN_SECONDS = 60
MAX_SECONDS = 24 * 3600
# What the pages offer; "custom" takes any length between MIN_SECONDS and MAX_SECONDS.
DURATIONS = ((300, "5 min"), (1800, "30 min"), (7200, "2 h"))
SUSTAINED_CHECK = "stress.sustained"
# The flattened view of the agent's series (stress.sustained's "series": {"gpus": {"<index>": {"t": [...], "sm_mhz":
# [...], ...}}}, agents/cudaprobe/burnin.py): one sample of one GPU at one moment, for the plots and the CSV.
SERIES_FIELDS = ("t", "gpu", "sm_clock_mhz", "mem_clock_mhz", "power_w", "power_limit_w", "temp_c", "mem_temp_c",
                 "throttle", "util", "tflops")
SERIES_COLUMNS = (("sm_clock_mhz", "sm_mhz"), ("mem_clock_mhz", "mem_mhz"), ("power_w", "power_w"),
                  ("temp_c", "temp_gpu_c"), ("mem_temp_c", "temp_mem_c"), ("throttle", "reasons"), ("util", "util"))
SERIES_CAP = 2000  # points per GPU kept from a report (the agent sends 150; host output is untrusted)
GPUS_CAP = 64


def is_burnin(mode):
    return mode == "burnin"


def seconds_of(mode, burnin_seconds):
    """The burn-in length a run of `mode` uses (None outside burn-in mode)."""
    if not is_burnin(mode):
        return None
    return burnin_seconds or DEFAULT_SECONDS


def agent_budget_s(node, mode, burnin_seconds=None):
    """Seconds the agent may run: the node's own budget or the mode's (plus DCGM's diagnostic budget where the node
    runs it), and in burn-in mode the burn-in's length and a margin on top (the memory test and the consistency
    check follow the sustained load)."""
    base = node.agent_timeout_s or settings.CUDAWEB_AGENT_TIMEOUT[mode]
    if getattr(node, "dcgm_level", "") and not node.agent_timeout_s:  # dcgmi diag's own budget on top
        base += dcgmi.BUDGET_S[dcgmi.LEVELS[node.dcgm_level]]
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
    """A finite number, else None: JSON from a host may carry NaN or Infinity, which no plot or CSV cell wants."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _column(gpu, key):
    values = gpu.get(key)
    return [_number(v) for v in values[:SERIES_CAP]] if isinstance(values, list) else []


def _nearest(windows, times, t):
    """The value of the window whose time is nearest `t` (windows sorted by time), or None."""
    if not windows:
        return None
    i = bisect.bisect_left(times, t)
    candidates = [j for j in (i - 1, i) if 0 <= j < len(windows)]
    return windows[min(candidates, key=lambda j: abs(times[j] - t))][1]


def series_of(check):
    """The samples of a stress.sustained check, flattened to SERIES_FIELDS (one per GPU and moment, by GPU then
    time), numbers only: what a report from a host says is not trusted. Throughput has its own timeline
    (tflops_t): each sample takes the window that ends nearest its time. The power limit is the check's metric
    power_limit_w.gpu<index>."""
    series = check.get("series") if isinstance(check, dict) else None
    gpus = series.get("gpus") if isinstance(series, dict) else None
    if not isinstance(gpus, dict):
        return []
    metrics = check.get("metrics") if isinstance(check.get("metrics"), dict) else {}
    samples = []
    for name in sorted(gpus, key=lambda k: (len(str(k)), str(k)))[:GPUS_CAP]:
        gpu, index = gpus[name], numbers.integer(name)
        if not isinstance(gpu, dict) or index is None:
            continue
        times = _column(gpu, "t")
        columns = {field: _column(gpu, key) for field, key in SERIES_COLUMNS}
        windows = sorted((t, v) for t, v in zip(_column(gpu, "tflops_t"), _column(gpu, "tflops")) if t is not None)
        window_times = [t for t, _ in windows]
        limit = _number(metrics.get("power_limit_w.gpu%d" % index))
        for i, t in enumerate(times):
            if t is None:
                continue
            sample = {"t": t, "gpu": index, "power_limit_w": limit, "tflops": _nearest(windows, window_times, t)}
            sample.update({field: values[i] if i < len(values) else None for field, values in columns.items()})
            samples.append(sample)
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
