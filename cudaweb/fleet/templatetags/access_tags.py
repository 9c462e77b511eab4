"""The rule table in the templates: show a button or form only to a user who may use it (the views enforce)."""

from django import template

from cudaweb.fleet.access import may

register = template.Library()


@register.filter
def may_post(user, view_name):
    """{% if user|may_post:"fleet:node_validate" %}: the user may send the form."""
    return may(user, view_name, "POST")


@register.filter
def may_open(user, view_name):
    """{% if user|may_open:"audit:list" %}: the user may open the page."""
    return may(user, view_name, "GET")
