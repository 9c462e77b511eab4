"""Settings from the environment; SQLite and an embedded Redis by default, PostgreSQL when DATABASE_URL says so."""

import ipaddress
import os
import re
import shlex
import warnings
from datetime import timedelta

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from cudaweb import local_state

BASE_DIR = local_state.BASE_DIR
_runtime = local_state.read_runtime_env()


def env(name, default=None):
    return os.environ.get(name, _runtime.get(name, default))


def env_int(name, default):
    value = env(name, str(default))
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured("%s must be an integer, got %r" % (name, value))


def env_float(name, default):
    value = env(name, str(default))
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured("%s must be a number, got %r" % (name, value))


def env_bool(name, default):
    value = env(name, "1" if default else "0").lower()
    if value not in ("0", "1", "true", "false", "yes", "no"):
        raise ImproperlyConfigured("%s must be a boolean, got %r" % (name, value))
    return value in ("1", "true", "yes")


DEBUG = env_bool("CUDAWEB_DEBUG", False)
SECRET_KEY = env("SECRET_KEY") or local_state.read_secret("secret_key")
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY is not set (make run generates var/secret_key; production sets SECRET_KEY)")
# Fernet keys that encrypt stored SSH private keys at rest: CUDAWEB_CREDENTIAL_KEYS, comma separated, newest first
# (new secrets are encrypted with the first, any of them decrypts; `manage.py rotate_credential_key` re-encrypts
# every stored secret with the first), or the single CUDAWEB_CREDENTIAL_KEY as before.
CREDENTIAL_KEY = env("CUDAWEB_CREDENTIAL_KEY") or local_state.read_secret("credential_key")
CREDENTIAL_KEYS = [k.strip() for k in env("CUDAWEB_CREDENTIAL_KEYS", "").split(",") if k.strip()] or (
    [CREDENTIAL_KEY] if CREDENTIAL_KEY else [])

