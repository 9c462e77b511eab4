"""Files the embedded setup keeps under var/ (never in the repository): generated secrets and the
address of the embedded Redis, so a second shell finds the same services as `make run`."""

import os
import secrets
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("CUDAWEB_VAR_DIR") or BASE_DIR / "var")  # another place: tests run their own
RUNTIME_ENV = VAR_DIR / "runtime.env"


def read_secret(name):
    path = VAR_DIR / name
    return path.read_text().strip() if path.exists() else None


def ensure_secret(name, factory=lambda: secrets.token_urlsafe(50)):
    """Create var/<name> once with a fresh secret (mode 600) and return it."""
    VAR_DIR.mkdir(exist_ok=True)
    path = VAR_DIR / name
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(factory())
    return path.read_text().strip()


def read_runtime_env():
    if not RUNTIME_ENV.exists():
        return {}
    pairs = (line.split("=", 1) for line in RUNTIME_ENV.read_text().splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


# What a running `make run` hands a second shell (manage.py add_node, validate_node ...): its Redis and the CUDAWEB_*
# settings it was started with, so that a command judges an address or a limit as the dashboard does. Secrets stay
# in the environment they were given in: a name holding one of these words is never written.
SECRET_WORDS = ("TOKEN", "PASSWORD", "SECRET", "KEY", "WEBHOOK_URL", "CREDENTIAL")


def runtime_values(environ, redis_url):
    """The values var/runtime.env keeps for `environ` (make run's environment) and its Redis."""
    values = {name: value for name, value in environ.items() if name.startswith("CUDAWEB_")
              and not any(word in name for word in SECRET_WORDS) and "\n" not in value}
    values["REDIS_URL"] = redis_url
    return values


def write_runtime_env(values):
    VAR_DIR.mkdir(exist_ok=True)
    descriptor = os.open(RUNTIME_ENV, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as fh:
        fh.write("".join("%s=%s\n" % item for item in sorted(values.items())))


def clear_runtime_env():
    RUNTIME_ENV.unlink(missing_ok=True)


def ensure_local_secrets():
    """Generate var/secret_key and var/credential_key for the embedded setup (make run)."""
    from cryptography.fernet import Fernet

    ensure_secret("secret_key")
    ensure_secret("credential_key", lambda: Fernet.generate_key().decode())


if __name__ == "__main__":
    ensure_local_secrets()
