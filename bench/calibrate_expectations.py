"""Prints the healthy fraction of peak for each figure from the real H200 reports in tests/fixtures/real/
(the medians that agents/cudaprobe/expectations.py keeps in HEALTHY_FRACTION and MEASURED).

    python3 bench/calibrate_expectations.py
"""

import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agents.cudaprobe import expectations  # noqa: E402

REPORTS = sorted((REPO / "tests" / "fixtures" / "real").glob("h200*.json"))
REPORTS += sorted((REPO / "tests" / "fixtures" / "real" / "issue22" / "lease3").glob("after-*.json"))


SETTLED_S = 0.2  # matmul figures count only from reports whose products ran this long before timing (issue 22)


def per_gpu_values(names):
    """{metric: [every GPU's figure in every healthy report]} (GPU-level keys like matmul_bf16_tflops.gpu0).

    Matmul figures come only from reports that timed them once the GPU had settled at its power limit
    (cuda.matmul's matmul_warmup_s): the earlier ones timed the first ~0.1 s, 15-19 % above it."""
    values = {}
    for path in REPORTS:
        report = json.loads(path.read_text())
        if report["verdict"] != "pass":
            continue
        for check in report["checks"]:
            settled = check["id"] != "cuda.matmul" or check["metrics"].get("matmul_warmup_s", 0) >= SETTLED_S
            for key, value in check["metrics"].items() if settled else ():
                base, _, gpu = key.partition(".")
                if base in names and gpu.startswith("gpu"):
                    values.setdefault(base, []).append(value)
                if base in names and base in ("nccl_busbw_gbs",) and gpu == "1024mib":
                    values.setdefault(base, []).append(value)
                if base in names and base == "p2p_copy_gbs" and gpu and not gpu.startswith("gpu"):
                    values.setdefault(base, []).append(value)
    return values


def fractions():
    h200 = expectations.sku_for("NVIDIA H200")
    link = expectations.pcie_gbs(*h200["pcie"])
    peaks = {metric: h200[key] for metric, key in expectations.MATMUL_KEYS.items()}
    peaks.update(h2d_pinned_gbs=link, d2h_pinned_gbs=link, p2p_copy_gbs=expectations.nvlink_gbs(h200, 18),
                 nccl_busbw_gbs=expectations.nvlink_gbs(h200, 18))
    values = per_gpu_values(set(peaks) | {"resnet18_amp_bf16_img_s"})
    found = {metric: (statistics.median(values[metric]) / peak, len(values[metric])) for metric, peak in peaks.items()}
    found["resnet18_amp_bf16_img_s"] = (statistics.median(values["resnet18_amp_bf16_img_s"]),
                                        len(values["resnet18_amp_bf16_img_s"]))
    return found


if __name__ == "__main__":
    print("%d healthy H200 reports" % sum(1 for p in REPORTS if json.loads(p.read_text())["verdict"] == "pass"))
    for metric, (value, count) in sorted(fractions().items()):
        kept = expectations.HEALTHY_FRACTION.get(metric) or expectations.MEASURED["H200"].get(metric)
        print("%-26s %10.3f  (n=%d; expectations.py keeps %s)" % (metric, value, count, kept))
