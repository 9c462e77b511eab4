"""Local transport: the dashboard's own host, no SSH; the same protocol as ssh.py."""

import contextlib
import os
import selectors
import signal
import subprocess
import tempfile
import time

from cudaweb.remote.transports.base import ExecResult, TimedOut, Unreachable, agent_command, read_bounded

BACKSTOP_S = 20  # coreutils timeout acts first; this is the backstop


class _Pipes:
    """The agent's stdout and stderr pipes, for read_bounded."""

    def __init__(self, popen):
        self.selector = selectors.DefaultSelector()
        self.selector.register(popen.stdout, selectors.EVENT_READ, "out")
        self.selector.register(popen.stderr, selectors.EVENT_READ, "err")
        self.open = 2

    def read(self, timeout):
        chunks = []
        for key, _ in self.selector.select(timeout=timeout):
            chunk = os.read(key.fileobj.fileno(), 65536)
            if chunk:
                chunks.append((key.data, chunk))
            else:
                self.selector.unregister(key.fileobj)
                self.open -= 1
        return chunks

    def done(self):
        return self.open == 0

    def close(self):
        self.selector.close()


STALE_PART_S = 3600


def _stale_parts_remove(cache_dir, now=None):
    """Partial copies of uploads that never finished (a worker killed mid-copy), older than an hour."""
    now = time.time() if now is None else now
    for entry in os.scandir(cache_dir):
        if entry.name.startswith("cudaprobe-") and entry.name.endswith(".part"):
            with contextlib.suppress(FileNotFoundError):
                if now - entry.stat(follow_symlinks=False).st_mtime > STALE_PART_S:
                    os.unlink(entry.path)


class LocalTransport:
    def __init__(self, cache_dir, output_cap=2**21):
        self.cache_dir = cache_dir
        self.output_cap = output_cap

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def upload_agent(self, payload, digest):
        os.makedirs(self.cache_dir, mode=0o700, exist_ok=True)
        path = os.path.join(self.cache_dir, "cudaprobe-%s.pyz" % digest[:16])
        if not (os.path.exists(path) and os.path.getsize(path) == len(payload)):
            _stale_parts_remove(self.cache_dir)
            # a name of this upload's own: runs starting together on an empty cache each write theirs, and the
            # last rename wins with the same bytes
            fd, partial = tempfile.mkstemp(dir=self.cache_dir, prefix=os.path.basename(path) + ".", suffix=".part")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(payload)
                os.replace(partial, path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(partial)
                raise
        return path

    def run_command(self, argv, timeout_s=30, stdin=None):
        """Run a short command (argv, no shell) and return its ExecResult; `stdin` (bytes) is its input."""
        try:
            done = subprocess.run(list(argv), capture_output=True, timeout=timeout_s,
                                  **({"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}))
        except OSError as exc:
            raise Unreachable("cannot start %s: %s" % (argv[0], exc))
        except subprocess.TimeoutExpired:
            raise TimedOut("%s ran past %d s" % (argv[0], timeout_s))
        return ExecResult(done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))

    def run_agent(self, python, agent_path, agent_args, limit_s, on_stderr_line=None, env=None, stop=None):
        argv = agent_command(python, agent_path, agent_args, limit_s, env)
        try:
            # stdin stays open, unwritten, for as long as this process lives: an agent run with --exit-with-stdin
            # stops when it closes.
            popen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.PIPE,
                                     start_new_session=True)
        except OSError as exc:
            raise Unreachable("cannot start %s: %s" % (python, exc))
        deadline = time.monotonic() + limit_s + BACKSTOP_S
        pipes = _Pipes(popen)
        try:
            stdout, stderr, truncated = read_bounded(pipes, limit_s, deadline, self.output_cap, on_stderr_line, stop)
            status = popen.wait(timeout=max(1, deadline - time.monotonic()))
        finally:
            pipes.close()
            popen.stdin.close()
            try:
                os.killpg(popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            popen.wait()
        return ExecResult(status, stdout, stderr, truncated)