ALLOWED_HOSTS = [h.strip() for h in env("CUDAWEB_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [o for o in env("CUDAWEB_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_celery_beat",
    "axes",  # login throttling (docs/adr/0008-hooks-and-production-settings.md)
    # Lowest first: an app imports only the apps before it (docs/adr/0004-one-way-layers.md; tests/test_layers.py).
    "cudaweb.accounts",
    "cudaweb.nodes",
    "cudaweb.remote",
    "cudaweb.validation",
    "cudaweb.drift",
    "cudaweb.playbooks",
    "cudaweb.network",
    "cudaweb.hooks",
    "cudaweb.health",
    "cudaweb.fleet",
    "cudaweb.api",
]

MIDDLEWARE = [
    "cudaweb.api.errors.JsonErrorsMiddleware",  # under /api/, every error as JSON (outermost: it sees them all)
    "django.middleware.security.SecurityMiddleware",
    # Above WhiteNoise, which answers static files itself: they carry the policy too (make run serves them).
    "csp.middleware.CSPMiddleware",
    "cudaweb.malformed.MalformedRequestMiddleware",  # 400 for what no page can read (a NUL, a latin-1 form)
    "whitenoise.middleware.WhiteNoiseMiddleware",  # vendored static files, served by the app: no CDN
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "cudaweb.accounts.audit.AuditContextMiddleware",  # who and from where, for the audit log
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks: it answers the lockout
]

ROOT_URLCONF = "cudaweb.urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [BASE_DIR / "templates"],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
WSGI_APPLICATION = "cudaweb.wsgi.application"

DATABASE_URL = env("DATABASE_URL", "sqlite:///%s" % (local_state.VAR_DIR / "db.sqlite3"))
# Connections live a minute and are checked before their first use after a task, a signal or a request starts
# (CONN_HEALTH_CHECKS): one the server dropped (a restart, a failover) is replaced instead of failing a query.
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web and worker write to one file: wait for the lock instead of failing at once.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    # A file, not memory, so the Celery worker started by the tests sees the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "var" / "test.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Every password set through the project is checked against these: Django's forms (the admin's user pages),
# changepassword and an interactive createsuperuser, make run's admin (cudaweb/accounts/passwords.py adds one).
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "cudaweb.accounts.passwords.UserNameInsideValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "fleet:node_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"  # what collectstatic writes (the Docker image)
# Without a collectstatic (make run, the tests) WhiteNoise serves static/ through the finders; it need not say that
# STATIC_ROOT is missing on every start.
WHITENOISE_USE_FINDERS = not STATIC_ROOT.is_dir()
if WHITENOISE_USE_FINDERS:
    warnings.filterwarnings("ignore", message="No directory at: %s" % re.escape(str(STATIC_ROOT)),
                            category=UserWarning)

# The client's address (audit log and login lockouts): REMOTE_ADDR, unless the connection comes from a proxy named
# here, one address or network per hop, outermost first (then the X-Forwarded-For entry that proxy appended;
# cudaweb.accounts.audit.client_address, django-ipware). Empty by default: a client could write anything there.
# Behind a proxy left out of it every client has the proxy's address, and the lockout locks a user out for everyone:
# the system check cudaweb.W001 says so (cudaweb/accounts/checks.py).
CUDAWEB_TRUSTED_PROXIES = [p.strip() for p in env("CUDAWEB_TRUSTED_PROXIES", "").split(",") if p.strip()]
for _proxy in CUDAWEB_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured("CUDAWEB_TRUSTED_PROXIES: %r is no IP address or network" % _proxy)

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("CUDAWEB_SECURE_COOKIES", False)
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (docker-compose.yml): redirect plain HTTP, HSTS, secure
# cookies. `SECRET_KEY=... CUDAWEB_HTTPS=1 manage.py check --deploy` reports no issues (tests/test_production.py).
CUDAWEB_HTTPS = env_bool("CUDAWEB_HTTPS", False)
if CUDAWEB_HTTPS:
    SECURE_SSL_REDIRECT = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("CUDAWEB_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("CUDAWEB_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("CUDAWEB_HSTS_PRELOAD", True)
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True

# Content-Security-Policy (django-csp): everything from our own origin, no inline script or style, no framing.
CONTENT_SECURITY_POLICY = {"DIRECTIVES": {
    "default-src": ["'self'"], "script-src": ["'self'"], "style-src": ["'self'"], "img-src": ["'self'", "data:"],
    "connect-src": ["'self'"], "font-src": ["'self'"], "object-src": ["'none'"], "base-uri": ["'self'"],
    "form-action": ["'self'"], "frame-ancestors": ["'none'"],
}}

# Login throttling (django-axes): FAILURE_LIMIT failed logins for one user name from one address lock that pair out
# for COOLOFF minutes; USER_FAILURE_LIMIT from all addresses together lock the name out for every address (a guesser
# with many addresses: 25 in 15 minutes is at most 100 guesses an hour at one account); a success resets the count.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
CUDAWEB_LOGIN_FAILURE_LIMIT = env_int("CUDAWEB_LOGIN_FAILURE_LIMIT", 10)
CUDAWEB_LOGIN_USER_FAILURE_LIMIT = env_int("CUDAWEB_LOGIN_USER_FAILURE_LIMIT", max(25, CUDAWEB_LOGIN_FAILURE_LIMIT))
if not 1 <= CUDAWEB_LOGIN_FAILURE_LIMIT <= CUDAWEB_LOGIN_USER_FAILURE_LIMIT:
    raise ImproperlyConfigured("CUDAWEB_LOGIN_FAILURE_LIMIT must be 1 or more and no more than "
                               "CUDAWEB_LOGIN_USER_FAILURE_LIMIT")
AXES_FAILURE_LIMIT = "cudaweb.accounts.lockout.failure_limit"  # one of the two above, as the address has done
AXES_COOLOFF_TIME = timedelta(minutes=env_int("CUDAWEB_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "username"]  # alternatives: the pair, or the name alone
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no "AXES: BEGIN ..." banner on every management command; lockouts are still logged
# The client's address: one rule for lockouts and the audit log (CUDAWEB_TRUSTED_PROXIES above).
AXES_CLIENT_IP_CALLABLE = "cudaweb.accounts.audit.client_address"

REDIS_URL = env("REDIS_URL", "")
# Neither the environment nor a running `make run` (var/runtime.env) names a Redis: no dashboard runs here. Commands
# say so (cudaweb.cli.dashboard_or_exit) instead of queueing into whatever else answers on the default port.
CUDAWEB_NO_DASHBOARD = not REDIS_URL
REDIS_URL = REDIS_URL or "redis://127.0.0.1:6379/0"
CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A Redis that does not answer within seconds is down: pages and commands say so instead of hanging.
# The visibility timeout outlasts the longest task (a 24 h burn-in run twice: about 50 h): under it, Redis would hand
# a burn-in still running to a second worker every hour. A run whose worker died is the reaper's (its heartbeat),
# not the broker's redelivery.
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 3, "socket_timeout": 10, "visibility_timeout": 3 * 86400}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BEAT_SCHEDULE = {
    "reap-stale-runs": {"task": "cudaweb.validation.tasks.reap_stale_runs", "schedule": 60.0},
    "prune-old-runs": {"task": "cudaweb.validation.tasks.prune_runs", "schedule": 24 * 3600.0},
    "sweep-hook-deliveries": {"task": "cudaweb.hooks.tasks.sweep_deliveries", "schedule": 300.0},
    "watch-due-nodes": {"task": "cudaweb.health.tasks.watch_due", "schedule": float(env_int("CUDAWEB_WATCH_TICK_S", 2))},
    "sweep-loop-actions": {"task": "cudaweb.health.tasks.sweep_actions", "schedule": 60.0},
    "prune-old-events": {"task": "cudaweb.health.tasks.prune_events", "schedule": 24 * 3600.0},
}

# Agent time budgets per mode (seconds); SSH timeouts < agent budget < Celery soft limit < hard limit.
CUDAWEB_AGENT_TIMEOUT = {
    "quick": env_int("CUDAWEB_AGENT_TIMEOUT_QUICK", 180),
    "standard": env_int("CUDAWEB_AGENT_TIMEOUT_STANDARD", 600),
    "full": env_int("CUDAWEB_AGENT_TIMEOUT_FULL", 1500),
}
# Burn-in (full, then L7 stress): the full budget, plus the burn-in's seconds, plus this margin for the memory test and
# the consistency check that follow the sustained load (cudaweb.validation.burnin.agent_budget_s).
CUDAWEB_AGENT_TIMEOUT["burnin"] = env_int("CUDAWEB_AGENT_TIMEOUT_BURNIN", CUDAWEB_AGENT_TIMEOUT["full"])
CUDAWEB_BURNIN_MARGIN_S = env_int("CUDAWEB_BURNIN_MARGIN_S", 900)
# Flaky or hard (cudaweb.validation.retries): a check that fails or warns on a measured figure is run once more in
# the same run (off with 0); a node with flaky checks in FLAKY_LIMIT runs within FLAKY_DAYS days is flagged.
CUDAWEB_RETRY_FIGURES = env_int("CUDAWEB_RETRY_FIGURES", 1)
CUDAWEB_FLAKY_LIMIT = env_int("CUDAWEB_FLAKY_LIMIT", 3)
CUDAWEB_FLAKY_DAYS = env_int("CUDAWEB_FLAKY_DAYS", 7)
CUDAWEB_SSH_CONNECT_TIMEOUT = env_int("CUDAWEB_SSH_CONNECT_TIMEOUT", 10)
CUDAWEB_OUTPUT_CAP = env_int("CUDAWEB_OUTPUT_CAP", 2 * 1024 * 1024)
CUDAWEB_AGENT_CACHE_DIR = env("CUDAWEB_AGENT_CACHE_DIR", str(BASE_DIR / "var" / "agent-cache"))
# A RUNNING run whose heartbeat (every 15 s) is older than this is declared INTERRUPTED by the reaper (and run again
# once); a PENDING run older than CHECK whose task the broker no longer holds is queued again (twice at most), and
# where the broker cannot be asked, only after MAX. Every worker reaps every REAP_EVERY seconds.
CUDAWEB_STALE_RUN_S = env_int("CUDAWEB_STALE_RUN_S", 90)
CUDAWEB_HEARTBEAT_S = env_int("CUDAWEB_HEARTBEAT_S", 15)  # a running run's heartbeat; STALE_RUN_S is six of them
CUDAWEB_PENDING_CHECK_S = env_int("CUDAWEB_PENDING_CHECK_S", 60)
CUDAWEB_FANOUT_MIN = env_int("CUDAWEB_FANOUT_MIN", 50)  # a bulk request this big is published by a worker
# Key files are read only from this directory on the worker host; empty: key files are off (paste keys instead).
CUDAWEB_KEY_DIR = env("CUDAWEB_KEY_DIR", "")
# Networks the dashboard may connect to (comma-separated CIDRs, e.g. 10.0.0.0/8); empty: any address but loopback,
# link-local, unspecified and multicast ones (cudaweb.nodes.addresses; list 127.0.0.0/8 to reach a test sshd here).
CUDAWEB_ALLOWED_NETWORKS = env("CUDAWEB_ALLOWED_NETWORKS", "")
CUDAWEB_PENDING_MAX_S = env_int("CUDAWEB_PENDING_MAX_S", 1800)
CUDAWEB_REAP_EVERY_S = env_int("CUDAWEB_REAP_EVERY_S", 20)
# Old runs and their check rows go after PRUNE_DAYS, each node keeping its PRUNE_KEEP_LAST newest (daily, beat).
CUDAWEB_PRUNE_DAYS = env_int("CUDAWEB_PRUNE_DAYS", 365)
CUDAWEB_PRUNE_KEEP_LAST = env_int("CUDAWEB_PRUNE_KEEP_LAST", 50)
# A run's database write that fails on a dropped connection is tried again on a new one for DB_RETRY seconds
# (waiting FIRST, then twice as long each time, at most MAX_WAIT): a PostgreSQL restart of ~30 s costs no report.
# A report still not stored then is kept as a file in REPORT_SPOOL_DIR until the reaper stores it.
CUDAWEB_DB_RETRY_S = env_float("CUDAWEB_DB_RETRY_S", 60)
CUDAWEB_DB_RETRY_FIRST_S = env_float("CUDAWEB_DB_RETRY_FIRST_S", 0.5)
CUDAWEB_DB_RETRY_MAX_WAIT_S = env_float("CUDAWEB_DB_RETRY_MAX_WAIT_S", 5)
CUDAWEB_REPORT_SPOOL_DIR = env("CUDAWEB_REPORT_SPOOL_DIR", str(BASE_DIR / "var" / "report-spool"))
# How long one end of a node-to-node pair test waits for the other.
CUDAWEB_PAIR_TIMEOUT_S = env_int("CUDAWEB_PAIR_TIMEOUT_S", 30)

# Hooks (cudaweb.hooks): a webhook on a failed run, a quarantine and drift; a Slurm drain and a Kubernetes cordon on
# quarantine, undone on acceptance. Each is off while its variable is empty. Deliveries are Celery tasks, tried
# HOOK_TRIES times at most, waiting BACKOFF_S, then twice as long each time (capped at BACKOFF_MAX_S).
CUDAWEB_BASE_URL = env("CUDAWEB_BASE_URL", "http://localhost:8000")
CUDAWEB_WEBHOOK_URL = env("CUDAWEB_WEBHOOK_URL", "")
CUDAWEB_WEBHOOK_RUN_STATUSES = [s.strip() for s in env(
    "CUDAWEB_WEBHOOK_RUN_STATUSES", "FAILED,UNREACHABLE,AUTH_FAILED,HOST_KEY_MISMATCH,TIMED_OUT,AGENT_ERROR").split(",")
    if s.strip()]
CUDAWEB_HOOK_TRIES = env_int("CUDAWEB_HOOK_TRIES", 6)
CUDAWEB_HOOK_BACKOFF_S = env_float("CUDAWEB_HOOK_BACKOFF_S", 10)
CUDAWEB_HOOK_BACKOFF_MAX_S = env_float("CUDAWEB_HOOK_BACKOFF_MAX_S", 600)
CUDAWEB_SLURM_CONTROLLER = env("CUDAWEB_SLURM_CONTROLLER", "")  # a node's name in cudaweb: its SSH login is used
CUDAWEB_SLURM_SCONTROL = shlex.split(env("CUDAWEB_SLURM_SCONTROL", "scontrol"))  # e.g. "sudo -n scontrol"
CUDAWEB_SLURM_TIMEOUT_S = env_int("CUDAWEB_SLURM_TIMEOUT_S", 30)
CUDAWEB_K8S_API = env("CUDAWEB_K8S_API", "")  # e.g. https://10.0.0.1:6443
CUDAWEB_K8S_TOKEN = env("CUDAWEB_K8S_TOKEN", "")
CUDAWEB_K8S_TOKEN_FILE = env("CUDAWEB_K8S_TOKEN_FILE", "")
CUDAWEB_K8S_CA_FILE = env("CUDAWEB_K8S_CA_FILE", "")
# After each run, the node condition GPUHealthy and per-GPU events on nodes that have a Kubernetes name.
CUDAWEB_K8S_NODE_HEALTH = env_bool("CUDAWEB_K8S_NODE_HEALTH", True)

# The loop (cudaweb.health; README "The loop"): a light watch of every node between validations, a state machine,
# a remediation ladder and a circuit breaker. A label's LoopPolicy (admin) overrides MODE, LADDER, AUTO, the
# interval and the repeat rule for its nodes.
CUDAWEB_WATCH_INTERVAL_S = env_int("CUDAWEB_WATCH_INTERVAL_S", 60)
CUDAWEB_WATCH_TIMEOUT_S = env_int("CUDAWEB_WATCH_TIMEOUT_S", 20)  # one look, agent start included
CUDAWEB_WATCH_BATCH = env_int("CUDAWEB_WATCH_BATCH", 50)  # looks per task
CUDAWEB_WATCH_THREADS = env_int("CUDAWEB_WATCH_THREADS", 16)  # looks in flight at once in one worker process
CUDAWEB_WATCH_KEEPALIVE_S = env_int("CUDAWEB_WATCH_KEEPALIVE_S", 30)  # SSH keepalive of the reused sessions
CUDAWEB_WATCH_SESSION_IDLE_S = env_int("CUDAWEB_WATCH_SESSION_IDLE_S", 600)  # a session unused this long is closed
CUDAWEB_LOOP_MODE = env("CUDAWEB_LOOP_MODE", "record")  # off | record (shadow mode) | act
CUDAWEB_LOOP_LADDER = [r.strip() for r in env("CUDAWEB_LOOP_LADDER", "revalidate").split(",") if r.strip()]
CUDAWEB_LOOP_AUTO = bool(env_int("CUDAWEB_LOOP_AUTO", 0))
CUDAWEB_LOOP_REPEAT_LIMIT = env_int("CUDAWEB_LOOP_REPEAT_LIMIT", 2)
CUDAWEB_LOOP_REPEAT_DAYS = env_int("CUDAWEB_LOOP_REPEAT_DAYS", 7)
CUDAWEB_LOOP_ACTION_MARGIN_S = env_int("CUDAWEB_LOOP_ACTION_MARGIN_S", 300)
CUDAWEB_LOOP_BURNIN_S = env_int("CUDAWEB_LOOP_BURNIN_S", 1800)
# A rung the node was busy for (or our failure aborted) is taken again after CUDAWEB_LOOP_RETRY_S, doubling each time
# in a row up to CUDAWEB_LOOP_RETRY_MAX_S; a condition that clears at the next look CUDAWEB_LOOP_FLAP_LIMIT times
# within CUDAWEB_LOOP_FLAP_WINDOW_S is confirmed the next time, not cleared again.
CUDAWEB_LOOP_RETRY_S = env_int("CUDAWEB_LOOP_RETRY_S", 60)
CUDAWEB_LOOP_RETRY_MAX_S = env_int("CUDAWEB_LOOP_RETRY_MAX_S", 3600)
CUDAWEB_LOOP_FLAP_LIMIT = env_int("CUDAWEB_LOOP_FLAP_LIMIT", 3)
CUDAWEB_LOOP_FLAP_WINDOW_S = env_int("CUDAWEB_LOOP_FLAP_WINDOW_S", 86400)
CUDAWEB_BREAKER_MAX_NODES = env_int("CUDAWEB_BREAKER_MAX_NODES", 10)
CUDAWEB_BREAKER_MAX_PCT = env_int("CUDAWEB_BREAKER_MAX_PCT", 10)
CUDAWEB_BREAKER_WINDOW_S = env_int("CUDAWEB_BREAKER_WINDOW_S", 3600)
CUDAWEB_NVIDIA_SMI = shlex.split(env("CUDAWEB_NVIDIA_SMI", "nvidia-smi"))  # on the node, e.g. "sudo -n nvidia-smi"
CUDAWEB_RESET_TIMEOUT_S = env_int("CUDAWEB_RESET_TIMEOUT_S", 120)
CUDAWEB_REBOOT_COMMAND = env("CUDAWEB_REBOOT_COMMAND", "")  # argv template, {node} {address}; empty: no reboot rung
CUDAWEB_REBOOT_TIMEOUT_S = env_int("CUDAWEB_REBOOT_TIMEOUT_S", 900)
# A site whose nodes run no scheduler (no Slurm, no Kubernetes) says so: a reset or reboot then goes ahead without a
# drain, but only while no process holds any GPU of the node. Otherwise no drain delivered, no reset or reboot.
CUDAWEB_LOOP_NO_SCHEDULER = env_bool("CUDAWEB_LOOP_NO_SCHEDULER", False)
# A reset or reboot waits this long for a drain still pending (queued with the quarantine a moment before) before it
# ends busy.
CUDAWEB_LOOP_DRAIN_WAIT_S = env_int("CUDAWEB_LOOP_DRAIN_WAIT_S", 30)

# What one node may send (its own credential, cudaweb.nodes.report_credentials): reports a minute, findings a
# report, events opened a day; closed events are pruned after the retention (beat, daily).
CUDAWEB_NODE_REPORTS_PER_MINUTE = env_int("CUDAWEB_NODE_REPORTS_PER_MINUTE", 12)
CUDAWEB_NODE_REPORT_MAX_FINDINGS = env_int("CUDAWEB_NODE_REPORT_MAX_FINDINGS", 64)
CUDAWEB_NODE_NEW_EVENTS_PER_DAY = env_int("CUDAWEB_NODE_NEW_EVENTS_PER_DAY", 1000)
CUDAWEB_EVENT_RETENTION_DAYS = env_int("CUDAWEB_EVENT_RETENTION_DAYS", 90)
# Where the node-local health command reads its credential by default, and where the dashboard writes it over SSH.
CUDAWEB_NODE_CREDENTIAL_PATH = env("CUDAWEB_NODE_CREDENTIAL_PATH", "/etc/cudaweb/node-credential")
for _name in ("CUDAWEB_NODE_REPORTS_PER_MINUTE", "CUDAWEB_NODE_REPORT_MAX_FINDINGS", "CUDAWEB_NODE_NEW_EVENTS_PER_DAY",
              "CUDAWEB_EVENT_RETENTION_DAYS"):
    if globals()[_name] < 1:
        raise ImproperlyConfigured("%s must be 1 or more" % _name)
if not CUDAWEB_NODE_CREDENTIAL_PATH.startswith("/"):
    raise ImproperlyConfigured("CUDAWEB_NODE_CREDENTIAL_PATH must be an absolute path")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("CUDAWEB_LOG_LEVEL", "INFO")},
    "loggers": {"paramiko": {"level": "WARNING"}},
}

# A bearer token Prometheus may scrape /metrics with, for a scraper that is no user (an API token works too).
CUDAWEB_METRICS_TOKEN = env("CUDAWEB_METRICS_TOKEN", "")
if CUDAWEB_METRICS_TOKEN and len(CUDAWEB_METRICS_TOKEN) < 32:
    raise ImproperlyConfigured("CUDAWEB_METRICS_TOKEN must be 32 characters or more (e.g. python -c 'import secrets; "
                               "print(secrets.token_urlsafe(32))')")

# Largest log the triage page and `triage_log` read (bytes); the rest is cut off.
CUDAWEB_TRIAGE_CAP = int(os.environ.get("CUDAWEB_TRIAGE_CAP", 1024 * 1024))
