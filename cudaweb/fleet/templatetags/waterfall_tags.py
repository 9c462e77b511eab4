"""{% run_waterfall report run %}: the run page's timing waterfall (cudaweb/fleet/waterfall.py lays it out), with
the dashboard's own steps when the run is given and has them; the run's whole duration is named beside the agent's
own so the two figures are not confused."""

from django import template

from cudaweb.fleet.waterfall import run_waterfall as layout
from cudaweb.validation.dashboard_timing import run_steps

register = template.Library()


@register.inclusion_tag("runs/_waterfall.html")
def run_waterfall(report, run=None):
    return {"waterfall": layout(report=report, steps=run_steps(run) if run is not None else None),
            "duration_s": run.duration_s if run is not None else None}
