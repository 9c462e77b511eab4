from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()

EVIDENCE_HEAD = 48 * 1024  # characters of a check's evidence shown inline: the start ...
EVIDENCE_TAIL = 16 * 1024  # ... and the end; the whole of it is a download (runs:check_evidence)


def clip(text):
    """(head, characters left out, tail): the evidence as the page shows it, cut at line ends."""
    text = text or ""
    if len(text) <= EVIDENCE_HEAD + EVIDENCE_TAIL:
        return text, 0, ""
    head = text[:EVIDENCE_HEAD]
    head = head[:head.rfind("\n") + 1] or head
    tail = text[-EVIDENCE_TAIL:]
    tail = tail[tail.find("\n") + 1:] or tail
    return head, len(text) - len(head) - len(tail), tail


@register.filter
def evidence_clipped(text):
    return clip(text)[1] > 0


@register.filter
def mark_lines(text, matched=None):
    """Escape `text` line by line and wrap the lines a playbook matched in <mark> (host output is untrusted);
    a long text shows its start and its end, with how much was left out between."""
    wanted = {line.strip() for line in matched or ()}
    head, omitted, tail = clip(text)

    def lines(part):
        for line in part.splitlines():
            escaped = escape(line)
            yield "<mark>%s</mark>" % escaped if line.strip()[:400] in wanted and line.strip() else escaped

    out = list(lines(head))
    if omitted:
        out.append("[... %d characters not shown here: download the whole evidence ...]" % omitted)
        out += lines(tail)
    return mark_safe("\n".join(out))


@register.filter
def get_item(mapping, key):
    return (mapping or {}).get(key)
