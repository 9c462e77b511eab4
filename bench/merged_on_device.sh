#!/usr/bin/env bash
# The merged agent of 2026-12-01 (issues 20, 21, 22 together) on a lent GPU host, one call: quick, standard twice and
# a short burn-in, each report kept, with a one-line summary per run. Usage: bench/merged_on_device.sh OUT_DIR [N]
set -u
out=${1:?OUT dir}; n=${2:-30}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
summary() {  # name report
  python3 - "$1" "$2" <<'PY' | tee -a "$out/summary.txt"
import json, sys
name, path = sys.argv[1:]
try:
    r = json.load(open(path))
except Exception as exc:
    print(name, "no report:", exc); sys.exit()
bad = ["%s=%s" % (c["id"], c["status"]) for c in r["checks"] if c["status"] not in ("pass", "skip")]
layers = sorted({c["layer"] for c in r["checks"]})
fabric = ["%s=%s" % (c["id"], c["status"]) for c in r["checks"] if c["id"].startswith("fabric.")]
print(name, "verdict", r["verdict"], "mode", r["mode"], "duration_s", r["duration_s"], "checks", len(r["checks"]),
      "layers", ",".join(layers), "| not pass:", " ".join(bad) or "none", "| fabric:", " ".join(fabric))
PY
}
for run in quick standard-1 standard-2; do
  mode=${run%%-*}
  /usr/bin/time -f "$run wall %e s" python3 -m agents.cudaprobe --mode "$mode" --json >"$out/$run.json" 2>>"$out/stderr.txt"
  summary "$run" "$out/$run.json"
done
/usr/bin/time -f "burnin-$n wall %e s" python3 -m agents.cudaprobe --mode burnin --burnin-seconds "$n" --json \
  >"$out/burnin-$n.json" 2>>"$out/stderr.txt"
summary "burnin-$n" "$out/burnin-$n.json"
grep wall "$out/stderr.txt" | tee -a "$out/summary.txt"
