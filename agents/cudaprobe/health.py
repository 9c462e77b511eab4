"""The node-local health check (issue 31): `python -m agents.cudaprobe health` (from the zipapp: `python cudaprobe.pyz
health`), for Slurm's HealthCheckProgram and Prolog and for node-problem-detector's custom plugins.

It runs the watch's checks (--mode watch: L0-L1 and the fabric, no torch) within a budget and answers with its exit
code: 0 healthy, 1 unhealthy, 2 could not judge (the budget ran out, or a check itself broke). Warnings, an
application's Xid among them, leave a node healthy: they are the dashboard's events, never a reason to pull a node.

    --slurm     on 1, drain this node: scontrol update nodename=<node> state=drain reason="cudaweb: <root cause>"
                (argv, no shell; under a short timeout, so that a node slurmctld does not know yet, as when slurmd runs
                the check before it registers (mej/nhc#159), is "could not drain", never a hang)
    --npd       node-problem-detector's custom plugin protocol: exit 0 OK / 1 NonOK / 2 Unknown and one line of at
                most 80 characters (its max_output_length default) on stdout
    --prolog    the job's GPUs only (SLURM_JOB_GPUS, SLURM_STEP_GPUS or CUDA_VISIBLE_DEVICES), budget 5 s
    --dashboard URL (or CUDAWEB_URL) with this node's own credential (--credential-file, default
                /etc/cudaweb/node-credential, written by `manage.py node_credential`; or CUDAWEB_NODE_CREDENTIAL):
                POST the report to URL/api/v1/nodes/<node>/watch-report/; at most 2 s, and a dashboard that cannot be
                reached changes neither the answer nor its exit code. The credential speaks for this node only.
"""

import argparse
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from agents.cudaprobe import proc
from agents.cudaprobe.engine import Context, select
from agents.cudaprobe.model import ERROR, FAIL, WARN
from agents.cudaprobe.registry import WATCH, load_all

HEALTHY, UNHEALTHY, UNKNOWN = 0, 1, 2
NPD_MAX_OUTPUT = 80  # node-problem-detector's custom plugin max_output_length default (types/config.go)
DEFAULT_BUDGET_S, PROLOG_BUDGET_S = 20.0, 5.0
DASHBOARD_TIMEOUT_S = 2.0
CREDENTIAL_PATH = "/etc/cudaweb/node-credential"  # the dashboard's CUDAWEB_NODE_CREDENTIAL_PATH default
REASON_CAP = 120  # Slurm keeps a longer reason, but sinfo -R and scontrol show node print it whole
JOB_GPU_VARIABLES = ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES")


def build_parser():
    parser = argparse.ArgumentParser(prog="cudaprobe health", description="Node-local GPU health check: exit 0 "
                                     "healthy, 1 unhealthy, 2 could not judge.")
    parser.add_argument("--budget-s", type=float, help="seconds for the whole check (default 20; 5 with --prolog); "
                        "past it the answer is 2, could not judge")
    parser.add_argument("--slurm", action="store_true", help="on unhealthy, drain this node with the root cause")
    parser.add_argument("--npd", action="store_true", help="node-problem-detector custom plugin output")
    parser.add_argument("--prolog", action="store_true", help="judge only the job's GPUs (SLURM_JOB_GPUS, "
                        "SLURM_STEP_GPUS or CUDA_VISIBLE_DEVICES)")
    parser.add_argument("--json", action="store_true", help="print the watch report (JSON) instead of one line")
    parser.add_argument("--node", help="this node's name for Slurm and the dashboard (default: SLURMD_NODENAME, "
                        "else the short host name)")
    parser.add_argument("--dashboard-node", metavar="NAME", help="this node's name in the dashboard, where it is not "
                        "its Slurm name (default: --node's)")
    parser.add_argument("--dashboard", metavar="URL", default=os.environ.get("CUDAWEB_URL"),
                        help="the cudaweb dashboard to report to (default: CUDAWEB_URL)")
    parser.add_argument("--credential-file", "--token-file", dest="credential_file",
                        help="file holding this node's credential (default: the CUDAWEB_NODE_CREDENTIAL variable, "
                        "else %s)" % CREDENTIAL_PATH)
    parser.add_argument("--since", metavar="ISO_TIME", help="kernel-log Xids older than this are history")
    parser.add_argument("--scontrol", default="scontrol", help=argparse.SUPPRESS)  # tests: a cluster's own scontrol
    return parser


