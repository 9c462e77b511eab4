from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def mark_lines(text, matched):
    """Escape `text` line by line and wrap the lines a playbook matched in <mark> (host output is untrusted)."""
    wanted = {line.strip() for line in matched or ()}
    out = []
    for line in (text or "").splitlines():
        escaped = escape(line)
        out.append("<mark>%s</mark>" % escaped if line.strip()[:400] in wanted and line.strip() else escaped)
    return mark_safe("\n".join(out))


@register.filter
def get_item(mapping, key):
    return (mapping or {}).get(key)
