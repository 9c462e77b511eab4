"""What every transport returns or raises, and the one bounded read loop they share; plain Python, no Django."""

import re
import time


class TransportError(Exception):
    """Base of the failures that end a run before the agent could report."""


class Unreachable(TransportError):
    pass


class AuthFailed(TransportError):
    pass


class HostKeyMismatch(TransportError):
    pass


class HostKeyUnknown(TransportError):
    pass


class HostSetupError(TransportError):
    """The node let us log in but its SSH setup cannot take or start the agent (no exec channel, no writable home,
    a login shell that refuses commands, a copy that arrives changed). The message names the fix; the run ends in a
    node-side state (AGENT_ERROR), never as the dashboard's error."""


class Cancelled(TransportError):
    """The caller's stop event was set while the agent ran (another end of a network test could not start): the
    agent is ended, as on a timeout, and what it printed is dropped."""


class TimedOut(TransportError):
    def __init__(self, message, stdout="", stderr=""):
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr


class ExecResult:
    def __init__(self, exit_status, stdout, stderr, truncated=False):
        self.exit_status = exit_status
        self.stdout = stdout
        self.stderr = stderr
        self.truncated = truncated


class LineSplitter:
    """Turns stderr chunks into complete lines for the progress callback; keeps a capped copy."""

    def __init__(self, on_line, cap):
        self.on_line = on_line
        self.cap = cap
        self.pending = b""
        self.kept = bytearray()

    def feed(self, chunk):
        if len(self.kept) < self.cap:
            self.kept += chunk[: self.cap - len(self.kept)]
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            if self.on_line and len(line) < 64 * 1024:
                self.on_line(line.decode("utf-8", "replace"))
        if len(self.pending) > 64 * 1024:  # a line that long is not a progress event
            self.pending = b""

    def text(self):
        return bytes(self.kept).decode("utf-8", "replace")


ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def agent_command(python, agent_path, agent_args, limit_s, env=None):
    """argv for the agent under coreutils timeout, so a hung agent dies on the host too; `env` goes in front
    through env(1) (names checked here, values passed as single arguments: the SSH transport quotes each)."""
    prefix = []
    for name, value in sorted((env or {}).items()):
        if not ENV_NAME.match(name):
            raise ValueError("not an environment variable name: %r" % name)
        prefix.append("%s=%s" % (name, value))
    return (["env"] + prefix if prefix else []) + ["timeout", "-k", "10", str(int(limit_s)), python, agent_path] + \
        list(agent_args)


def read_bounded(streams, limit_s, deadline, output_cap, on_stderr_line=None, stop=None):
    """Read a running agent's stdout and stderr until both end; the one read loop of every transport.

    `streams` gives `read(timeout)` -> [("out" | "err", bytes)] and `done()`. stdout is kept up to `output_cap`
    bytes (more marks it truncated); stderr goes line by line to `on_stderr_line` and is kept capped. Past
    `deadline` (time.monotonic()) the agent is declared hung: TimedOut carries what it printed so far. Once `stop`
    (a threading.Event) is set, Cancelled is raised within a read's second. Returns (stdout text, stderr text,
    truncated).
    """
    stdout = bytearray()
    stderr = LineSplitter(on_stderr_line, output_cap)
    truncated = False
    while not streams.done():
        if time.monotonic() > deadline:
            raise TimedOut("the agent ran past %d s" % limit_s, stdout.decode("utf-8", "replace"), stderr.text())
        if stop is not None and stop.is_set():
            raise Cancelled("stopped by the caller after %s" % getattr(stop, "reason", "a stop was asked"))
        for name, chunk in streams.read(1.0):
            if name == "err":
                stderr.feed(chunk)
                continue
            room = output_cap - len(stdout)
            if room > 0:
                stdout += chunk[:room]
            truncated = truncated or len(chunk) > room
    return stdout.decode("utf-8", "replace"), stderr.text(), truncated
