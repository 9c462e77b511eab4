"""How the burn-in's sustained load is judged: one GPU's series of throughput windows and NVML samples, then the
GPUs of a host against each other. Pure functions of the recorded series, so the rules replay on real runs.

What "normal" is was learnt on a healthy H200 under 16384^3 bf16 matmuls (shared/reference/h200x1/
burnin_120s.json and tests/fixtures/real/burnin/): at its 700 W limit, SM clock ~1425 of 1980 MHz, memory clock
at its maximum, the SW power cap the only reason (0x4), 732 TFLOP/s in the first second and ~676 from then on,
flat to within 1 %. A GPU at its power limit running below its maximum clock is therefore not a finding; a GPU
below its maximum clock with power to spare and no reason given is.
"""

import statistics

from agents.cudaprobe import expectations
from agents.cudaprobe.judge import Findings, slow_siblings
from agents.cudaprobe.sampler import reason_names

WARMUP_S = 10.0  # clocks settle at the power cap within the first seconds (732 -> ~676 TFLOP/s)
EDGE_S = 60.0  # "the first minute" and "the last minute" compared for decay
DECAY_WARN, DECAY_FAIL = 0.10, 0.25
SAG_CLOCK_RATIO = 0.85  # SM clock below this share of its maximum ...
SAG_POWER_RATIO = 0.90  # ... with power below this share of its limit ...
SAG_SHARE = 0.10  # ... in at least this share of the load samples
MEM_CLOCK_RATIO = 0.95  # HBM runs at its maximum clock under load
THROTTLE = {  # reason bit: (signature, what it means)
    0x8: ("throttle_hw_slowdown", "HW slowdown (the board asserted slowdown: power, thermal or an external signal)"),
    0x20: ("throttle_thermal", "SW thermal slowdown (the driver holds clocks down for temperature)"),
    0x40: ("throttle_thermal", "HW thermal slowdown (the GPU or its memory is too hot)"),
    0x80: ("throttle_power_brake", "HW power brake (an external power-brake signal)"),
}
# Slowdown samples that fail: 3, however long the burn-in. 1-2 warn (a moment's HW slowdown or power brake is worth
# a look, not a pulled node). A share of the samples is not used: it only ever made a short burn-in stricter (2 of a
# 60 s run's 50 samples are 4 %), and the same two events must not fail a 60 s run and warn a 300 s one (ADR 0011).
THROTTLE_FAIL_SAMPLES = 3
SERIES_POINTS = 150  # per GPU in the report; the full series stays in --record


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def load_samples(gpu):
    """The NVML samples taken while the load ran, after its warm-up."""
    end = gpu.get("seconds") or 0
    return [s for s in gpu["sampler"]["samples"] if WARMUP_S <= s["t"] <= end + 1]


def edges(windows, seconds):
    """(first minute, last minute) of throughput windows after the warm-up; quarters of a run shorter than
    2 minutes + warm-up."""
    loaded = [w for w in windows if w["t"] > WARMUP_S]
    span = max(0.0, seconds - WARMUP_S)
    edge = EDGE_S if span >= 2 * EDGE_S else span / 4
    first = [w["tflops"] for w in loaded if w["t"] <= WARMUP_S + edge]
    last = [w["tflops"] for w in loaded if w["t"] > seconds - edge]
    return first, last


def foreign_pids(gpu, ours):
    """{pid: first t} of processes other than ours seen computing on this GPU during the load."""
    seen = {}
    me = gpu["sampler"].get("self_pid")
    mine = set(ours) | {me}
    for s in gpu["sampler"]["samples"]:
        pids = s.get("pids")
        if not pids:
            continue
        pids = set(pids)
        if pids & mine:
            others = pids - mine
        else:  # NVML shows host PIDs and none is ours (another PID namespace): more than one means someone else
            others = pids if len(pids) > 1 else set()
        for pid in others:
            seen.setdefault(pid, s["t"])
    return seen


