"""The compile ahead of the workers on a host's first run (agents/cudaprobe/precompile.py): a real interpreter
compiles the listed torch files present into the agent's cache, in the list's order, and an import then reads that
bytecode instead of compiling; the run starts it only on a cache found empty and no process outlives the run."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from agents.cudaprobe import children, engine, precompile
from tests.agent.harness import processes_with_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _site(tmp_path, count=40):
    """A site directory whose `torch` is source only: the first `count` files of the real list, each a module."""
    site = tmp_path / "site"
    names = [n for n in precompile.listed() if n.startswith("torch/")][:count]
    for name in names:
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("VALUE = %r\n" % name)
    for folder in {site / n for n in names} | {site / "torch" / "__init__.py"}:
        for parent in folder.relative_to(site).parents:  # every folder a package, as torch's are
            init = site / parent / "__init__.py"
            if str(parent) != "." and not init.exists():
                init.write_text("")
    return site, names


def _bytecode(cache, site):
    """The bytecode under the prefix for the files of `site` (the interpreter's own modules may be there too)."""
    mirror = Path(str(cache) + str(site))
    return {str(p): p.stat().st_mtime_ns for p in mirror.rglob("*.pyc")}


def test_the_listed_files_are_compiled_into_the_cache_and_an_import_reads_them(tmp_path):
    site, names = _site(tmp_path)
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), REPO]), PYTHONPYCACHEPREFIX=str(cache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run([sys.executable, "-m", "agents.cudaprobe.precompile", "2"], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    figures = json.loads(done.stdout)
    assert figures["files"] == len(precompile.files(str(site))) >= len(names) and figures["jobs"] == 2
    written = _bytecode(cache, site)
    assert len(written) == figures["files"]
    probe = "import sys, torch, %s; print(torch.__cached__.startswith(sys.pycache_prefix))" % ", ".join(
        n[:-3].replace("/", ".") for n in names[1:4])
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True" and _bytecode(cache, site) == written  # read, none compiled again
    assert not (site / "torch" / "__pycache__").exists()  # nothing beside the host's sources


def test_without_a_cache_prefix_nothing_is_compiled_and_the_jobs_leave_a_core(tmp_path):
    site, _ = _site(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), REPO]))
    env.pop("PYTHONPYCACHEPREFIX", None)
    done = subprocess.run([sys.executable, "-m", "agents.cudaprobe.precompile", "1"], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    assert json.loads(done.stdout)["files"] == 0
    assert [precompile.jobs_for(n) for n in (1, 2, 4, 16, 128)] == [1, 1, 3, 8, 8]


def test_a_run_on_an_empty_cache_starts_it_once_and_its_end_collects_it(tmp_path, monkeypatch):
    site, _ = _site(tmp_path)
    environ = dict(os.environ, CUDAPROBE_BYTECODE_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(site))
    monkeypatch.setattr(children.bytecode, "has_bytecode", lambda **_: False)  # this test's torch is the fake one
    ctx = engine.Context("quick", environ=environ)
    children.child_env(ctx)
    started = ctx.precompile
    assert started is not None and ctx.bytecode["warm"] is False
    children.child_env(ctx)
    assert ctx.precompile is started  # once a run
    started.wait(timeout=120)
    ctx.close()
    assert ctx.bytecode["precompiled"]["files"] > 0 and ctx.precompile is None
    warm = engine.Context("quick", environ=environ)  # the next run finds the cache warm: nothing started
    children.child_env(warm)
    assert warm.bytecode["warm"] is True and warm.precompile is None


def test_a_compile_still_running_when_the_run_ends_is_stopped_with_its_session(tmp_path):
    mark = str(tmp_path)
    busy = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60"], env=dict(os.environ, CUDAPROBE_TEST_MARK=mark),
                            stdout=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 10
    while len(processes_with_env("CUDAPROBE_TEST_MARK", mark)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert precompile.finish(busy) == {"stopped": "still compiling when the run ended"}
    deadline = time.monotonic() + 10
    while processes_with_env("CUDAPROBE_TEST_MARK", mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes_with_env("CUDAPROBE_TEST_MARK", mark)
