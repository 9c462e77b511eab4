"""Test settings: fresh secrets per session and a Redis port chosen now, started by the fixtures."""

import os
import secrets
import tempfile

from cryptography.fernet import Fernet

from cudaweb.embedded import free_port

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(40))
os.environ.setdefault("CUDAWEB_CREDENTIAL_KEY", Fernet.generate_key().decode())
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:%d/0" % free_port())
os.environ.setdefault("CUDAWEB_AGENT_CACHE_DIR", "/tmp/cudaweb-test-agent-cache")
os.environ.setdefault("CUDAWEB_PAIR_TIMEOUT_S", "10")  # a pair whose other end never comes fails sooner
os.environ.setdefault("CUDAWEB_HOOK_BACKOFF_S", "0.5")
# A rung answers busy at once for a drain still pending (tests/health/test_remediation_gates.py tests the wait)
os.environ.setdefault("CUDAWEB_LOOP_DRAIN_WAIT_S", "0")
# The tests' sshd listens on loopback, which the empty default refuses (cudaweb.nodes.addresses): allow every address.
# Tests of the default set it back to "" (tests/nodes/test_addresses.py).
os.environ.setdefault("CUDAWEB_ALLOWED_NETWORKS", "0.0.0.0/0,::/0")  # a worker started by the tests tries again soon
# Reports waiting to be stored: one folder per session, shared with the worker the tests start (it inherits this).
os.environ.setdefault("CUDAWEB_REPORT_SPOOL_DIR", tempfile.mkdtemp(prefix="cudaweb-test-spool-"))

from cudaweb.settings import *  # noqa: E402,F401,F403
