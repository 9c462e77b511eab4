"""A bytecode cache of the agent's own for the interpreters it starts (PYTHONPYCACHEPREFIX).

Container images often set PYTHONDONTWRITEBYTECODE and install torch without .pyc files; every `import torch`
then compiles its 2,000-odd modules from source: 3.1-3.3 s on a lent H200 host (issue 22), against about a second
with bytecode. The agent's workers write their bytecode under a directory of the agent's own instead, never beside
the host's sources, and read it again on the next run (Python checks each file against its source's mtime and size,
so an upgraded torch is compiled afresh). Only when torch has no bytecode of its own for this interpreter: with the
prefix set, Python reads bytecode from there alone, so a host whose torch was installed with it keeps its own. The
directory must be ours: created 0700, owned by this user, not a link;
otherwise nothing is cached. CUDAPROBE_BYTECODE_CACHE names it, or `off` turns the cache off (the children then
get the environment as it is); the default is $XDG_CACHE_HOME/cudaprobe/pycache (~/.cache/cudaprobe/pycache).
"""

import importlib.util
import os
import stat

OFF = ("off", "0", "no", "false")


def cache_dir(environ):
    """The cache directory for this environment, or None when it is turned off."""
    asked = environ.get("CUDAPROBE_BYTECODE_CACHE", "").strip()
    if asked.lower() in OFF:
        return None
    if asked:
        return asked
    base = environ.get("XDG_CACHE_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cudaprobe", "pycache")


def _ours(path):
    """True when path is a real directory owned by this user that no one else may write to."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def has_bytecode(package="torch", find=importlib.util.find_spec):
    """True when `package` (not imported) has a .pyc for this interpreter beside its __init__.py, or is not found."""
    try:
        spec = find(package)
    except (ImportError, ValueError):
        return True
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return True  # missing or not from source: nothing to gain, and torch.import says what is wrong
    return os.path.exists(importlib.util.cache_from_source(spec.origin))


def prepare(environ, find=importlib.util.find_spec):
    """Make the cache directory if needed; {"path", "warm"} when it can be used, else {"off": reason}."""
    path = cache_dir(environ)
    if path is None:
        return {"off": "CUDAPROBE_BYTECODE_CACHE=%s" % environ.get("CUDAPROBE_BYTECODE_CACHE")}
    if has_bytecode(find=find):
        return {"off": "torch has its own bytecode"}
    path = os.path.abspath(path)
    warm = os.path.isdir(path) and any(True for _ in os.scandir(path))
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        return {"off": "cannot create %s: %s" % (path, exc.strerror or exc)}
    if not _ours(path):
        return {"off": "%s is not a directory of this user's alone" % path}
    return {"path": path, "warm": warm}


def child_environment(env, state):
    """The children's environment with the cache in use (env is changed in place and returned)."""
    if state.get("path"):
        env["PYTHONPYCACHEPREFIX"] = state["path"]
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # it keeps .pyc out of the host's tree; the prefix does that too
    return env
