"""Stand-in watch reports: the recorded real reports of a 1 x H200 host (h200-gpus1-quick.json: its L0 and L1 checks;
merged/quick.json: its fabric checks), as `--mode watch --json` prints them, with faults written in from the
documented formats (the kernel's NVRM Xid line, NVML's fabric state, the NVLink error counters)."""

import copy
import json
import os
import stat
import sys
from pathlib import Path

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
UUID = "GPU-8d71e604-ce91-c01b-21ef-4de62f7aaacd"  # the 1 x H200 host's GPU (fixtures/real/nvidia-smi-L.txt)
BUS = "00000000:00:06.0"


def _base():
    quick = json.loads((REAL / "h200-gpus1-quick.json").read_text())
    fabric = [c for c in json.loads((REAL / "merged" / "quick.json").read_text())["checks"]
              if c["id"].startswith("fabric.")]
    checks = [c for c in quick["checks"] if c["layer"] in ("L0", "L1")] + fabric
    report = {k: v for k, v in quick.items() if k != "timing"}
    report.update(mode="watch", checks=checks, verdict="pass", duration_s=0.41)
    return report


BASE = _base()
FAULTS = {
    # NVIDIA Xid catalogue: 79 "GPU has fallen off the bus" (the driver's dmesg line format)
    "xid79": ("driver.xid", "fail", ["xid_critical", "gpu_fallen_off_bus"],
              "Xid 79 in the kernel log since the previous validation: GPU has fallen off the bus",
              "[ 8123.441207] NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, GPU has fallen off "
              "the bus."),
    # 13 after an illegal-address kernel: a workload's fault, seen this way on a real H200
    "xid13": ("driver.xid", "warn", ["xid_application"],
              "Xid 13 since the previous validation (usually raised by a faulting application: graphics engine "
              "exception)",
              "[ 9001.120033] NVRM: Xid (PCI:0000:00:06): 13, pid=48121, name=python3, Graphics Exception: "
              "ESR 0x404490=0x80000001"),
    "nvlink_growth": ("fabric.nvlink", "warn", ["nvlink_errors_growing"],
                      "NVLink error counters grew since the previous look: replay 12 -> 40",
                      "GPU 0: 18 of 18 links active; counters nvlink_replay_errors=40; link 3 replay=40"),
    "fabric_training": ("fabric.nvswitch", "warn", ["fabric_in_progress"],
                        "GPU %s fabric training still in progress: re-validate in a minute" % BUS,
                        "GPU %s: fabric state In Progress, status Success\nread through NVML" % BUS),
}


def watch_report(*faults):
    report = copy.deepcopy(BASE)
    by_id = {c["id"]: c for c in report["checks"]}
    for name in faults:
        check_id, status, signatures, summary, evidence = FAULTS[name]
        check = by_id[check_id]
        # the per-GPU finding as the agent writes it (agents/cudaprobe/gpu_identity.py, schema.json's checks[].gpus)
        check.update(status=status, signatures=signatures, summary=summary, evidence=evidence,
                     gpus=[{"index": 0, "uuid": UUID, "bus_id": BUS, "status": status, "signatures": signatures,
                            "summary": summary}])
        if status == "fail" or report["verdict"] == "pass":
            report["verdict"] = status
    return report


def answer(argv, faults_path):
    """What the stand-in agent prints: the watch report with the faults of `faults_path`, or for a validation
    (--mode standard, burnin, ...) the recorded real standard report of the host in that mode."""
    if argv[:3] == ["--mode", "watch", "--json"]:
        report = watch_report(*open(faults_path).read().split())
    else:
        report = json.loads((REAL / "h200-gpus1-standard.json").read_text())
        report["mode"] = argv[argv.index("--mode") + 1]
    print(json.dumps(report))


def standin_agent(directory):
    """An executable that answers `<python> <agent> --mode watch --json` like the agent, with the faults named in
    `directory`/faults (one a line, read at each look): the node's python_path points at it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "faults").write_text("")
    script = directory / "python"
    script.write_text("#!%s\nimport sys\nsys.path.insert(0, %r)\nfrom tests.health.standin import answer\n"
                      "answer(sys.argv[2:], %r)\n" % (sys.executable, str(Path(__file__).resolve().parents[2]),
                                                     str(directory / "faults")))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def standin_nvidia_smi(directory, *, busy_pid=None, reset_exit=0):
    """A stand-in nvidia-smi: `--query-gpu=uuid --format=csv,noheader` lists the host's GPU (one UUID a line, as
    nvidia-smi prints it; `directory`/gpu-uuids, which a test may write), `--query-compute-apps=gpu_uuid,pid
    --format=csv,noheader` lists `busy_pid` on the GPU (or nothing), `-r -i <gpu>` answers as the driver does and
    exits `reset_exit`; every call is logged."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "nvidia-smi.log"
    log.write_text("")
    script = directory / "nvidia-smi"
    apps = "%s, %d\\n" % (UUID, busy_pid) if busy_pid else ""
    uuids = directory / "gpu-uuids"  # what --query-gpu=uuid lists: the host's GPU, or what a test writes here
    uuids.write_text(UUID + "\n")
    script.write_text(
        "#!/bin/sh\necho \"$*\" >> %s\ncase \"$1\" in\n  --query-gpu=uuid) cat %s ;;\n"
        "  --query-compute-apps=*) printf '%s' ;;\n"
        "  -r) if [ %d -eq 0 ]; "
        "then echo \"GPU 00000000:00:06.0 was successfully reset.\"; else echo \"Unable to reset GPU "
        "00000000:00:06.0 because it's being used by some other process\" >&2; fi; exit %d ;;\nesac\n" % (
            log, uuids, apps, reset_exit, reset_exit))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, log


_WORKER_SMI = []


def worker_nvidia_smi():
    """The stand-in nvidia-smi of the test session's Celery worker, (script, log): the worker is a process of its
    own, started once a session, that reads CUDAWEB_NVIDIA_SMI from its environment, so every test module that
    resets through it shares this one, named in the environment at import (before any worker starts)."""
    if not _WORKER_SMI:
        import tempfile

        _WORKER_SMI.extend(standin_nvidia_smi(tempfile.mkdtemp(prefix="cudaweb-loop-smi-")))
        os.environ["CUDAWEB_NVIDIA_SMI"] = str(_WORKER_SMI[0])
    return tuple(_WORKER_SMI)


if __name__ == "__main__":
    json.dump(watch_report(*sys.argv[1:]), sys.stdout)
    os.write(1, b"\n")
