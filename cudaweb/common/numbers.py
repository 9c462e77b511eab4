"""Numbers read from text a host (or a file someone gave us) wrote: ASCII digits only, of a bounded length, so that
no such text makes int() or float() raise. str.isdigit() is no guard: "²" is a digit to it and no number to int(),
"٣" is a digit of another script, and Python refuses to convert an integer of more than 4300 digits."""

import re

MAX_DIGITS = 18  # any index, count, port or time in milliseconds a host reports; a 64-bit integer holds them all
_INTEGER = re.compile(rb"[0-9]{1,%d}" % MAX_DIGITS)  # [0-9], never \d: \d takes every script's digits
_DECIMAL = re.compile(rb"-?[0-9]{1,%d}(?:\.[0-9]{1,%d})?" % (MAX_DIGITS, MAX_DIGITS))


def _ascii(text):
    if isinstance(text, bytes):
        return text
    if isinstance(text, str) and text.isascii():
        return text.encode("ascii")
    return None


def integer(text):
    """The int that `text` (str or bytes: the digits 0-9 alone, at most MAX_DIGITS of them) writes, else None."""
    data = _ascii(text)
    return int(data) if data is not None and _INTEGER.fullmatch(data) else None


def decimal(text):
    """The float that `text` (an optional minus, digits 0-9, an optional fraction, each part at most MAX_DIGITS)
    writes, else None."""
    data = _ascii(text)
    return float(data) if data is not None and _DECIMAL.fullmatch(data) else None
