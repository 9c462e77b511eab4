"""Numbers out of host text: ASCII digits of a bounded length, else None, never an exception."""

import pytest

from cudaweb.common import numbers


@pytest.mark.parametrize("text, number", [("0", 0), ("07", 7), (b"79", 79), ("9" * numbers.MAX_DIGITS, 10 ** 18 - 1)])
def test_ascii_digits_are_an_integer(text, number):
    assert numbers.integer(text) == number


@pytest.mark.parametrize("text", ["²", "٣", "１", "9" * 5000, "9" * (numbers.MAX_DIGITS + 1), "", " 1", "1 ", "+1",
                                  "-1", "1_000", "0x1f", "1.0", None, 3, b"\xb2"])
def test_anything_else_is_no_integer(text):
    """Each of these int() takes wrongly or refuses with an error ("²" passes str.isdigit(); 5000 digits are over
    Python's limit), or it is no text at all."""
    assert numbers.integer(text) is None


@pytest.mark.parametrize("text, number", [("36", 36.0), ("-5.5", -5.5), ("111.87", 111.87), (b"0.25", 0.25)])
def test_a_plain_decimal_is_a_float(text, number):
    assert numbers.decimal(text) == number


@pytest.mark.parametrize("text", ["1.2.3", "1e400", "inf", "nan", "²", ".5", "5.", "9" * 5000, "1,5", None])
def test_anything_else_is_no_decimal(text):
    assert numbers.decimal(text) is None
