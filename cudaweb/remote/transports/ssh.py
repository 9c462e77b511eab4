"""SSH transport (paramiko): pinned host key, agent upload by content hash over the exec channel (no SFTP needed),
budgeted execution."""

import base64
import hashlib
import posixpath
import secrets
import select
import shlex
import socket
import time

import paramiko

from cudaweb.remote.transports.base import (
    AuthFailed, ExecResult, HostKeyMismatch, HostKeyUnknown, HostSetupError, TimedOut, Unreachable, agent_command,
    read_bounded,
)

CACHE_DIR = ".cache/cudaweb"  # relative to the login's home directory
BACKSTOP_S = 20  # coreutils timeout acts first; this is the backstop
UPLOAD_TIMEOUT_S = 120
# sha256 of a file on the host: coreutils, else BSD/macOS shasum; prints nothing when neither is there
SHA256 = "{ sha256sum %(f)s 2>/dev/null || shasum -a 256 %(f)s 2>/dev/null; } | cut -d' ' -f1"
# partial copies of uploads that never finished (a worker killed mid-copy): each upload has a name of its own
STALE_PARTS = "find %(d)s -maxdepth 1 -name 'cudaprobe-*.part' -mmin +60 -exec rm -f {} + 2>/dev/null || true"


def fingerprint(key):
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(address, port):
    return address if port == 22 else "[%s]:%d" % (address, port)


PUBLIC_KEY_STARTS = ("ssh-", "ecdsa-sha2-", "sk-ssh-", "sk-ecdsa-", "---- BEGIN SSH2 PUBLIC KEY")


