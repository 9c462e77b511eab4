"""The workers' bytecode cache (agents/cudaprobe/bytecode.py): used only where torch has no bytecode of its own,
in a directory of ours alone, and it really makes a real interpreter keep its bytecode out of the host's tree."""

import importlib.util
import os
import py_compile
import subprocess
import sys

from agents.cudaprobe import bytecode


def _package(tmp_path, name="sourceonly", compiled=False):
    root = tmp_path / "site"
    (root / name).mkdir(parents=True)
    init = root / name / "__init__.py"
    init.write_text("VALUE = 42\n")
    if compiled:
        py_compile.compile(str(init), cfile=importlib.util.cache_from_source(str(init)), doraise=True)
    return root, init


def _finder(root, package="sourceonly"):
    """find_spec as bytecode.py calls it for "torch", answering with the package made here."""
    def find(name):
        return importlib.util.spec_from_file_location(name, root / package / "__init__.py")
    return find


def test_a_torch_without_bytecode_gets_the_cache_and_one_with_it_keeps_its_own(tmp_path):
    root, init = _package(tmp_path)
    env = {"CUDAPROBE_BYTECODE_CACHE": str(tmp_path / "cache")}
    state = bytecode.prepare(env, find=_finder(root))
    assert state == {"path": str(tmp_path / "cache"), "warm": False}
    assert oct((tmp_path / "cache").stat().st_mode & 0o777) == "0o700"
    compiled_root, _ = _package(tmp_path / "other", compiled=True)
    assert bytecode.prepare(env, find=_finder(compiled_root)) == {"off": "torch has its own bytecode"}
    assert bytecode.has_bytecode(find=lambda name: None)  # no torch: nothing to cache, torch.import says why


def test_the_cache_can_be_turned_off_and_defaults_to_the_users_cache_directory(tmp_path):
    assert bytecode.prepare({"CUDAPROBE_BYTECODE_CACHE": "off"}) == {"off": "CUDAPROBE_BYTECODE_CACHE=off"}
    assert bytecode.cache_dir({"HOME": "/home/ops"}) == "/home/ops/.cache/cudaprobe/pycache"
    assert bytecode.cache_dir({"HOME": "/home/ops", "XDG_CACHE_HOME": "/var/c"}) == "/var/c/cudaprobe/pycache"


def test_a_directory_others_may_write_to_or_a_link_is_not_used(tmp_path):
    root, _ = _package(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    state = bytecode.prepare({"CUDAPROBE_BYTECODE_CACHE": str(shared)}, find=_finder(root))
    assert "not a directory of this user's alone" in state["off"]
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    state = bytecode.prepare({"CUDAPROBE_BYTECODE_CACHE": str(tmp_path / "link")}, find=_finder(root))
    assert "not a directory of this user's alone" in state["off"]
    blocked = tmp_path / "file"
    blocked.write_text("")
    state = bytecode.prepare({"CUDAPROBE_BYTECODE_CACHE": str(blocked / "pycache")}, find=_finder(root))
    assert state["off"].startswith("cannot create")


def test_a_real_interpreter_writes_its_bytecode_to_the_cache_and_reads_it_on_the_next_run(tmp_path):
    root, init = _package(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1",
               CUDAPROBE_BYTECODE_CACHE=str(tmp_path / "cache"))
    state = bytecode.prepare(env, find=_finder(root))
    child = bytecode.child_environment(dict(env), state)
    assert "PYTHONDONTWRITEBYTECODE" not in child and child["PYTHONPYCACHEPREFIX"] == state["path"]
    probe = "import sourceonly, sys; print(sourceonly.VALUE, sys.pycache_prefix)"
    out = subprocess.run([sys.executable, "-c", probe], env=child, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["42", state["path"]]
    mine = "__init__.%s.pyc" % sys.implementation.cache_tag
    assert [p for p in (tmp_path / "cache").rglob(mine) if p.parent.name == "sourceonly"]
    assert not (root / "sourceonly" / "__pycache__").exists()  # nothing written beside the host's sources
    assert bytecode.prepare(env, find=_finder(root))["warm"] is True
    # without the cache, the environment as it was: no bytecode anywhere
    plain = subprocess.run([sys.executable, "-c", probe], env=dict(env, PYTHONPYCACHEPREFIX=""),
                           capture_output=True, text=True, check=True)
    assert plain.stdout.split()[0] == "42" and not (root / "sourceonly" / "__pycache__").exists()
