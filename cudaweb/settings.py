"""Settings from the environment; SQLite and an embedded Redis by default, PostgreSQL when DATABASE_URL says so."""

import os

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


def env_bool(name, default):
    value = env(name, "1" if default else "0").lower()
    if value not in ("0", "1", "true", "false", "yes", "no"):
        raise ImproperlyConfigured("%s must be a boolean, got %r" % (name, value))
    return value in ("1", "true", "yes")


DEBUG = env_bool("CUDAWEB_DEBUG", False)
SECRET_KEY = env("SECRET_KEY") or local_state.read_secret("secret_key")
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY is not set (make run generates var/secret_key; production sets SECRET_KEY)")
# Fernet key that encrypts stored SSH private keys at rest.
CREDENTIAL_KEY = env("CUDAWEB_CREDENTIAL_KEY") or local_state.read_secret("credential_key")

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
    # Lowest first: an app imports only the apps before it (docs/adr/0004-one-way-layers.md; tests/test_layers.py).
    "cudaweb.accounts",
    "cudaweb.nodes",
    "cudaweb.remote",
    "cudaweb.validation",
    "cudaweb.drift",
    "cudaweb.playbooks",
    "cudaweb.network",
    "cudaweb.fleet",
    "cudaweb.api",
]

MIDDLEWARE = [
    "cudaweb.api.errors.JsonErrorsMiddleware",  # under /api/, every error as JSON (outermost: it sees them all)
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # vendored static files, served by the app: no CDN
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "cudaweb.accounts.audit.AuditContextMiddleware",  # who and from where, for the audit log
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web and worker write to one file: wait for the lock instead of failing at once.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    # A file, not memory, so the Celery worker started by the tests sees the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "var" / "test.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
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
STATIC_ROOT = BASE_DIR / "staticfiles"

# The audit log's client address: REMOTE_ADDR, unless a reverse proxy of ours sets X-Forwarded-For (then the
# address it appended last). Off by default: a client could write anything there.
CUDAWEB_TRUST_X_FORWARDED_FOR = env_bool("CUDAWEB_TRUST_X_FORWARDED_FOR", False)

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("CUDAWEB_SECURE_COOKIES", False)

REDIS_URL = env("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A Redis that does not answer within seconds is down: pages and commands say so instead of hanging.
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 3, "socket_timeout": 10}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BEAT_SCHEDULE = {
    "reap-stale-runs": {"task": "cudaweb.validation.tasks.reap_stale_runs", "schedule": 60.0},
    "prune-old-runs": {"task": "cudaweb.validation.tasks.prune_runs", "schedule": 24 * 3600.0},
}

# Agent time budgets per mode (seconds); SSH timeouts < agent budget < Celery soft limit < hard limit.
CUDAWEB_AGENT_TIMEOUT = {
    "quick": env_int("CUDAWEB_AGENT_TIMEOUT_QUICK", 180),
    "standard": env_int("CUDAWEB_AGENT_TIMEOUT_STANDARD", 600),
    "full": env_int("CUDAWEB_AGENT_TIMEOUT_FULL", 1500),
}
CUDAWEB_SSH_CONNECT_TIMEOUT = env_int("CUDAWEB_SSH_CONNECT_TIMEOUT", 10)
CUDAWEB_OUTPUT_CAP = env_int("CUDAWEB_OUTPUT_CAP", 2 * 1024 * 1024)
CUDAWEB_AGENT_CACHE_DIR = env("CUDAWEB_AGENT_CACHE_DIR", str(BASE_DIR / "var" / "agent-cache"))
# A RUNNING run whose heartbeat (every 15 s) is older than this is declared INTERRUPTED by the reaper (and run again
# once); a PENDING run older than CHECK whose task the broker no longer holds is queued again (twice at most), and
# where the broker cannot be asked, only after MAX. Every worker reaps every REAP_EVERY seconds.
CUDAWEB_STALE_RUN_S = env_int("CUDAWEB_STALE_RUN_S", 90)
CUDAWEB_PENDING_CHECK_S = env_int("CUDAWEB_PENDING_CHECK_S", 60)
CUDAWEB_PENDING_MAX_S = env_int("CUDAWEB_PENDING_MAX_S", 1800)
CUDAWEB_REAP_EVERY_S = env_int("CUDAWEB_REAP_EVERY_S", 20)
# Old runs and their check rows go after PRUNE_DAYS, each node keeping its PRUNE_KEEP_LAST newest (daily, beat).
CUDAWEB_PRUNE_DAYS = env_int("CUDAWEB_PRUNE_DAYS", 365)
CUDAWEB_PRUNE_KEEP_LAST = env_int("CUDAWEB_PRUNE_KEEP_LAST", 50)
# How long one end of a node-to-node pair test waits for the other.
CUDAWEB_PAIR_TIMEOUT_S = env_int("CUDAWEB_PAIR_TIMEOUT_S", 30)

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
