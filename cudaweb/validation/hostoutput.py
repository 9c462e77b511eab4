"""What a host printed, made safe for the database: PostgreSQL text and jsonb refuse NUL (and the lone surrogates
a JSON escape can make), so those are escaped before any column sees them; output that is binary, not text, is
told apart and kept only as a bounded, escaped sample."""

import re

BINARY_SHARE = 0.1  # over a tenth of undecodable or control characters: not text a person could read
LOOK_AT = 64 * 1024
SAMPLE_CHARS = 4096
_REFUSED = re.compile("[\x00\ud800-\udfff]")
_UNREADABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f\ufffd]")


def _escape(match):
    char = match.group()
    return "\\x00" if char == "\x00" else "\ufffd"


def text_for_db(text):
    """`text` with NUL written as the four characters \\x00 and lone surrogates replaced: storable anywhere."""
    return _REFUSED.sub(_escape, text) if text else text


def clean(value):
    """A parsed report (or progress event) with every string, keys included, made storable (text_for_db)."""
    if isinstance(value, str):
        return text_for_db(value)
    if isinstance(value, dict):
        return {text_for_db(k) if isinstance(k, str) else k: clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def looks_binary(text):
    """True when the start of `text` (decoded with replacement) is mostly bytes no text has."""
    head = text[:LOOK_AT]
    return bool(head) and ("\x00" in head or len(_UNREADABLE.findall(head)) > BINARY_SHARE * len(head))


def binary_sample(text, chars=SAMPLE_CHARS):
    """The first `chars` characters of binary output with everything unprintable escaped (\\xNN, \\uNNNN)."""
    out = []
    for char in text[:chars]:
        if char.isprintable() or char in "\n\t":
            out.append(char)
        elif ord(char) < 0x100:
            out.append("\\x%02x" % ord(char))
        else:
            out.append("\\u%04x" % ord(char))
    return "".join(out)