def judge_gpu(findings, gpu, sku, ours=()):
    """Judge one GPU's sustained run; returns its metrics (numbers) and whether its throughput can be compared."""
    index, info = gpu["index"], gpu["sampler"].get("info") or {}
    samples, windows, seconds = load_samples(gpu), gpu["windows"], gpu["seconds"]
    label = "GPU %s" % index
    tflops = [w["tflops"] for w in windows if w["t"] > WARMUP_S] or [w["tflops"] for w in windows]
    median_tflops = _median(tflops) or 0.0
    metrics = {"sustained_bf16_tflops": median_tflops, "first_window_tflops": windows[0]["tflops"] if windows else 0}
    first, last = edges(windows, seconds)
    decay = 1 - _median(last) / _median(first) if first and last and _median(first) else 0.0
    metrics["throughput_decay_pct"] = 100 * decay
    notes = gpu["sampler"].get("notes") or []
    for note in notes:
        findings.note("%s: %s" % (label, note))
    if not gpu["sampler"]["samples"]:  # a burn-in that watched nothing but throughput is no acceptance under load
        findings.add("warn", "%s: no NVML readings under load (%s): clocks, power, throttling, ECC and Xid were not "
                     "watched, only throughput" % (label, "; ".join(notes)[:300] or "the sampler took none"),
                     "burnin_unmonitored")

    busy = foreign_pids(gpu, ours)
    if busy:
        when = min(busy.values())
        findings.add("warn", "%s: process %s started computing on it %.0f s into the burn-in (throughput %.0f -> "
                     "%.0f TFLOP/s): its figures are not judged, re-run when idle" % (
                         label, ", ".join(map(str, sorted(busy))), when, _median(first) or 0, _median(last) or 0),
                     "gpu_busy")

    if sku:
        _judge_limits(findings, label, info, sku)
    if samples:
        _judge_samples(findings, label, samples, info, metrics)
    start, end = gpu["sampler"]["samples"][:1], gpu["sampler"]["samples"][-1:]
    if start and end:
        _judge_counters(findings, label, start[0], end[0], metrics)
    for event in gpu["sampler"].get("xids") or []:
        findings.add("fail", "%s: Xid %s at %.0f s under load" % (label, event["xid"], event["t"]), "xid_under_load")

    if busy:
        return metrics, False
    if decay > DECAY_FAIL or decay > DECAY_WARN:
        findings.add("fail" if decay > DECAY_FAIL else "warn",
                     "%s: throughput fell %.0f%% from the first minute to the last (%.0f -> %.0f TFLOP/s)" % (
                         label, 100 * decay, _median(first), _median(last)), "throughput_decay")
    expected = expectations.expected_sustained(sku) if sku else None
    if expected is not None:
        status, ratio = expectations.judge(median_tflops, expected)
        findings.note(expectations.describe("%s sustained bf16" % label, median_tflops, expected, ratio, "TFLOP/s"))
        if status != "pass":
            findings.add(status, "%s sustained bf16 %.0f TFLOP/s is %.0f%% of the %.0f its model holds under "
                         "sustained load" % (label, median_tflops, 100 * ratio, expected.value),
                         "sustained_below_expected")
    return metrics, True


def _judge_limits(findings, label, info, sku):
    """A power limit or maximum clock set below the model's own explains a lower sustained figure: said as such."""
    limit, max_sm = info.get("power_limit_w"), info.get("max_sm_mhz")
    if limit and limit < 0.95 * sku["power_w"]:
        findings.add("warn", "%s: power limit %.0f W, the %s's is %d W: it is held lower under load" % (
            label, limit, sku["key"], sku["power_w"]), "power_limit_lowered")
    if max_sm and max_sm < 0.95 * sku["boost_mhz"]:
        findings.add("warn", "%s: maximum SM clock %d MHz, the %s boosts to %d MHz" % (
            label, max_sm, sku["key"], sku["boost_mhz"]), "max_clock_lowered")


