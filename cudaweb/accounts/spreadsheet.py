"""Cells a spreadsheet will not run: OWASP's CSV-injection advice for exports a person opens in Excel or LibreOffice.

A cell that starts with =, +, -, @, a tab or a carriage return is read as a formula (`-A1-A2`, `=HYPERLINK(...)`);
one quote in front makes it text. The audit log holds text other people chose (user names, node names, details), so
every cell of its export goes through here."""

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def inert_cell(value):
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text
