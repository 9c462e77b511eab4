"""The node-local health command (issue 31): `python -m agents.cudaprobe health` and the zipapp's `health`, its exit
codes, node-problem-detector's plugin output, the prolog's job GPUs, its budget, and the report it posts to the
dashboard (a real HTTP server here, one that never answers, and a closed port).

The real agent process runs against the recorded 2 x H200 outputs (tests/agent/harness.py); the Slurm drain is
tested on a real slurmctld/slurmd in tests/agent/test_health_slurm.py.
"""

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from agents.cudaprobe import health, nvsmi
from tests.agent.harness import FAKE_BIN, REPO, TESTS, Scenario, processes_with_env

NVML_PATH = "%s:%s" % (TESTS / "fakes" / "pynvml_replay", REPO)


@pytest.fixture
def scenario(tmp_path):
    return Scenario(tmp_path / "host")


def run_health(scenario, *args, env=None, timeout=60, argv0=("-m", "agents.cudaprobe")):
    full = {"PATH": "%s:/usr/bin:/bin" % FAKE_BIN, "HOME": os.environ.get("HOME", "/root"), "PYTHONPATH": NVML_PATH,
            "LANG": "C.UTF-8", "CUDAPROBE_BYTECODE_CACHE": "off"}
    full.update(scenario.env)
    full.update(env or {})
    started = time.monotonic()
    done = subprocess.run([sys.executable, *argv0, "health", *args], cwd=REPO, env=full, capture_output=True,
                          text=True, timeout=timeout)
    return done, time.monotonic() - started


def ecc_on(scenario, index):
    rows = (scenario.root / "query.csv").read_text().splitlines()
    assert "Enabled, 0, [N/A]" in rows[1 + index]
    rows[1 + index] = rows[1 + index].replace("Enabled, 0, [N/A]", "Enabled, 3, [N/A]")
    scenario.write("query.csv", "\n".join(rows) + "\n")


def uuid_of(scenario, index):
    return {g["index"]: g["uuid"] for g in nvsmi.parse_list((scenario.root / "L.txt").read_text())}[index]


def test_a_healthy_node_exits_0_and_says_so(scenario):
    done, wall = run_health(scenario)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("cudaweb health: healthy:")
    assert wall < 20


def test_a_fault_exits_1_naming_the_root_cause(scenario):
    ecc_on(scenario, 1)
    done, _ = run_health(scenario)
    assert done.returncode == 1
    assert done.stdout.startswith("cudaweb health: ecc_uncorrected: GPU 1: 3 uncorrected ECC errors")


def test_an_application_xid_leaves_the_node_healthy_with_a_warning(scenario):
    with open(scenario.root / "dmesg.txt", "a") as log:
        log.write("[ 5001.000001] NVRM: Xid (PCI:0000:00:06): 31, pid=4242, name=python3, Ch 00000008, intr 0. "
                  "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x0_00000000.\n")
    done, _ = run_health(scenario)
    assert done.returncode == 0
    assert "warnings: xid_application" in done.stdout


def test_a_driver_that_never_answers_past_the_budget_is_could_not_judge_and_leaves_nothing_behind(scenario):
    scenario.write("behaviour", "hang")  # the stand-in nvidia-smi sleeps an hour
    scenario.write("nvml_behaviour", "hang")  # and NVML's init never returns
    tag = "i30agent-health-%d" % os.getpid()
    done, wall = run_health(scenario, "--budget-s", "1", "--npd", env={"CUDAWEB_TEST_TAG": tag})
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "could not judge: the checks did not finish within 1 s\n"
    assert wall < 4, wall
    time.sleep(0.5)
    assert processes_with_env("CUDAWEB_TEST_TAG", tag) == []


def broken_meminfo(scenario):
    """The environment of a host whose /proc/meminfo gives MemTotal as no number: host.system's parser raises on it
    (a check that broke, not a finding)."""
    scenario.write("meminfo", "MemTotal:       unknown kB\nMemFree:        1024 kB\n")
    return {"CUDAPROBE_PROC_MEMINFO": str(scenario.root / "meminfo")}


def test_a_check_that_raised_is_could_not_judge_and_names_the_check(scenario):
    done, _ = run_health(scenario, env=broken_meminfo(scenario))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.startswith("cudaweb health: could not judge: host.system raised: check raised ValueError"), \
        done.stdout
    done, _ = run_health(scenario, "--npd", env=broken_meminfo(scenario))
    assert done.returncode == 2  # node-problem-detector's Unknown
    assert done.stdout.startswith("could not judge: host.system raised") and len(done.stdout.rstrip("\n")) <= 80


def test_a_fault_found_beside_a_check_that_raised_is_still_unhealthy(scenario):
    ecc_on(scenario, 1)
    done, _ = run_health(scenario, env=broken_meminfo(scenario))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("cudaweb health: ecc_uncorrected: GPU 1")


