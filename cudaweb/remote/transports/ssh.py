"""SSH transport (paramiko): pinned host key, agent upload by content hash, budgeted execution."""

import base64
import hashlib
import posixpath
import select
import shlex
import socket
import time

import paramiko

from cudaweb.remote.transports.base import (
    AuthFailed, ExecResult, HostKeyMismatch, HostKeyUnknown, TimedOut, Unreachable, agent_command, read_bounded,
)

CACHE_DIR = ".cache/cudaweb"  # relative to the login's home directory
BACKSTOP_S = 20  # coreutils timeout acts first; this is the backstop


def fingerprint(key):
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(address, port):
    return address if port == 22 else "[%s]:%d" % (address, port)


def load_private_key(text):
    """Parse a private key of any type paramiko supports (Ed25519, ECDSA, RSA)."""
    import io

    for cls in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return cls.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError):
            continue
    raise AuthFailed("the stored private key is not a readable Ed25519, ECDSA or RSA key")


def fetch_host_key(address, port, timeout):
    """Connect without authenticating and return the server's host key (first contact)."""
    try:
        sock = socket.create_connection((address, port), timeout=timeout)
    except OSError as exc:
        raise Unreachable("cannot connect to %s:%s: %s" % (address, port, exc))
    transport = paramiko.Transport(sock)
    try:
        transport.banner_timeout = timeout
        transport.start_client(timeout=timeout)
        key = transport.get_remote_server_key()
        return key.get_name(), key.get_base64(), fingerprint(key)
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise Unreachable("no SSH handshake with %s:%s: %s" % (address, port, exc))
    finally:
        transport.close()


class SSHTransport:
    def __init__(self, address, port, username, private_key_text, host_key, connect_timeout=10, output_cap=2**21):
        self.address = address
        self.port = port
        self.username = username
        self.private_key_text = private_key_text
        self.host_key = host_key  # (key_type, key_base64) or None
        self.connect_timeout = connect_timeout
        self.output_cap = output_cap
        self.client = None

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc):
        self.close()

    def connect(self):
        if not self.host_key:
            raise HostKeyUnknown("no accepted host key for %s: accept its fingerprint first" % self.address)
        client = paramiko.SSHClient()
        key_type, key_base64 = self.host_key
        pinned = paramiko.PKey.from_type_string(key_type, base64.b64decode(key_base64))
        client.get_host_keys().add(known_hosts_name(self.address, self.port), key_type, pinned)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(
                self.address, port=self.port, username=self.username,
                pkey=load_private_key(self.private_key_text), timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout, auth_timeout=self.connect_timeout, channel_timeout=self.connect_timeout,
                look_for_keys=False, allow_agent=False,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyMismatch("host key of %s changed: expected %s, got %s" % (
                self.address, fingerprint(exc.expected_key), fingerprint(exc.key)))
        except paramiko.AuthenticationException as exc:
            client.close()
            raise AuthFailed("authentication as %s@%s failed: %s" % (self.username, self.address, exc))
        except paramiko.ssh_exception.NoValidConnectionsError as exc:
            client.close()
            reasons = "; ".join(sorted({err.strerror or str(err) for err in exc.errors.values()}))
            raise Unreachable("cannot reach %s:%s: %s" % (self.address, self.port, reasons))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            client.close()
            raise Unreachable("cannot reach %s:%s: %s" % (self.address, self.port, exc or type(exc).__name__))
        self.client = client

    def close(self):
        if self.client:
            self.client.close()
            self.client = None

    def _run_simple(self, command, timeout=30):
        _, stdout, stderr = self.client.exec_command(command, timeout=timeout)
        status = stdout.channel.recv_exit_status()
        return status, stdout.read().decode("utf-8", "replace"), stderr.read().decode("utf-8", "replace")

    def run_command(self, argv, timeout_s=30):
        """Run a short command on the host, every argument quoted (shlex.quote), and return its ExecResult."""
        try:
            _, stdout, stderr = self.client.exec_command(shlex.join(argv), timeout=timeout_s)
            out, err = stdout.read(), stderr.read()  # each read times out after timeout_s of silence
            status = stdout.channel.recv_exit_status()
        except (socket.timeout, TimeoutError):
            raise TimedOut("%s ran past %d s on %s" % (argv[0], timeout_s, self.address))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise Unreachable("%s on %s failed: %s" % (argv[0], self.address, exc or type(exc).__name__))
        return ExecResult(status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))

    def upload_agent(self, payload, digest):
        """Put the zipapp at ~/.cache/cudaweb/cudaprobe-<digest>.pyz unless it is already there."""
        path = posixpath.join(CACHE_DIR, "cudaprobe-%s.pyz" % digest[:16])
        status, _, err = self._run_simple("mkdir -p %s && chmod 700 %s" % (CACHE_DIR, CACHE_DIR))
        if status != 0:
            raise Unreachable("cannot create %s on the host: %s" % (CACHE_DIR, err.strip()))
        sftp = self.client.open_sftp()
        try:
            try:
                if sftp.stat(path).st_size == len(payload):
                    return path
            except FileNotFoundError:
                pass
            partial = path + ".part"
            with sftp.open(partial, "wb") as fh:
                fh.write(payload)
            sftp.posix_rename(partial, path)
        finally:
            sftp.close()
        return path

    def run_agent(self, python, agent_path, agent_args, limit_s, on_stderr_line=None, env=None):
        command = shlex.join(agent_command(python, agent_path, agent_args, limit_s, env))
        channel = self.client.get_transport().open_session(timeout=self.connect_timeout)
        channel.exec_command(command)
        deadline = time.monotonic() + limit_s + BACKSTOP_S
        try:
            stdout, stderr, truncated = read_bounded(_Channel(channel), limit_s, deadline, self.output_cap,
                                                     on_stderr_line)
            status = channel.recv_exit_status()
        finally:
            channel.close()
        return ExecResult(status, stdout, stderr, truncated)


class _Channel:
    """An SSH session channel's stdout and stderr, for read_bounded."""

    def __init__(self, channel):
        self.channel = channel

    def read(self, timeout):
        select.select([self.channel], [], [], timeout)
        chunks = []
        while self.channel.recv_ready():
            chunks.append(("out", self.channel.recv(65536)))
        while self.channel.recv_stderr_ready():
            chunks.append(("err", self.channel.recv_stderr(65536)))
        return chunks

    def done(self):
        channel = self.channel
        return channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready()
