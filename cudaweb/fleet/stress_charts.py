"""The run page's burn-in plots: the stress.sustained series as SVG polylines computed here, so the page needs no
script and no chart library (templates/runs/_stress_series.html draws them)."""

import statistics

from cudaweb.validation.burnin import report_series

WIDTH, HEIGHT = 600, 110  # the SVG's viewBox; the stylesheet scales it to the page
MAX_POINTS = 600  # per GPU and panel: more would not show on a page's width
PANELS = (
    ("sm_clock_mhz", "SM clock", "MHz"),
    ("mem_clock_mhz", "Memory clock", "MHz"),
    ("power_w", "Power", "W"),
    ("temp_c", "GPU temperature", "°C"),
    ("mem_temp_c", "Memory temperature", "°C"),
    ("tflops", "Throughput", "TFLOP/s"),
)
# NVML's clock event (throttle) reasons, nvmlClocksEventReason* / nvmlClocksThrottleReason* in nvml.h
THROTTLE_REASONS = (
    (0x1, "GPU idle"), (0x2, "applications clocks setting"), (0x4, "SW power cap"), (0x8, "HW slowdown"),
    (0x10, "sync boost"), (0x20, "SW thermal slowdown"), (0x40, "HW thermal slowdown"),
    (0x80, "HW power brake slowdown"), (0x100, "display clock setting"),
)


def _thin(points):
    if len(points) <= MAX_POINTS:
        return points
    step = len(points) / float(MAX_POINTS)
    return [points[int(i * step)] for i in range(MAX_POINTS)]


def _panel(samples, key, title, unit, t0, span):
    values = [s[key] for s in samples if s[key] is not None]
    if not values:
        return None
    limits = sorted({s["power_limit_w"] for s in samples if s["power_limit_w"]}) if key == "power_w" else []
    low, high = min(values), max(values + limits)
    low = 0 if key in ("power_w", "tflops") else low
    if high <= low:  # a flat series (the memory clock, locked): drawn across the middle
        low, high = low - max(1, abs(low) * 0.05), high + max(1, abs(high) * 0.05)

    def x(t):
        return round((t - t0) / span * WIDTH, 1)

    def y(v):
        return round(HEIGHT - (v - low) / (high - low) * HEIGHT, 1)

    gpus = sorted({s["gpu"] if s["gpu"] is not None else 0 for s in samples})
    lines = []
    for gpu in gpus:
        points = _thin([(s["t"], s[key]) for s in samples
                        if (s["gpu"] if s["gpu"] is not None else 0) == gpu and s[key] is not None])
        if points:
            lines.append({"gpu": int(gpu), "points": " ".join("%s,%s" % (x(t), y(v)) for t, v in points),
                          "median": statistics.median(v for _, v in points), "last": points[-1][1]})
    return {"key": key, "title": title, "unit": unit, "low": low, "high": high, "lines": lines,
            "limits": [{"value": limit, "y": y(limit)} for limit in limits]}


def stress_panels(report):
    """{"panels": [...], "seconds": s, "gpus": n, "throttle": [names]} for a report with a burn-in series, else None."""
    samples = report_series(report)
    if not samples:
        return None
    times = [s["t"] for s in samples]
    t0, span = min(times), (max(times) - min(times)) or 1.0
    panels = [p for p in (_panel(samples, key, title, unit, t0, span) for key, title, unit in PANELS) if p]
    masks = {int(s["throttle"]) for s in samples if s["throttle"] is not None}
    seen = [name for bit, name in THROTTLE_REASONS if any(mask & bit for mask in masks)]
    return {"panels": panels, "seconds": round(span, 1), "samples": len(samples), "throttle": seen,
            "gpus": len({s["gpu"] for s in samples}), "width": WIDTH, "height": HEIGHT}