def test_npd_prints_one_line_of_at_most_80_characters(scenario):
    ecc_on(scenario, 0)
    scenario.edit("query.csv", "Default, Enabled, Enabled, 0", "Prohibited, Enabled, Enabled, 0")  # a second fault
    done, _ = run_health(scenario, "--npd")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and len(lines[0]) <= health.NPD_MAX_OUTPUT, lines
    assert lines[0].startswith("compute_mode_prohibited:") or lines[0].startswith("ecc_uncorrected:")
    healthy = Scenario(scenario.root.parent / "healthy")
    done, _ = run_health(healthy, "--npd")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 1


@pytest.mark.parametrize("variable, value, expected", [
    ("SLURM_JOB_GPUS", "0", 0),
    ("SLURM_JOB_GPUS", "1", 1),
    ("SLURM_JOB_GPUS", "0,1", 1),
    ("SLURM_STEP_GPUS", "0", 0),
    ("CUDA_VISIBLE_DEVICES", "uuid:0", 0),
    ("CUDA_VISIBLE_DEVICES", "uuid:1", 1),
])
def test_prolog_judges_the_jobs_gpus_only(scenario, variable, value, expected):
    ecc_on(scenario, 1)
    if value.startswith("uuid:"):
        value = uuid_of(scenario, int(value[5:]))
    done, wall = run_health(scenario, "--prolog", env={variable: value})
    assert done.returncode == expected, done.stdout
    assert "GPUs of %s=%s" % (variable, value) in done.stdout
    assert wall <= 5.0, wall


def test_prolog_counts_a_fault_of_the_whole_node_for_every_job(scenario):
    scenario.write("modules", "nvidia 1 0 - Live 0x0\n")  # nvidia_uvm missing: no GPU of the node can run CUDA
    done, _ = run_health(scenario, "--prolog", env={"SLURM_JOB_GPUS": "0"})
    assert done.returncode == 1 and "nvidia_uvm_missing" in done.stdout


def test_the_zipapp_answers_health_the_same(scenario, tmp_path):
    from cudaweb.remote import bundle

    payload, _ = bundle.build()
    zipapp = tmp_path / "cudaprobe.pyz"
    zipapp.write_bytes(payload)
    ecc_on(scenario, 1)
    done, _ = run_health(scenario, "--npd", argv0=(str(zipapp),), env={"PYTHONPATH": str(TESTS / "fakes" /
                                                                                        "pynvml_replay")})
    assert done.returncode == 1 and done.stdout.startswith("ecc_uncorrected:"), done.stdout + done.stderr


class Dashboard(http.server.BaseHTTPRequestHandler):
    """What the watch-report endpoint receives (the endpoint itself is the dashboard's, tests/api)."""

    received = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Dashboard.received.append((self.path, self.headers["Authorization"], self.headers["Content-Type"],
                                   json.loads(body)))
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def dashboard():
    Dashboard.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Dashboard)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_report_is_posted_to_the_dashboard_with_the_nodes_credential(scenario, dashboard, tmp_path):
    token = tmp_path / "node-credential"
    token.write_text("s3cret-token\n")
    ecc_on(scenario, 1)
    done, _ = run_health(scenario, "--dashboard", dashboard, "--credential-file", str(token), "--node", "gpu-07")
    assert done.returncode == 1
    [(path, authorization, content_type, report)] = Dashboard.received
    assert path == "/api/v1/nodes/gpu-07/watch-report/"
    assert authorization == "Bearer s3cret-token" and content_type == "application/json"
    assert report["mode"] == "watch" and report["verdict"] == "fail"
    assert "reported to %s/api/v1/nodes/gpu-07/watch-report/ (HTTP 202)" % dashboard in done.stderr


def test_the_credential_and_url_may_come_from_the_environment(scenario, dashboard):
    done, _ = run_health(scenario, "--node", "gpu-08", env={"CUDAWEB_URL": dashboard,
                                                            "CUDAWEB_NODE_CREDENTIAL": "cwn_t0k"})
    assert done.returncode == 0
    assert [(p, a) for p, a, _, _ in Dashboard.received] == [("/api/v1/nodes/gpu-08/watch-report/",
                                                               "Bearer cwn_t0k")]


def test_the_credential_is_read_from_the_default_file_written_by_the_dashboard():
    """The dashboard's CUDAWEB_NODE_CREDENTIAL_PATH default and the health command's are the same file."""
    from django.conf import settings

    from agents.cudaprobe.health import CREDENTIAL_PATH

    assert CREDENTIAL_PATH == settings.CUDAWEB_NODE_CREDENTIAL_PATH == "/etc/cudaweb/node-credential"


def test_the_dashboard_may_know_the_node_by_another_name_than_slurm(scenario, dashboard):
    done, _ = run_health(scenario, "--node", "gpu-fake-01", "--dashboard-node", "gpu-0042.cluster",
                         env={"CUDAWEB_URL": dashboard, "CUDAWEB_TOKEN": "t0k"})
    assert done.returncode == 0
    assert [p for p, _, _, _ in Dashboard.received] == ["/api/v1/nodes/gpu-0042.cluster/watch-report/"]


