"""The agent's collective mode, --world N --rank k: one all-reduce over N processes that meet at rank 0 (N nodes
in the allreduce plan; here N processes on loopback, gloo, torch's CPU build)."""

import json
import os
import socket
import subprocess
import sys

from tests.agent.harness import REPO


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _agent(*args, env=None):
    return subprocess.Popen([sys.executable, "-m", "agents.cudaprobe", "--json", "--mode", "quick", *args], cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_bad_rank_arguments_are_clear_errors():
    for args, message in ((["--world", "3", "--rank", "3", "--master", "127.0.0.1:1"], "0 <= K < N"),
                          (["--world", "3", "--rank", "1"], "--master ADDR:PORT"),
                          (["--rank", "1", "--peer-role", "rank1", "--master", "127.0.0.1:1"], "not both")):
        done = _agent(*args)
        _, err = done.communicate(timeout=60)
        assert done.returncode == 2 and message in err, err


def test_three_ranks_run_one_all_reduce_and_report_the_links_speed(tmp_path):
    net = tmp_path / "sysfs" / "class" / "net" / "lo"
    net.mkdir(parents=True)
    (net / "speed").write_text("25000\n")  # sysfs-class-net: Mb/s
    port = _free_port()
    env = {"GLOO_SOCKET_IFNAME": "lo", "CUDAPROBE_SYSFS": str(tmp_path / "sysfs")}
    agents = [_agent("--only", "comm.peer", "--world", "3", "--rank", str(rank), "--master", "127.0.0.1:%d" % port,
                     "--peer-timeout", "60", env=env) for rank in range(3)]
    reports = [json.loads(agent.communicate(timeout=240)[0]) for agent in agents]
    for rank, report in enumerate(reports):
        peer = next(c for c in report["checks"] if c["id"] == "comm.peer")
        assert peer["status"] == "pass", peer["summary"]
        assert "rank %d of 3" % rank in peer["summary"]
        assert peer["metrics"]["peer_world"] == 3 and peer["metrics"]["peer_gloo_busbw_gbs.4mib"] > 0
        assert peer["metrics"]["peer_link_speed_mbps"] == 25000 and peer["metrics"]["peer_gloo_latency_us"] > 0
