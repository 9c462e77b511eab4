"""A run's headline figures as the pages show them: label, value, unit and, where the agent's data knows the GPU
model, what a healthy GPU of that model reaches ("681 of 682 TFLOP/s"). The expectations are the agent's own
(agents/cudaprobe/expectations.py), so the page and the agent's judgement never disagree on the reference."""

import math

from agents.cudaprobe import expectations
from cudaweb.drift.catalog import METRICS

HOST_COPY = ("h2d_pinned_gbs", "d2h_pinned_gbs")
DIGITS = {"TFLOP/s": "0", "img/s": "0", "GB/s": "1", "C": "0"}  # as precise as the figure is
UNITLESS = {"ddp_scaling": "of linear"}  # a ratio: said in words
SHOWN_AS = {"C": "°C"}


def display_unit(name, unit):
    """The unit a page prints for a catalogue metric."""
    return SHOWN_AS.get(unit, unit) or UNITLESS.get(name, "")


def expected_of(sku, metric):
    """What `metric` should reach on a healthy GPU of this SKU row (an expectations.Expected), or None where it
    depends on more than the model (P2P, NCCL: the links between the GPUs) or the table has no figure for it."""
    if sku is None:
        return None
    if metric in expectations.MATMUL_KEYS:
        return expectations.expected_matmul(sku, metric)
    if metric in HOST_COPY:
        return expectations.expected_host_copy(sku, metric)
    return expectations.expected_measured(sku, metric)


def run_figures(*, run):
    """[{name, label, unit, value, expected, judged, basis}] for each catalogue metric the run measured, in catalogue
    order; `judged` is the agent's own rule (pass | warn | fail against the expectation), None without one."""
    metrics = run.metrics if isinstance(run.metrics, dict) else {}
    inventory = run.inventory if isinstance(run.inventory, dict) else {}
    model = inventory.get("gpu_model")  # host output: any JSON type may come
    sku = expectations.sku_for(model) if isinstance(model, str) else None
    figures = []
    for name, metric in METRICS.items():
        value = metrics.get(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            continue
        expected = expected_of(sku, name)
        judged = expectations.judge(value, expected)[0] if expected is not None else None
        figures.append({"name": name, "label": metric.label, "unit": display_unit(name, metric.unit),
                        "value": value, "expected": expected.value if expected is not None else None,
                        "judged": judged, "basis": expected.basis if expected is not None else "",
                        "digits": DIGITS.get(metric.unit, "2")})
    return figures
