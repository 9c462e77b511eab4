"""`make run`: the whole dashboard on embedded defaults (SQLite, embedded Redis, a worker, the web server).

A worker that dies is started again (its process group with it, so its beat is not left behind); Redis keeps its
queue on disk under var/redis. Only Ctrl-C, SIGTERM or the web server or Redis dying stop everything."""

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from cudaweb import local_state
from cudaweb.common import numbers
from cudaweb.cli import InputError
from cudaweb.embedded import free_port, start_redis, wait_for_port

# The worker's log level under make run: at INFO it printed beat's every tick (the loop's watch runs each 2 s) and
# each task received and done, ~100 lines a minute at idle, scrolling the admin password away. WARNING keeps what
# needs a look (a task that failed, a worker lost); CUDAWEB_WORKER_LOG_LEVEL=INFO shows the rest when debugging.
WORKER_LOG_LEVEL = "WARNING"
ADMIN_PASSWORD_FILE = "admin-password"  # under var/, mode 600: the generated password, until the admin changes it
CHANGE_ADMIN_PASSWORD = "python manage.py changepassword admin"
MAX_RESTARTS = 5  # within RESTART_WINDOW_S: a worker that cannot stay up is a fault to show, not to hide
RESTART_WINDOW_S = 300


def _stop(popen, timeout=10):
    """End a child and its process group (a worker's pool and beat)."""
    if popen.poll() is None:
        try:
            os.killpg(popen.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    popen.wait()


def web_command(port):
    """The web server of make run. No --insecure: runserver would then serve static files itself, past every
    middleware (no Content-Security-Policy, no nosniff); WhiteNoise serves them instead (settings)."""
    return [sys.executable, str(settings.BASE_DIR / "manage.py"), "runserver", "127.0.0.1:%d" % port, "--noreload"]


def worker_command():
    """The worker of make run, beat inside it (-B: one process on one machine, so scheduled revalidation runs under
    make run too), logging at WORKER_LOG_LEVEL unless CUDAWEB_WORKER_LOG_LEVEL says otherwise."""
    level = os.environ.get("CUDAWEB_WORKER_LOG_LEVEL", WORKER_LOG_LEVEL).upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise InputError("CUDAWEB_WORKER_LOG_LEVEL=%r is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL" % level)
    return [sys.executable, "-m", "celery", "-A", "cudaweb", "worker", "-B", "-l", level, "--concurrency", "2",
            "--schedule", str(local_state.VAR_DIR / "celerybeat-schedule")]


def admin_password_box(password):
    """The generated admin password framed, with the file that keeps it: printed last, after the server is up."""
    path = local_state.VAR_DIR / ADMIN_PASSWORD_FILE
    lines = ["created user admin, password: %s (shown once)" % password,
             "also kept in %s (mode 600); delete it once you have changed the password:" % path,
             "  %s" % CHANGE_ADMIN_PASSWORD]
    width = max(len(line) for line in lines)
    rule = "+" + "-" * (width + 2) + "+"
    return "\n".join([rule] + ["| %s |" % line.ljust(width) for line in lines] + [rule])


def _forward(stream, stopping):
    """Copy a child's stderr to ours, line by line, until `stopping` is set (then read and drop the rest)."""
    for line in iter(stream.readline, b""):
        if not stopping.is_set():
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()


def _env_port():
    text = os.environ.get("CUDAWEB_PORT", "8000")
    if numbers.integer(text) is None:
        raise InputError("CUDAWEB_PORT=%r is not a port number" % text)
    return numbers.integer(text)


def _port_free_or_exit(port, given_as):
    """Exit 2 naming the reason when 127.0.0.1:`port` cannot be ours (taken, or not a port); `given_as` is how the
    user gave it (--port 70000, CUDAWEB_PORT=70000), so the message names what they typed."""
    if not 0 < port < 65536:
        raise InputError("%s is not a TCP port (1-65535)" % given_as)
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # As runserver binds: a connection of our last run in TIME-WAIT (a minute after Ctrl-C) does not hold the port,
    # while a listener still does (Linux refuses the bind then, SO_REUSEADDR or not).
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind(("127.0.0.1", port))
    except OSError as exc:
        raise InputError("port %d on 127.0.0.1 is taken (%s): stop what listens there, or choose another port with "
                         "CUDAWEB_PORT=<port> make run" % (port, exc.strerror or exc)) from None
    finally:
        probe.close()


class Command(BaseCommand):
    help = "Run web, worker (with beat) and an embedded Redis on this machine; Ctrl-C stops all of them."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int,
                            help="the web server's port on 127.0.0.1 (default: CUDAWEB_PORT, else 8000)")

    def handle(self, *args, **options):
        port = options["port"] if options["port"] is not None else _env_port()
        worker_command()  # a bad CUDAWEB_WORKER_LOG_LEVEL fails here, before anything starts
        _port_free_or_exit(port, "--port %d" % port if options["port"] is not None else "CUDAWEB_PORT=%d" % port)  # before anything starts: another server there would answer for us
        self.children = {}
        self.stopping = threading.Event()
        try:
            env = self._start(port)
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            self._supervise(env)
        except KeyboardInterrupt:
            self.stdout.write("\n" + self._interrupted_line())
        finally:
            self.stopping.set()  # the worker's shutdown noise (a pool process lost mid-run) is not shown
            for name in ("web", "worker", "redis"):
                if name in self.children:
                    _stop(self.children[name])
            local_state.clear_runtime_env()

    def _supervise(self, env):
        restarts = []
        while True:
            time.sleep(0.5)
            for name in ("redis", "web"):
                if name in self.children and self.children[name].poll() is not None:
                    self.stderr.write("%s stopped (exit %s); shutting down" % (name, self.children[name].returncode))
                    return
            worker = self.children["worker"]
            if worker.poll() is None:
                continue
            now = time.monotonic()
            restarts = [t for t in restarts if now - t < RESTART_WINDOW_S] + [now]
            _stop(worker)  # its pool and beat too
            if len(restarts) > MAX_RESTARTS:
                self.stderr.write("the worker died %d times in %d s; shutting down" % (len(restarts),
                                                                                     RESTART_WINDOW_S))
                return
            self.stderr.write("the worker stopped (exit %s); starting it again" % worker.returncode)
            self.children["worker"] = self._worker(env)

    def _interrupted_line(self):
        """One line for Ctrl-C: what was in flight, and what becomes of it (instead of the worker's traceback)."""
        from cudaweb.validation.models import ValidationRun

        try:
            live = list(ValidationRun.objects.filter(status__in=ValidationRun.LIVE).select_related("node")
                        .order_by("created")[:5])
        except Exception:  # the database is what stops with us: say only that we stop
            live = []
        if not live:
            return "stopping"
        return "stopping; interrupted: %s. They are ended as INTERRUPTED and tried once more when make run starts " \
               "again" % ", ".join("%s (run %s, %s)" % (r.node.name, str(r.id)[:8], r.status) for r in live)

    def _worker(self, env):
        # Its own session, so that stopping it stops its pool and beat. Its log goes through us, so that once we
        # stop it (Ctrl-C) a pool process lost mid-run does not print a 40-line WorkerLostError.
        worker = subprocess.Popen(worker_command(), env=env, cwd=settings.BASE_DIR, start_new_session=True,
                                  stderr=subprocess.PIPE)
        threading.Thread(target=_forward, args=(worker.stderr, self.stopping), daemon=True).start()
        return worker

    def _start(self, port):
        env = dict(os.environ)
        if "REDIS_URL" not in os.environ:
            redis_port = free_port()
            redis_dir = local_state.VAR_DIR / "redis"
            redis_dir.mkdir(parents=True, exist_ok=True)
            self.children["redis"] = start_redis(redis_port, redis_dir, persist=True)
            env["REDIS_URL"] = "redis://127.0.0.1:%d/0" % redis_port
            self.stdout.write("embedded redis on %s (queue kept in %s)" % (env["REDIS_URL"], redis_dir))
        # a second shell's commands see the Redis and the settings this dashboard runs with (not its secrets)
        local_state.write_runtime_env(local_state.runtime_values(os.environ, env["REDIS_URL"]))
        call_command("migrate", interactive=False, verbosity=0)
        admin_notice = self._ensure_admin()
        from cudaweb.nodes.services import node_register_local

        node_register_local(python_path=sys.executable)
        self.children["worker"] = self._worker(env)
        self.children["web"] = subprocess.Popen(
            web_command(port), env=env, start_new_session=True)
        if not wait_for_port(port, timeout=30) or self.children["web"].poll() is not None:
            raise SystemExit("the web server did not start on port %d" % port)
        self.stdout.write(self.style.SUCCESS("cudaweb is up: http://127.0.0.1:%d/  (Ctrl-C stops it)" % port))
        if admin_notice:
            self.stdout.write(self.style.WARNING(admin_notice))  # last, so the startup lines do not scroll it away
        return env

    def _ensure_admin(self):
        """The local user `admin`: a superuser in the admin role group (created once; an older one gets the group).
        Returns the framed password notice to print once the server is up (None when there is none to show)."""
        from django.contrib.auth import get_user_model
        from django.contrib.auth.password_validation import validate_password
        from django.core.exceptions import ValidationError

        from cudaweb.accounts.roles import role_set

        User = get_user_model()
        existing = User.objects.filter(username="admin").first()
        if existing is not None:
            role_set(user=existing, role="admin")
            kept = local_state.VAR_DIR / ADMIN_PASSWORD_FILE
            self.stdout.write("admin account exists (password as printed when it was created%s); to set a new one: %s"
                              % (", kept in %s" % kept if kept.exists() else "", CHANGE_ADMIN_PASSWORD))
            return None
        password = os.environ.get("CUDAWEB_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        try:
            validate_password(password, user=User(username="admin"))
        except ValidationError as exc:
            raise InputError("CUDAWEB_ADMIN_PASSWORD is refused: %s No user was created." % " ".join(exc.messages))
        role_set(user=User.objects.create_superuser("admin", "", password), role="admin")
        if os.environ.get("CUDAWEB_ADMIN_PASSWORD"):
            self.stdout.write("created user admin, password from CUDAWEB_ADMIN_PASSWORD")
            return None
        local_state.VAR_DIR.mkdir(parents=True, exist_ok=True)
        kept = local_state.VAR_DIR / ADMIN_PASSWORD_FILE
        kept.unlink(missing_ok=True)  # one of an earlier database: created anew so that it is 600 from the start
        descriptor = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(password + "\n")
        return admin_password_box(password)
