"""--exit-with-stdin (every run through the dashboard passes it): the agent ends as it does without it, with its
verdict's exit status, while whoever started it still holds its stdin open (issue 33: at exit it waited 1 s for
sys.stdin's lock, held by the thread that watches stdin, then aborted with status 134)."""

import json
import os
import subprocess
import sys

from tests.agent.harness import FAKE_BIN, FAKE_TORCH, REPO, Scenario


def _run(tmp_path, *extra):
    """(exit status, report, stderr) of a quick run whose stdin stays open until the agent has ended."""
    scenario = Scenario(tmp_path / ("host" + "".join(extra)))
    env = dict(os.environ, PATH="%s:/usr/bin:/bin" % FAKE_BIN, PYTHONPATH="%s:%s" % (FAKE_TORCH, REPO),
               CUDAPROBE_BYTECODE_CACHE="off", **scenario.env)
    with open(tmp_path / ("stderr" + "".join(extra)), "w+b") as err:
        agent = subprocess.Popen([sys.executable, "-m", "agents.cudaprobe", "--mode", "quick", "--json", *extra],
                                 cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        try:
            out = agent.stdout.read()
            status = agent.wait(timeout=120)
        finally:
            agent.stdin.close()
            agent.kill()
            agent.wait()
        err.seek(0)
        return status, json.loads(out), err.read().decode()


def test_the_agent_watching_its_stdin_ends_with_its_verdict(tmp_path):
    plain_status, plain, _ = _run(tmp_path)
    status, report, err = _run(tmp_path, "--exit-with-stdin")
    assert "could not acquire lock" not in err
    assert report["verdict"] == plain["verdict"] and status == plain_status
