"""Filters that show stored data as people read it."""

import json

from django import template
from django.core.serializers.json import DjangoJSONEncoder

register = template.Library()


@register.filter
def as_json(value):
    """A JSON value as JSON text (keys sorted), not Python's repr; autoescaping still applies."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, cls=DjangoJSONEncoder)
