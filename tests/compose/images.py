"""The images `make compose-test` runs: a Debian bookworm base made by debootstrap (registry images cannot be pulled
here, as on many air-gapped sites), the production image built on it by `make image`, and PostgreSQL, Redis and a
GPU node built on it from Debian's packages (images/)."""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.compose import daemon

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BASE = "cudaweb-test/base:bookworm"
MIRROR = os.environ.get("CUDAWEB_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def exists(env, image):
    return subprocess.run(["docker", "image", "inspect", image], env=env, capture_output=True).returncode == 0


def base_image(env):
    """debootstrap a minimal bookworm and import it, unless the engine has it already; returns seconds spent."""
    if exists(env, BASE):
        return 0.0
    started = time.monotonic()
    daemon.STATE.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="rootfs-", dir=daemon.STATE))
    try:
        subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(root), MIRROR], check=True,
                       stdout=subprocess.DEVNULL)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(["docker", "import", "-", BASE], stdin=tar.stdout, env=env, check=True, stdout=subprocess.DEVNULL)
        if tar.wait() != 0:
            raise RuntimeError("tar of the debootstrap root failed")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return time.monotonic() - started


def app_image(env):
    """`make image` on the debootstrap base: the production path an air-gapped site takes. Returns seconds."""
    started = time.monotonic()
    subprocess.run(["make", "-C", str(REPO), "image", "BASE=%s" % BASE], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def test_images(env, node_files):
    """PostgreSQL, Redis and the GPU node (its keys and report from `node_files`, a dict name -> text)."""
    started = time.monotonic()
    for name, tag in (("postgres", "cudaweb-test/postgres:15"), ("redis", "cudaweb-test/redis:7")):
        build(env, HERE / "images", HERE / "images" / ("%s.Dockerfile" % name), tag)
    with tempfile.TemporaryDirectory() as context:
        for name in ("gpunode.Dockerfile", "fake-python", "sshd_config"):
            shutil.copy2(HERE / "images" / name, Path(context) / name)
        for name, text in node_files.items():
            (Path(context) / name).write_text(text)
        build(env, Path(context), Path(context) / "gpunode.Dockerfile", "cudaweb-test/gpunode:latest")
    return time.monotonic() - started


def build(env, context, dockerfile, tag):
    subprocess.run(["docker", "build", "-q", "--network", "host", "--build-arg", "BASE=%s" % BASE, "-f",
                    str(dockerfile), "-t", tag, str(context)], env=env, check=True, stdout=subprocess.DEVNULL)
