"""Local transport: the dashboard's own host, no SSH; the same protocol as ssh.py."""

import os
import selectors
import signal
import subprocess
import time

from cudaweb.validation.transports.base import ExecResult, LineSplitter, TimedOut, Unreachable, agent_command


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
            partial = path + ".part"
            with open(partial, "wb") as fh:
                fh.write(payload)
            os.replace(partial, path)
        return path

    def run_agent(self, python, agent_path, agent_args, limit_s, on_stderr_line=None):
        argv = agent_command(python, agent_path, agent_args, limit_s)
        try:
            popen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        except OSError as exc:
            raise Unreachable("cannot start %s: %s" % (python, exc))
        stdout = bytearray()
        stderr = LineSplitter(on_stderr_line, self.output_cap)
        truncated = False
        deadline = time.monotonic() + limit_s + 20
        selector = selectors.DefaultSelector()
        selector.register(popen.stdout, selectors.EVENT_READ, "out")
        selector.register(popen.stderr, selectors.EVENT_READ, "err")
        try:
            open_streams = 2
            while open_streams:
                if time.monotonic() > deadline:
                    raise TimedOut("the agent ran past %d s" % limit_s, stdout.decode("utf-8", "replace"),
                                   stderr.text())
                for key, _ in selector.select(timeout=1.0):
                    chunk = os.read(key.fileobj.fileno(), 65536)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        open_streams -= 1
                    elif key.data == "out":
                        if len(stdout) < self.output_cap:
                            stdout += chunk[: self.output_cap - len(stdout)]
                        else:
                            truncated = True
                    else:
                        stderr.feed(chunk)
            status = popen.wait(timeout=max(1, deadline - time.monotonic()))
        finally:
            selector.close()
            try:
                os.killpg(popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            popen.wait()
        return ExecResult(status, stdout.decode("utf-8", "replace"), stderr.text(), truncated)