def node_name(args, environ):
    return args.node or environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def job_gpus(environ):
    """(variable, {"index": set, "uuid": set}) of the job's GPUs, or (None, None) when no variable names any.
    Slurm gives indices; CUDA_VISIBLE_DEVICES may give UUIDs (GPU-...)."""
    for name in JOB_GPU_VARIABLES:
        raw = environ.get(name)
        if raw is None or not raw.strip():
            continue
        found = {"index": set(), "uuid": set()}
        for item in raw.split(","):
            item = item.strip()
            if item.isdigit():
                found["index"].add(int(item))
            elif item.startswith("GPU-"):
                found["uuid"].add(item)
        return name, found
    return None, None


def _concerns(result, gpus):
    """Whether a failed check concerns the job's GPUs: a finding per GPU counts for its GPU only; one that names
    no GPU (the driver, the kernel modules, the fabric) concerns every job."""
    if gpus is None or not result.get("gpus"):
        return True
    return any(entry["status"] == FAIL and (entry.get("index") in gpus["index"] or entry.get("uuid") in gpus["uuid"])
               for entry in result["gpus"])


def judge(report, gpus=None):
    """(exit code, one line) of a watch report: the first failed check (layer order) is the root cause."""
    checks = report["checks"]
    failed = [c for c in checks if c["status"] == FAIL and _concerns(c, gpus)]
    if failed:
        first = failed[0]
        signature = first["signatures"][0] if first["signatures"] else first["id"]
        return UNHEALTHY, "%s: %s" % (signature, first["summary"])
    broken = [c for c in checks if c["status"] == ERROR]
    if broken:
        return UNKNOWN, "could not judge: %s raised: %s" % (broken[0]["id"], broken[0]["summary"])
    warnings = sorted({s for c in checks if c["status"] == WARN and _concerns(c, gpus) for s in c["signatures"]})
    return HEALTHY, "healthy: %d checks%s" % (len(checks), "; warnings: " + ", ".join(warnings) if warnings else "")


def one_line(text, cap):
    text = " ".join(str(text).split())
    return text if len(text) <= cap else text[:cap - 3] + "..."


def drain(scontrol, node, cause, timeout):
    """Drain this node with the root cause; (ok, what happened). A timeout or an error is said, never raised."""
    reason = "cudaweb: " + one_line(cause, REASON_CAP - len("cudaweb: "))
    result = proc.run_now([scontrol, "update", "nodename=%s" % node, "state=drain", "reason=%s" % reason], timeout)
    if result.ok:
        return True, "drained %s: %s" % (node, reason)
    if result.missing:
        return False, "could not drain %s: %s not found" % (node, scontrol)
    if result.timed_out:
        return False, "could not drain %s: scontrol did not answer within %.0f s (slurmctld unreachable, or this " \
                      "node not registered yet)" % (node, timeout)
    return False, "could not drain %s: %s" % (node, one_line(result.combined() or "exit %s" % result.returncode, 200))


