class HookError(Exception):
    """A delivery that did not go through."""


class Transient(HookError):
    """Worth another try later: the receiver was down, busy or slow (a 5xx, a 429, a timeout, no route)."""


class Permanent(HookError):
    """Another try would fail the same way: a 4xx, a certificate not trusted, an SSH key refused."""
