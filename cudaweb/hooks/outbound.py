"""Text that leaves for another system, made clean in one place, a function per channel. Host text (a node's name, a
check's summary, a cause) reaches every channel as one line without control characters (C0, DEL, C1, and the
terminal escape sequences a coloured log carries), then under the channel's own rules: a Slurm drain reason in
printable ASCII, a Kubernetes message or annotation value, a webhook's JSON text, and Slack mrkdwn in which host
text can neither mention, link nor format. Our own wording around it keeps its markup."""

import re
import unicodedata

# Whole escape sequences, so that "\x1b[31m" leaves nothing ("[31m" would stay if only ESC went): CSI (ESC [ or
# C1 CSI, parameters, final byte), OSC (ESC ] or C1 OSC up to BEL or ST), and ESC with one character. Bounded
# repetitions: linear time on any text.
_ESCAPE = re.compile(r"(?:\x1b\[|\x9b)[0-?]{0,64}[ -/]{0,16}[@-~]?"
                     r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]{0,1024}(?:\x07|\x1b\\|\x9c)?|\x1b[ -~]?")
# Unicode's control (C0, DEL, C1), format (bidirectional overrides, zero-width characters) and surrogate categories:
# nothing a reader sees, and some of them reorder or hide what a reader sees.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs"})
# Slack's markers of bold, italics, strike and code; inside a word (gpu_health, a*b) they format nothing in Slack.
_MARKUP = re.compile(r"`|(?<![A-Za-z0-9])[*_~]|[*_~](?![A-Za-z0-9])")
# Slack has no escape for them: look-alikes that format nothing (asterisk operator, modifier letter low macron,
# tilde operator, modifier letter grave accent).
_LOOKALIKE = {"*": "\u2217", "_": "\u02cd", "~": "\u223c", "`": "\u02cb"}


def line(text, cap=None):
    """`text` as one line: escape sequences and invisible characters removed, each run of whitespace (newlines
    included) one space; at most `cap` characters."""
    text = _ESCAPE.sub("", str(text if text is not None else ""))
    text = " ".join("".join(char for char in text if char.isspace() or unicodedata.category(char) not in _INVISIBLE)
                    .split())
    return text if cap is None else text[:cap]


def slurm_reason(text, cap):
    """A drain reason for `scontrol update Reason=`: one line of printable ASCII (any other character "?"), double
    quotes made single (scontrol takes them as its own quoting and drops them, seen with Slurm 22.05), at most `cap`
    characters."""
    return line(text).replace('"', "'").encode("ascii", "replace").decode("ascii")[:cap]


def kubernetes_text(text, cap):
    """A Node condition's or an Event's message, or an annotation's value: one line of at most `cap` characters."""
    return line(text, cap)


def webhook_text(text):
    """A string of a webhook's JSON: one line, with &, < and > written as Slack's entities, since a Slack-compatible
    receiver may show any string of it and reads <!channel> and <url|label> as its own syntax."""
    return line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def webhook_data(value):
    """webhook_text of every string in `value` (dicts and lists walked; keys are ours)."""
    if isinstance(value, str):
        return webhook_text(value)
    if isinstance(value, dict):
        return {key: webhook_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [webhook_data(item) for item in value]
    return value


def slack_mrkdwn(text):
    """Host text inside a Slack mrkdwn message: webhook_text, with each *, _, ~ or ` that could open or close bold,
    italics, strike or code replaced by a look-alike."""
    return _MARKUP.sub(lambda match: _LOOKALIKE[match.group()], webhook_text(text))