def _judge_samples(findings, label, samples, info, metrics):
    sm = [s["sm_mhz"] for s in samples if s.get("sm_mhz") is not None]
    power = [s["power_w"] for s in samples if s.get("power_w") is not None]
    metrics.update({k: v for k, v in (
        ("sm_mhz_median", _median(sm)), ("sm_mhz_min", min(sm) if sm else None),
        ("mem_mhz_min", min((s["mem_mhz"] for s in samples if s.get("mem_mhz") is not None), default=None)),
        ("power_w_median", _median(power)), ("power_limit_w", info.get("power_limit_w")),
        ("max_sm_mhz", info.get("max_sm_mhz")),
        ("temp_gpu_max_c", max((s["temp_gpu_c"] for s in samples if s.get("temp_gpu_c") is not None), default=None)),
        ("temp_mem_max_c", max((s["temp_mem_c"] for s in samples if s.get("temp_mem_c") is not None), default=None)),
        ("samples", len(samples))) if v is not None})
    seen = 0
    for s in samples:
        seen |= s.get("reasons") or 0
    metrics["reasons_seen"] = seen
    if seen:
        findings.note("%s clock-event reasons seen under load: %s" % (label, ", ".join(reason_names(seen))))
    for bit, (signature, what) in sorted(THROTTLE.items()):
        hits = [s["t"] for s in samples if (s.get("reasons") or 0) & bit]
        if hits:
            status = "fail" if len(hits) >= THROTTLE_FAIL_SAMPLES else "warn"
            findings.add(status, "%s: %s in %d of %d samples under load (first at %.0f s)" % (
                label, what, len(hits), len(samples), hits[0]), signature)
    max_sm, limit = info.get("max_sm_mhz"), info.get("power_limit_w")
    if max_sm and limit:
        sagging = [s for s in samples if s.get("sm_mhz") is not None and s.get("power_w") is not None
                   and s["sm_mhz"] < SAG_CLOCK_RATIO * max_sm and s["power_w"] < SAG_POWER_RATIO * limit
                   and not (s.get("reasons") or 0) & 0x4]
        if len(sagging) >= max(2, SAG_SHARE * len(samples)):
            findings.add("warn", "%s: SM clock %d of %d MHz at %.0f of %.0f W with no power cap or other reason, in "
                         "%d of %d samples: clocks sag beyond what the power limit explains" % (
                             label, _median([s["sm_mhz"] for s in sagging]), max_sm,
                             _median([s["power_w"] for s in sagging]), limit, len(sagging), len(samples)),
                         "clock_sag_unexplained")
    max_mem = info.get("max_mem_mhz")
    low_mem = [s for s in samples
               if max_mem and s.get("mem_mhz") is not None and s["mem_mhz"] < MEM_CLOCK_RATIO * max_mem]
    if max_mem and len(low_mem) >= max(2, SAG_SHARE * len(samples)):
        findings.add("warn", "%s: memory clock %d of %d MHz under load in %d of %d samples" % (
            label, min(s["mem_mhz"] for s in low_mem), max_mem, len(low_mem), len(samples)), "memory_clock_low")


def _judge_counters(findings, label, first, last, metrics):
    for key, status, signature, what in (
            ("ecc_uncorrected_volatile", "fail", "ecc_uncorrected_under_load", "uncorrectable ECC errors"),
            ("ecc_corrected_volatile", "warn", "ecc_corrected_under_load", "correctable ECC errors"),
            ("pcie_replay", "warn", "pcie_replay_under_load", "PCIe replays")):
        if first.get(key) is None or last.get(key) is None:
            continue
        grown = last[key] - first[key]
        metrics[key + "_new"] = grown
        if grown > 0:
            findings.add(status, "%s: %d new %s during the burn-in (%d -> %d)" % (
                label, grown, what, first[key], last[key]), signature)


def xid_events_delivered(gpu):
    """Whether NVML delivered Xid events to this GPU's sampler through the load. A result from before the sampler
    said so (a replayed record): delivered unless NVML was absent or a note says the events were not."""
    sampler = gpu["sampler"]
    if "xid_events" in sampler:
        return bool(sampler["xid_events"])
    notes = sampler.get("notes") or []
    return bool(sampler["samples"]) and not any(note.startswith("NVML Xid events not delivered") for note in notes)


