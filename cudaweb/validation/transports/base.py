"""What every transport returns or raises; plain Python, no Django."""


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


def agent_command(python, agent_path, agent_args, limit_s):
    """argv for the agent under coreutils timeout, so a hung agent dies on the host too."""
    return ["timeout", "-k", "10", str(int(limit_s)), python, agent_path] + list(agent_args)
