"""`make run`: the whole dashboard on embedded defaults (SQLite, embedded Redis, a worker, the web server)."""

import os
import secrets
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from cudaweb import local_state
from cudaweb.embedded import free_port, start_redis, wait_for_port


class Command(BaseCommand):
    help = "Run web, worker (with beat) and an embedded Redis on this machine; Ctrl-C stops all of them."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("CUDAWEB_PORT", "8000")))

    def handle(self, *args, **options):
        children = []

        def stop(*_):
            for child in reversed(children):
                if child.poll() is None:
                    child.terminate()
            for child in children:
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
            local_state.clear_runtime_env()

        try:
            self._start(children, options["port"])
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            while all(child.poll() is None for child in children):
                time.sleep(0.5)
            self.stderr.write("a child process stopped; shutting down")
        except KeyboardInterrupt:
            self.stdout.write("\nstopping")
        finally:
            stop()

    def _start(self, children, port):
        env = dict(os.environ)
        if "REDIS_URL" not in os.environ:
            redis_port = free_port()
            redis_dir = local_state.VAR_DIR / "redis"
            redis_dir.mkdir(parents=True, exist_ok=True)
            children.append(start_redis(redis_port, redis_dir))
            env["REDIS_URL"] = "redis://127.0.0.1:%d/0" % redis_port
            local_state.write_runtime_env({"REDIS_URL": env["REDIS_URL"]})
            self.stdout.write("embedded redis on %s" % env["REDIS_URL"])
        call_command("migrate", interactive=False, verbosity=0)
        self._ensure_admin()
        from cudaweb.nodes.services import node_register_local

        node_register_local(python_path=sys.executable)
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        # -B: beat inside the worker (one process on one machine), so scheduled revalidation runs under make run too.
        children.append(subprocess.Popen([sys.executable, "-m", "celery", "-A", "cudaweb", "worker", "-B", "-l", "INFO",
                                          "--concurrency", "2", "--schedule", str(settings.BASE_DIR / "var" /
                                                                                 "celerybeat-schedule")],
                                         env=env, cwd=settings.BASE_DIR))
        children.append(subprocess.Popen(manage + ["runserver", "127.0.0.1:%d" % port, "--noreload", "--insecure"], env=env))
        if not wait_for_port(port, timeout=30):
            raise SystemExit("the web server did not start")
        self.stdout.write(self.style.SUCCESS("cudaweb is up: http://127.0.0.1:%d/  (Ctrl-C stops it)" % port))

    def _ensure_admin(self):
        from django.contrib.auth import get_user_model

        User = get_user_model()
        if User.objects.filter(username="admin").exists():
            self.stdout.write("admin account exists (password as printed when it was created)")
            return
        password = os.environ.get("CUDAWEB_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        User.objects.create_superuser("admin", "", password)
        shown = "from CUDAWEB_ADMIN_PASSWORD" if os.environ.get("CUDAWEB_ADMIN_PASSWORD") else password
        self.stdout.write(self.style.WARNING("created user admin, password: %s (shown once)" % shown))
