"""The watch's own cost (issue 30) on this machine: the real agent process against stand-ins replaying the recorded
H200 outputs (tests/agent/harness.py), widened to N GPUs (index, UUID and PCI address per GPU; the documented HGX
NVLink texts and an 8-GPU topology), so that what is measured is the agent, not a driver.

    .venv/bin/python bench/watch_cost.py [GPUS] [RUNS]      # default 8 GPUs, 5 runs per path
"""

import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.agent.harness import FAKE_BIN, REPO, TESTS, Scenario  # noqa: E402


def widened(root, gpus):
    scenario = Scenario(root / "host")
    first = (scenario.root / "L.txt").read_text().splitlines()[0]
    uuid_tail = first.rsplit("-", 1)[1].rstrip(")")
    scenario.write("L.txt", "".join(first.replace("GPU 0:", "GPU %d:" % i).replace(uuid_tail, "%s%04x" % (
        uuid_tail[:8], i)) + "\n" for i in range(gpus)))
    header, row = (scenario.root / "query.csv").read_text().splitlines()[:2]
    bus = row.split(", ")[4]
    scenario.write("query.csv", "\n".join([header] + [
        row.replace("0, NVIDIA", "%d, NVIDIA" % i, 1).replace(uuid_tail, "%s%04x" % (uuid_tail[:8], i)).replace(
            bus, "00000000:%02X:00.0" % (0x18 + i)) for i in range(gpus)]) + "\n")
    text = (scenario.root / "q.txt").read_text()
    head, rest = text.split("\nGPU %s" % bus, 1)
    block = "GPU %s" % bus + rest.split("\nGPU ", 1)[0]
    scenario.write("q.txt", head + "".join("\n" + block.replace(bus, "00000000:%02X:00.0" % (0x18 + i))
                                           for i in range(gpus)) + "\n")
    spec = importlib.util.spec_from_file_location("make_tree", TESTS / "fixtures/fabric/hgx-documented/make_tree.py")
    make_tree = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_tree)
    tree = make_tree.build(root / "hgx")
    if gpus == 8:
        for name in ("nvlink_s.txt", "nvlink_e.txt"):
            scenario.write(name, (tree / name).read_text())
        scenario.write("topo.txt", (TESTS / "fixtures/topo/tab_format_8gpu_nv18_12nics_trailing_tabs.txt").read_text())
    return scenario


def main():
    gpus = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    root = Path(tempfile.mkdtemp(prefix="watch-cost-"))
    try:
        scenario = widened(root, gpus)
        for name, path, extra in (("NVML stand-in", "%s:%s" % (TESTS / "fakes" / "pynvml_replay", REPO), {}),
                                  ("nvidia-smi stand-in", str(REPO), {"CUDAPROBE_NVML": "0"})):
            env = dict(PATH="%s:/usr/bin:/bin" % FAKE_BIN, HOME="/root", PYTHONPATH=path,
                       CUDAPROBE_BYTECODE_CACHE="off", **scenario.env, **extra)
            walls, durations = [], []
            for _ in range(runs):
                started = time.monotonic()
                done = subprocess.run([sys.executable, "-m", "agents.cudaprobe", "--mode", "watch", "--json"], env=env,
                                      capture_output=True, text=True, cwd=REPO)
                walls.append(time.monotonic() - started)
                report = json.loads(done.stdout)
                durations.append(report["duration_s"])
            print("%d GPUs, %s: verdict %s; wall median %.2f s (max %.2f); report duration_s median %.2f" % (
                report["inventory"].get("gpu_count"), name, report["verdict"], statistics.median(walls), max(walls),
                statistics.median(durations)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
