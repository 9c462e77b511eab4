"""The run page's waterfall (issue 22): where a run's time went, drawn from the report's timing fields as SVG
rectangles with classes only (the CSP allows no inline style), for a real H200 report of the current agent."""

import re

from django.urls import reverse

from cudaweb.fleet.waterfall import WIDTH, run_waterfall
from cudaweb.nodes.models import Node
from tests.drift.helpers import real_report, stored_run

TIMED = "h200-gpus1-standard.json"  # recorded by the agent since issue 22: started_s, tasks, timing


def _section(page):
    match = re.search(r'<details class="waterfall" id="waterfall">.*?</details>', page, re.S)
    assert match, "no waterfall on the page"
    return match.group(0)


def test_the_run_page_draws_each_check_and_its_gpu_tasks_split_into_setup_and_measured(operator_client):
    report = real_report(TIMED)
    run = stored_run(Node.objects.create(name="h200-timed", transport="local"), report)
    section = _section(operator_client.get(reverse("runs:run_detail", args=[run.id])).content.decode())
    assert "train.resnet18" in section and "gpu_train" in section and "train worker, rank 0" in section
    assert 'class="wf-measured"' in section and 'class="wf-setup"' in section and 'class="wf-preload"' in section
    assert "style=" not in section and "<script" not in section
    train = next(c for c in report["checks"] if c["id"] == "train.resnet18")
    assert "%.2f s" % train["duration_s"] in section


def test_a_report_without_timing_draws_no_waterfall(operator_client):
    run = stored_run(Node.objects.create(name="h200-old", transport="local"), real_report("h200-gpus2-standard.json"))
    page = operator_client.get(reverse("runs:run_detail", args=[run.id])).content.decode()
    assert 'id="waterfall"' not in page and "h200-old" in page


def test_the_layout_stays_inside_its_box_whatever_the_report_says():
    report = real_report(TIMED)
    report["checks"][0].update(started_s=-50, duration_s=1e9, id="<b>x</b>" * 50)
    report["checks"][1]["tasks"] = [{"task": "t", "started_s": "soon", "wall_s": 1}, "junk",
                                    {"task": "u", "started_s": 1, "wall_s": 2, "task_s": 9, "setup_s": -3}]
    report["timing"] = {"workers": [{"rank": 0, "started_s": 0.0, "import_s": True}, 7]}
    layout = run_waterfall(report=report)
    bars = [bar for row in layout["rows"] for bar in row["bars"]]
    assert bars and all(0 <= bar["x"] <= WIDTH and 0 < bar["width"] <= WIDTH for bar in bars)
    assert all(len(row["label"]) <= 60 for row in layout["rows"])
    assert run_waterfall(report={"checks": "no"}) is None and run_waterfall(report=None) is None


def test_the_headline_counts_what_its_rows_count(operator_client):
    """The axis runs from the run's queueing to its report stored; the agent's share is the dashboard's row for it
    and its own clock the report's: each figure in the headline is one the rows show, never the axis called the
    agent's."""
    from datetime import timedelta

    run = stored_run(Node.objects.create(name="h200-marked", transport="local"), real_report(TIMED))
    queued = run.finished - timedelta(seconds=10.7)
    marks = {"transport_up": queued + timedelta(seconds=0.5), "agent_started": queued + timedelta(seconds=0.9),
             "report_received": queued + timedelta(seconds=10.56)}
    run.__class__.objects.filter(id=run.id).update(
        enqueued=queued, started=queued + timedelta(seconds=0.2),
        dashboard_timing={step: when.isoformat() for step, when in marks.items()})
    section = _section(operator_client.get(reverse("runs:run_detail", args=[run.id])).content.decode())
    headline = re.search(r'<summary id="waterfall-headline">(.*?)</summary>', section, re.S).group(1)
    agent_row = re.search(r"<td>dashboard: the agent</td><td>[^<]*</td><td>([0-9.]+) s</td>", section).group(1)
    assert agent_row == "9.66"
    assert "the run's 10.70 s" in headline and "the agent 9.66 s of it" in headline
    assert "%.2f s by the agent's own clock" % real_report(TIMED)["duration_s"] in headline
    assert "the agent's 10.7" not in headline
