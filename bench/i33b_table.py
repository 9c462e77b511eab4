"""The table of bench/i33b_on_device.sh: per variant, the wall time of the bare standard run, the critical checks'
seconds, the judged figures and the train worker's first steps, median (min-max) over the rounds; the figures
against the plain reference loop of the same lease. Usage: python3 bench/i33b_table.py <folder of reports>."""

import glob
import json
import os
import statistics
import sys

CHECKS = ("torch.import", "cuda.context", "cuda.copy_bandwidth", "cuda.matmul", "comm.gloo", "train.resnet18")
FIGURES = ("matmul_bf16_tflops", "matmul_fp16_tflops", "matmul_tf32_tflops", "matmul_fp32_tflops",
           "h2d_pinned_gbs", "d2h_pinned_gbs", "h2d_pageable_gbs", "d2h_pageable_gbs", "resnet18_amp_bf16_img_s",
           "resnet18_amp_fp16_img_s")
PHASES = ("data_and_model_s", "amp_bf16.first_step_s", "amp_bf16.setup_s", "amp_fp16.first_step_s",
          "amp_fp16.setup_s", "prewarm.cuinit_s", "prewarm.cudnn_s")


def spread(values):
    if not values:
        return "-"
    return "%.3f (%.3f-%.3f)" % (statistics.median(values), min(values), max(values))


def main(folder):
    walls = {}
    for line in open(os.path.join(folder, "walls.txt")):
        variant, label, rc, wall = line.split()
        if label != "warm" and rc == "rc=0":
            walls.setdefault(variant, []).append(float(wall.split("=")[1]))
    refs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(folder, "reference-*.json")))]
    for variant in sorted(walls):
        reports = []
        for path in sorted(glob.glob(os.path.join(folder, "%s-[0-9]*.json" % variant))):
            try:
                reports.append(json.load(open(path)))
            except ValueError:
                print("%s: not JSON" % path)
        print("== %s: %d runs, verdicts %s" % (variant, len(reports), sorted({r["verdict"] for r in reports})))
        print("  %-34s %s" % ("wall s", spread(walls[variant])))
        print("  %-34s %s" % ("report duration_s", spread([r["duration_s"] for r in reports])))
        for check in CHECKS:
            rows = [c for r in reports for c in r["checks"] if c["id"] == check]
            print("  %-34s %s  starts %s" % (check, spread([c["duration_s"] for c in rows]),
                                            spread([c["started_s"] for c in rows])))
        for figure in FIGURES:
            values = [c["metrics"][figure] for r in reports for c in r["checks"] if figure in c.get("metrics", {})]
            ref = [x[figure] for x in refs if figure in x]
            ratio = " = %.1f %% of the loop's %s" % (100 * statistics.median(values) / statistics.median(ref),
                                                     spread(ref)) if values and ref else ""
            print("  %-34s %s%s" % (figure, spread(values), ratio))
        for phase in PHASES:
            values = [t["phases"][phase] for r in reports for c in r["checks"] if c["id"] == "train.resnet18"
                      for t in c.get("tasks", []) if phase in t.get("phases", {})]
            print("  %-34s %s" % ("train " + phase, spread(values)))
        for r in reports:
            worker = [w for w in r.get("timing", {}).get("workers", []) if w.get("role") == "train"]
            if worker:
                print("  train worker import %.2f preload %.2f" % (worker[0].get("import_s", 0),
                                                                  worker[0].get("preload_s", 0)))
        not_passed = sorted({(c["id"], c["status"]) for r in reports for c in r["checks"]
                             if c["status"] not in ("pass", "skip")})
        print("  not pass: %s" % (not_passed or "none"))


if __name__ == "__main__":
    main(sys.argv[1])
