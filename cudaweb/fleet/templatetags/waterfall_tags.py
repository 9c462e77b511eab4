"""{% run_waterfall report %}: the run page's timing waterfall (cudaweb/fleet/waterfall.py lays it out)."""

from django import template

from cudaweb.fleet.waterfall import run_waterfall as layout

register = template.Library()


@register.inclusion_tag("runs/_waterfall.html")
def run_waterfall(report):
    return {"waterfall": layout(report=report)}
