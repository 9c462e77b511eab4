"""{% run_waterfall report run.duration_s %}: the run page's timing waterfall (cudaweb/fleet/waterfall.py lays it
out); the run's whole duration, when given, is named beside the agent's own so the two figures are not confused."""

from django import template

from cudaweb.fleet.waterfall import run_waterfall as layout

register = template.Library()


@register.inclusion_tag("runs/_waterfall.html")
def run_waterfall(report, duration_s=None):
    return {"waterfall": layout(report=report), "duration_s": duration_s}