def load_private_key(text):
    """Parse a private key of any type paramiko supports (Ed25519, ECDSA, RSA)."""
    import io

    for cls in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return cls.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError):
            continue
    if text.lstrip().startswith(PUBLIC_KEY_STARTS):  # the .pub file beside the key: an easy slip
        raise AuthFailed("this is a public key (the .pub file); give the private key (the file of the same name "
                         "without .pub)")
    raise AuthFailed("the private key is not a readable Ed25519, ECDSA or RSA private key")


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
    def __init__(self, address, port, username, private_key_text, host_key, connect_timeout=10, output_cap=2**21,
                 on_key_used=None):
        self.address = address
        self.port = port
        self.username = username
        self.private_key_text = private_key_text
        self.host_key = host_key  # (key_type, key_base64) or None
        self.connect_timeout = connect_timeout
        self.output_cap = output_cap
        # Called with "logged in" or "refused" once the private key went to the host the pinned key proved (paramiko
        # checks the host key before it authenticates); never when no connection got that far.
        self.on_key_used = on_key_used
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
            self._key_used("refused")
            raise AuthFailed("authentication as %s@%s failed: %s" % (self.username, self.address, exc))
        except paramiko.ssh_exception.NoValidConnectionsError as exc:
            client.close()
            reasons = "; ".join(sorted({err.strerror or str(err) for err in exc.errors.values()}))
            raise Unreachable("cannot reach %s:%s: %s" % (self.address, self.port, reasons))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            client.close()
            raise Unreachable("cannot reach %s:%s: %s" % (self.address, self.port, exc or type(exc).__name__))
        # Small requests (a channel opened, a command started) go out at once: with Nagle's algorithm on, each waited
        # for the host's delayed ACK of the message before it, 40 ms a look on a kept session (bench/ssh_look.py).
        client.get_transport().sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._key_used("logged in")
        except BaseException:  # a use that could not be recorded is not kept
            client.close()
            raise
        self.client = client

    def _key_used(self, outcome):
        if self.on_key_used is not None:
            self.on_key_used(outcome)

    def close(self):
        if self.client:
            self.client.close()
            self.client = None

    def _exec(self, command, stdin=None, timeout=UPLOAD_TIMEOUT_S):
        """Run a shell command on the host over a session channel, `stdin` (bytes) written to it then closed:
        (status, stdout, stderr). A channel the host refuses or drops is its SSH setup, named as such."""
        try:
            channel = self.client.get_transport().open_session(timeout=self.connect_timeout)
            try:
                channel.settimeout(timeout)
                channel.exec_command(command)
                if stdin is not None:
                    channel.sendall(stdin)
                    channel.shutdown_write()
                out, err = channel.makefile("rb").read(), channel.makefile_stderr("rb").read()
                status = channel.recv_exit_status()
            finally:
                channel.close()
        except (socket.timeout, TimeoutError):
            raise HostSetupError("%s on %s gave no answer in %d s: is the login shell %s@%s interactive (a menu, a "
                                 "prompt)? Give the user a plain shell" % (command.split()[0], self.address, timeout,
                                                                          self.username, self.address))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise HostSetupError("the SSH server of %s accepted the login of %s but refused to run a command (%s): "
                                 "allow command execution for this user (no ForceCommand, no restricted shell)" % (
                                     self.address, self.username, exc or type(exc).__name__))
        return status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def run_command(self, argv, timeout_s=30, stdin=None):
        """Run a short command on the host, every argument quoted (shlex.quote), and return its ExecResult. `stdin`
        (bytes) is written to it, then closed: a secret goes there, never on a command line others can read."""
        try:
            writer, stdout, stderr = self.client.exec_command(shlex.join(argv), timeout=timeout_s)
            if stdin is not None:
                writer.write(stdin)
                writer.channel.shutdown_write()
            out, err = stdout.read(), stderr.read()  # each read times out after timeout_s of silence
            status = stdout.channel.recv_exit_status()
        except (socket.timeout, TimeoutError):
            raise TimedOut("%s ran past %d s on %s" % (argv[0], timeout_s, self.address))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise Unreachable("%s on %s failed: %s" % (argv[0], self.address, exc or type(exc).__name__))
        return ExecResult(status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))

    def upload_agent(self, payload, digest):
        """Put the zipapp at ~/.cache/cudaweb/cudaprobe-<digest>.pyz unless a copy with its sha256 is there. The bytes
        go over the exec channel (`cat > file` fed on stdin), so a host without the SFTP subsystem works too, and
        the copy's sha256 is checked before it is moved into place."""
        path = posixpath.join(CACHE_DIR, "cudaprobe-%s.pyz" % digest[:16])
        partial = "%s.%s.part" % (path, secrets.token_hex(8))  # this upload's own: two at once never share one
        want = hashlib.sha256(payload).hexdigest()
        status, out, err = self._exec("mkdir -p %s && chmod 700 %s && { %s; } && { %s; }" % (
            CACHE_DIR, CACHE_DIR, STALE_PARTS % {"d": CACHE_DIR}, SHA256 % {"f": shlex.quote(path)}))
        if status != 0:
            raise HostSetupError("cannot create ~/%s on %s as %s: %s. The user needs a login shell that runs "
                                 "commands and a writable home directory" % (
                                     CACHE_DIR, self.address, self.username, _first_line(err) or "exit %d" % status))
        if out.strip() == want:
            return path
        status, _, err = self._exec("cat > %s" % shlex.quote(partial), stdin=payload)
        if status != 0:
            self._exec("rm -f %s" % shlex.quote(partial))
            raise HostSetupError("cannot write the agent to ~/%s on %s: %s. Free space in the user's home "
                                 "directory or make it writable" % (partial, self.address,
                                                                    _first_line(err) or "exit status %d" % status))
        status, out, err = self._exec(SHA256 % {"f": shlex.quote(partial)})
        if out.strip() != want:
            self._exec("rm -f %s" % shlex.quote(partial))
            raise HostSetupError("the agent's copy on %s does not match what was sent (sha256 %s, expected %s): %s" % (
                self.address, out.strip()[:64] or "unknown: neither sha256sum nor shasum on the host", want[:16],
                "install coreutils (sha256sum)" if not out.strip() else "check the disk of the host"))
        status, _, err = self._exec("mv -f %s %s" % (shlex.quote(partial), shlex.quote(path)))
        if status != 0:
            self._exec("rm -f %s" % shlex.quote(partial))
            raise HostSetupError("cannot move the agent into place on %s: %s" % (self.address, _first_line(err)))
        return path

    def run_agent(self, python, agent_path, agent_args, limit_s, on_stderr_line=None, env=None, stop=None):
        command = shlex.join(agent_command(python, agent_path, agent_args, limit_s, env))
        try:
            channel = self.client.get_transport().open_session(timeout=self.connect_timeout)
            channel.exec_command(command)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise HostSetupError("the SSH server of %s refused to start the agent (%s): allow command execution for "
                                 "%s" % (self.address, exc or type(exc).__name__, self.username))
        deadline = time.monotonic() + limit_s + BACKSTOP_S
        try:
            stdout, stderr, truncated = read_bounded(_Channel(channel), limit_s, deadline, self.output_cap,
                                                     on_stderr_line, stop)
            status = channel.recv_exit_status()
        finally:
            channel.close()
        return ExecResult(status, stdout, stderr, truncated)


def _first_line(text):
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:300]


class _Channel:
    """An SSH session channel's stdout and stderr, for read_bounded."""

    def __init__(self, channel):
        self.channel = channel

    def read(self, timeout):
        channel = self.channel
        if channel.eof_received and not channel.recv_ready() and not channel.recv_stderr_ready():
            # The output has ended; the exit status comes in its own message. paramiko keeps the pipe that select
            # watches set for good after the end of output, so a select here would return at once, again and
            # again: a loop spinning on the GIL until the status came, starving the threads that read the
            # sessions' packets (16 looks at once took 1 to 7 s; bench/ssh_look.py). Wait for the status instead.
            channel.status_event.wait(timeout)
            return []
        select.select([channel], [], [], timeout)
        chunks = []
        while self.channel.recv_ready():
            chunks.append(("out", self.channel.recv(65536)))
        while self.channel.recv_stderr_ready():
            chunks.append(("err", self.channel.recv_stderr(65536)))
        return chunks

    def done(self):
        channel = self.channel
        return channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready()