def read_token(args, environ):
    """This node's credential: --credential-file, else CUDAWEB_NODE_CREDENTIAL (CUDAWEB_TOKEN, its old name), else
    the default file where it exists; None when there is none."""
    if not args.credential_file:
        given = (environ.get("CUDAWEB_NODE_CREDENTIAL") or environ.get("CUDAWEB_TOKEN") or "").strip()
        if given:
            return given
    try:
        with open(args.credential_file or CREDENTIAL_PATH) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def post_report(url, token, node, report, timeout=DASHBOARD_TIMEOUT_S):
    """POST the report to the dashboard; what happened, in words. Never raises."""
    target = "%s/api/v1/nodes/%s/watch-report/" % (url.rstrip("/"), urllib.parse.quote(node, safe=""))
    request = urllib.request.Request(target, data=json.dumps(report).encode(), method="POST",
                                     headers={"Authorization": "Bearer %s" % token,
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return "reported to %s (HTTP %d)" % (target, answer.status)
    except urllib.error.HTTPError as exc:
        return "the dashboard refused the report: HTTP %d" % exc.code
    except Exception as exc:  # unreachable, slow, a bad URL: the check's answer stands without it
        return "could not report to %s: %s" % (target, one_line(exc, 160))


def start_report(url, token, node, report):
    """Post in a thread of its own, so that a dashboard slow to resolve or answer costs at most its 2 s."""
    said = []
    thread = threading.Thread(target=lambda: said.append(post_report(url, token, node, report)), daemon=True,
                              name="dashboard-report")
    thread.start()
    return thread, said


class Watchdog:
    """Ends the process with UNKNOWN when the checks overrun their share of the budget: a stuck driver read is
    killed with everything it started, and the answer is given in the format asked for."""

    def __init__(self, seconds, answer):
        self.timer = threading.Timer(seconds, self._expire, args=(seconds,))
        self.timer.daemon = True
        self.answer = answer

    def _expire(self, seconds):
        proc.kill_all(for_good=True)
        self.answer(UNKNOWN, "could not judge: the checks did not finish within %.0f s" % seconds)
        sys.stdout.flush()
        os._exit(UNKNOWN)

    def __enter__(self):
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()


def main(argv=None, environ=None):
    from agents.cudaprobe.cli import run_report  # the watch as the agent's own command line runs it

    args = build_parser().parse_args(argv)
    environ = dict(os.environ if environ is None else environ)
    started = time.monotonic()
    budget = args.budget_s or (PROLOG_BUDGET_S if args.prolog else DEFAULT_BUDGET_S)
    node = node_name(args, environ)
    token = read_token(args, environ)
    report_to = args.dashboard if args.dashboard and token else None
    scontrol_timeout = min(5.0, max(1.0, budget / 4))
    reserve = max(scontrol_timeout if args.slurm else 0, DASHBOARD_TIMEOUT_S if report_to else 0)
    checks_budget = max(1.0, budget - reserve)
    # one driver query may take a share of the budget; a hung one then is a finding, not an overrun
    environ.setdefault("CUDAPROBE_NVSMI_TIMEOUT", "%.1f" % max(1.0, checks_budget * 0.4))
    gpu_variable, gpus = job_gpus(environ) if args.prolog else (None, None)

    def answer(code, message):
        if args.npd:
            sys.stdout.write(one_line(message, NPD_MAX_OUTPUT) + "\n")
        elif not args.json:
            sys.stdout.write("cudaweb health: %s\n" % one_line(message, 400))

    with Watchdog(checks_budget, answer):
        ctx = Context(WATCH, {"since": args.since}, environ=environ)
        report = run_report(select(load_all(), WATCH), ctx)
    code, message = judge(report, gpus)
    if args.prolog:
        message += " (%s)" % ("GPUs of %s=%s" % (gpu_variable, environ[gpu_variable]) if gpu_variable
                              else "no job GPUs named: every GPU")
    posting = start_report(report_to, token, args.dashboard_node or node, report) if report_to else None
    notes = []
    if args.slurm and code == UNHEALTHY:
        notes.append(drain(args.scontrol, node, message, scontrol_timeout)[1])
    if posting:
        thread, said = posting
        thread.join(max(0.0, min(DASHBOARD_TIMEOUT_S, budget - (time.monotonic() - started))))
        notes.append(said[0] if said else "could not report to the dashboard within %.0f s" % DASHBOARD_TIMEOUT_S)
    if args.json:
        sys.stdout.write(json.dumps(report, indent=1, sort_keys=True) + "\n")
    answer(code, message)
    for note in notes:
        sys.stderr.write("cudaweb health: %s\n" % note)
    return code
