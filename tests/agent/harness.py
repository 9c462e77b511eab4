"""Runs the real agent process against a crafted environment built from the recorded H200 outputs.

A scenario is a directory the fake nvidia-smi and dmesg replay from, plus a fake /proc/modules and /dev;
mutations edit the recorded text the way the fault would change it.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema

from agents.cudaprobe.report_schema import load_schema

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
REFERENCE = TESTS / "fixtures" / "reference" / "h200x2"
FAKE_BIN = TESTS / "fakes" / "bin"
FAKE_TORCH = TESTS / "fakes" / "torch_cu130"
VALIDATOR = jsonschema.Draft202012Validator(load_schema())


def probe_sections():
    """The '===== name =====' sections of probe.txt."""
    text = (REFERENCE / "probe.txt").read_text()
    parts = re.split(r"^===== (\S+) =====$", text, flags=re.M)
    return {parts[i]: parts[i + 1].strip("\n") + "\n" for i in range(1, len(parts) - 1, 2)}


class Scenario:
    def __init__(self, root):
        self.root = Path(root)
        self.dev = self.root / "dev"
        sections = probe_sections()
        self.root.mkdir(parents=True, exist_ok=True)
        self.dev.mkdir()
        self.write("L.txt", sections["nvidia-smi-L"])
        self.write("query.csv", sections["nvidia-smi-query-csv"])
        self.write("apps.csv", sections["nvidia-smi-compute-apps"])
        self.write("q.txt", (REFERENCE / "nvsmi_q.txt").read_text())
        self.write("dmesg.txt", sections["dmesg"])
        self.write("topo.txt", (TESTS / "fixtures" / "topo" / "h200x2_nv18_this_host.txt").read_text())
        # 18 NVLinks per GPU, all active: what NVML read on this host (probe.txt "p2p nvlink"); written in
        # nvidia-smi nvlink's documented format (tests/fixtures/fabric/hgx-documented/README.md), counters 0
        gpus = re.findall(r"^GPU (\d+): (.+)$", sections["nvidia-smi-L"], re.M)
        self.write("nvlink_s.txt", "".join("GPU %s: %s\n" % g + "".join("\t Link %d: 26.562 GB/s\n" % i
                                                                        for i in range(18)) for g in gpus))
        self.write("nvlink_e.txt", "".join("GPU %s: %s\n" % g + "".join(
            "\t Link %d: %s Errors: 0\n" % (i, c) for i in range(18) for c in ("Replay", "Recovery", "CRC"))
            for g in gpus))
        self.write("modules", "".join("%s 1 0 - Live 0x0\n" % name for name in sections["lsmod"].split()))
        for line in sections["dev"].splitlines():
            match = re.search(r"/dev/(nvidia[\w-]*)$", line)
            if match:
                (self.dev / match.group(1)).write_text("")
        self.env = {"FAKE_NVSMI_DIR": str(self.root), "CUDAPROBE_PROC_MODULES": str(self.root / "modules"),
                    "CUDAPROBE_DEV_DIR": str(self.dev)}

    def write(self, name, text):
        (self.root / name).write_text(text)

    def edit(self, name, old, new, count=1):
        text = (self.root / name).read_text()
        assert old in text, "%r not in %s" % (old, name)
        self.write(name, text.replace(old, new, count))


def run_agent(scenario=None, args=(), env=None, python=sys.executable, fake_nvidia_smi=True, timeout=180,
              wrapper=()):
    """Run `python -m agents.cudaprobe --json ...`; return (report, completed process). The report is schema-checked."""
    path = [str(FAKE_BIN)] if fake_nvidia_smi else []
    if not fake_nvidia_smi:
        # Keep the fake dmesg without the fake nvidia-smi: a directory holding only dmesg.
        only_dmesg = Path(scenario.root if scenario else "/tmp") / "bin-no-nvsmi"
        only_dmesg.mkdir(exist_ok=True)
        link = only_dmesg / "dmesg"
        if not link.exists():
            link.symlink_to(FAKE_BIN / "dmesg")
        path = [str(only_dmesg)]
    full_env = {"PATH": os.pathsep.join(path + ["/usr/bin", "/bin"]), "HOME": os.environ.get("HOME", "/root"),
                "PYTHONPATH": str(REPO), "LANG": "C.UTF-8",
                "CUDAPROBE_BYTECODE_CACHE": os.environ.get("CUDAPROBE_BYTECODE_CACHE", "off")}
    full_env.update(scenario.env if scenario else {})
    full_env.update(env or {})
    done = subprocess.run([*wrapper, python, "-m", "agents.cudaprobe", "--json", *args], cwd=REPO, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    report = json.loads(done.stdout)
    errors = list(VALIDATOR.iter_errors(report))
    assert not errors, errors[0].message
    return report, done


def processes_with_env(name, value):
    """Pids of the live processes whose environment holds name=value: the ones a test tagged itself, never a
    search by command name across the machine."""
    wanted = ("%s=%s" % (name, value)).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or not ours to read
        if wanted in environ:
            pids.append(int(entry.name))
    return pids


def check(report, check_id):
    matches = [c for c in report["checks"] if c["id"] == check_id]
    assert matches, "no check %s in %s" % (check_id, [c["id"] for c in report["checks"]])
    return matches[0]