def judge_xid_watch(findings, gpus, kernel_log_unread):
    """Say so where no Xid could have been seen during the load: NVML delivered no Xid events and the kernel log
    could not be read (`kernel_log_unread`: why, or None where it was read before and after)."""
    blind = [g for g in gpus if not xid_events_delivered(g)]
    if not blind or not kernel_log_unread:
        return
    why = "; ".join(sorted({"; ".join(g["sampler"].get("notes") or []) or "NVML unavailable" for g in blind}))
    findings.add("warn", "GPU %s: Xid errors were not watched during the burn-in: NVML delivered no Xid events (%s) "
                 "and the kernel log could not be read (%s); an Xid under load would have gone unseen" % (
                     ", ".join(str(g["index"]) for g in blind), why[:300], kernel_log_unread[:200]), "xid_unwatched")


def judge_sustained(gpus, sku, ours=()):
    """(Findings, metrics) of every GPU's sustained run, siblings compared on their median throughput."""
    findings, metrics, comparable = Findings(), {}, {}
    for gpu in sorted(gpus, key=lambda g: g["index"]):
        gpu_metrics, ok = judge_gpu(findings, gpu, sku, ours)
        for key, value in gpu_metrics.items():
            metrics["%s.gpu%s" % (key, gpu["index"])] = round(value, 2)
        if ok:
            comparable[gpu["index"]] = gpu_metrics["sustained_bf16_tflops"]
    for key in ("sustained_bf16_tflops",):
        values = [metrics["%s.gpu%s" % (key, g["index"])] for g in gpus]
        metrics[key] = min(values)
    for key, pick in (("sm_mhz_median", min), ("power_w_median", min), ("temp_gpu_max_c", max),
                      ("temp_mem_max_c", max), ("throughput_decay_pct", max)):
        values = [metrics.get("%s.gpu%s" % (key, g["index"])) for g in gpus]
        values = [v for v in values if v is not None]
        if values:
            metrics[key] = pick(values)
    siblings = slow_siblings(comparable, ratio=0.9)
    if siblings:
        findings.add("warn", "GPU %s slower than its siblings under sustained load (%s TFLOP/s)" % (
            siblings, ", ".join("%.0f" % comparable[g] for g in sorted(comparable))), "gpu_slower_than_siblings")
    return findings, metrics


def downsample(gpu, points=SERIES_POINTS):
    """The GPU's series for the run page: at most `points` per series, means per time bucket (reasons OR-ed)."""
    # the last sample comes a moment after `seconds`: the span covers it, so that no series passes `points`
    span = max([gpu.get("seconds") or 1] + [s["t"] for s in gpu["sampler"]["samples"][-1:]] +
               [w["t"] for w in gpu["windows"][-1:]])
    bucket = max(1.0, span / (points - 1))
    out = {"bucket_s": round(bucket, 2)}
    keys = ("sm_mhz", "mem_mhz", "power_w", "temp_gpu_c", "temp_mem_c", "util")
    buckets = {}
    for s in gpu["sampler"]["samples"]:
        buckets.setdefault(int(s["t"] // bucket), []).append(s)
    order = sorted(buckets)
    out["t"] = [round(b * bucket, 1) for b in order]
    for key in keys:
        column = [_mean([s.get(key) for s in buckets[b]]) for b in order]
        if any(v is not None for v in column):
            out[key] = column
    out["reasons"] = [_or([s.get("reasons") for s in buckets[b]]) for b in order]
    windows = {}
    for w in gpu["windows"]:
        windows.setdefault(int(w["t"] // bucket), []).append(w["tflops"])
    out["tflops_t"] = [round(b * bucket, 1) for b in sorted(windows)]
    out["tflops"] = [round(statistics.mean(windows[b]), 1) for b in sorted(windows)]
    return out


def _mean(values):
    values = [v for v in values if v is not None]
    return round(statistics.mean(values), 1) if values else None


def _or(values):
    mask = 0
    for v in values:
        mask |= v or 0
    return mask