def test_without_a_token_nothing_is_posted(scenario, dashboard):
    done, _ = run_health(scenario, "--dashboard", dashboard)
    assert done.returncode == 0 and Dashboard.received == []


def test_a_dashboard_that_never_answers_costs_at_most_two_seconds_and_changes_no_answer(scenario):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections (the kernel does), never answers
    try:
        url = "http://127.0.0.1:%d" % silent.getsockname()[1]
        baseline, plain = run_health(scenario)
        done, slow = run_health(scenario, "--dashboard", url, env={"CUDAWEB_TOKEN": "t"})
    finally:
        silent.close()
    assert done.returncode == baseline.returncode == 0
    assert slow - plain < 2.0 + 1.0, (plain, slow)  # the 2 s limit, and this machine's noise
    assert "could not report" in done.stderr


def test_a_dashboard_that_refuses_connections_changes_no_answer(scenario):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    ecc_on(scenario, 0)
    done, _ = run_health(scenario, "--dashboard", "http://127.0.0.1:%d" % port, env={"CUDAWEB_TOKEN": "t"})
    assert done.returncode == 1 and "could not report" in done.stderr


def test_job_gpus_read_slurm_first_then_cuda_visible_devices():
    assert health.job_gpus({"SLURM_JOB_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0"}) == (
        "SLURM_JOB_GPUS", {"index": {2, 3}, "uuid": set()})
    assert health.job_gpus({"CUDA_VISIBLE_DEVICES": "GPU-abc,1"}) == (
        "CUDA_VISIBLE_DEVICES", {"index": {1}, "uuid": {"GPU-abc"}})
    assert health.job_gpus({}) == (None, None)


def _duration_s(text):
    assert text.endswith("s") and text[:-1].isdigit(), text
    return int(text[:-1])


def test_the_readmes_npd_config_is_valid_for_npd_and_runs_the_command(scenario, tmp_path):
    """The README's custom plugin monitor, held to NPD's own rules (pkg/custompluginmonitor/types: the fields it
    reads, a permanent rule's condition among the defaults, a rule's timeout within the global one), then its rule
    run as NPD would, with the zipapp at the path it names."""
    from cudaweb.remote import bundle

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("node-problem-detector (a custom plugin monitor"):]
    config = json.loads(section[section.index("```json") + 7:section.index("```", section.index("```json") + 7)])
    assert set(config) <= {"plugin", "pluginConfig", "source", "conditions", "rules", "metricsReporting"}
    assert config["plugin"] == "custom"
    global_config = config["pluginConfig"]
    assert set(global_config) <= {"invoke_interval", "timeout", "max_output_length", "concurrency",
                                  "enable_message_change_based_condition_update", "skip_initial_status"}
    assert global_config["max_output_length"] == health.NPD_MAX_OUTPUT
    [rule] = config["rules"]
    assert set(rule) <= {"type", "condition", "reason", "path", "args", "timeout", "invoke_interval"}
    assert rule["type"] == "permanent" and rule["condition"] in {c["type"] for c in config["conditions"]}
    assert _duration_s(rule["timeout"]) <= _duration_s(global_config["timeout"])
    payload, _ = bundle.build()
    zipapp = tmp_path / "cudaprobe.pyz"
    zipapp.write_bytes(payload)
    args = [str(zipapp) if arg.endswith("cudaprobe.pyz") else arg for arg in rule["args"]]
    assert rule["path"].endswith("python3")
    ecc_on(scenario, 0)
    env = dict(scenario.env, PATH="%s:/usr/bin:/bin" % FAKE_BIN, PYTHONPATH=str(TESTS / "fakes" / "pynvml_replay"),
               CUDAPROBE_BYTECODE_CACHE="off", HOME=os.environ.get("HOME", "/root"))
    done = subprocess.run([sys.executable] + args, env=env, capture_output=True, text=True,
                          timeout=_duration_s(rule["timeout"]))
    assert done.returncode == 1  # NonOK
    assert len(done.stdout.rstrip("\n")) <= global_config["max_output_length"]
    assert done.stdout.startswith("ecc_uncorrected: GPU 0")


def test_prolog_leaves_out_a_gpu_whose_compute_mode_forbids_work_when_the_job_has_another(scenario):
    rows = (scenario.root / "query.csv").read_text().splitlines()
    rows[2] = rows[2].replace("Default, Enabled, Enabled", "Prohibited, Enabled, Enabled")
    scenario.write("query.csv", "\n".join(rows) + "\n")
    done, _ = run_health(scenario, "--prolog", env={"SLURM_JOB_GPUS": "0"})
    assert done.returncode == 0, done.stdout
    done, _ = run_health(scenario, "--prolog", env={"SLURM_JOB_GPUS": "1"})
    assert done.returncode == 1 and done.stdout.startswith("cudaweb health: compute_mode_prohibited:")
