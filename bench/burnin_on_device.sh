#!/bin/bash
# The burn-in proof on a lent H200 (issue 20), one call: faults made in our own processes first (they also catch
# a broken L7 before minutes are spent), then a healthy burn-in of N seconds. Run from a copy of the repository:
#   bench/burnin_on_device.sh OUT_DIR [N]
# Writes OUT_DIR/faults.tar.gz (each fault's report and --record), OUT_DIR/healthy.json, healthy.record.json,
# OUT_DIR/log.txt and OUT_DIR/timings.txt (wall time of each run against its N).
set -u
OUT=${1:?OUT dir}
N=${2:-300}
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
F=$(mktemp -d)
log() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$OUT/log.txt"; }
agent() {  # name N args...: one agent run with its report, record and wall time
    local name=$1 seconds=$2; shift 2
    local t0=$(date +%s%N)
    env "${FAULT_ENV[@]}" $PY -m agents.cudaprobe --json --burnin-seconds "$seconds" --record "$F/$name.record.json" \
        "$@" >"$F/$name.json" 2>"$F/$name.err"
    local rc=$? ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "$name rc=$rc wall_ms=$ms N=$seconds args=$*" | tee -a "$OUT/timings.txt"
    $PY - "$F/$name.json" <<'EOF' | tee -a "$OUT/log.txt"
import json, sys
r = json.load(open(sys.argv[1]))
print("  verdict", r["verdict"], "mode", r["mode"], "duration_s", r["duration_s"])
for c in r["checks"]:
    if c["status"] != "pass" or c["layer"] in ("L7",) or c["id"] in ("cuda.memory_bandwidth", "cuda.matmul"):
        print("  %-24s %-5s %s | %s" % (c["id"], c["status"], ",".join(c["signatures"]), c["summary"][:400]))
EOF
}
hog() {  # seconds_before seconds_held kind: our own intruder process on GPU 0
    $PY - "$@" <<'EOF' &
import sys, time
import torch
delay, held, kind = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
time.sleep(delay)
start = time.time()
if kind == "compute":
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    while time.time() - start < held:
        a @ a
        torch.cuda.synchronize()
else:  # take memory: retry until 12 GiB can be had, then hold it
    while True:
        try:
            block = torch.empty(12 * 2**30, dtype=torch.uint8, device="cuda")
            break
        except torch.cuda.OutOfMemoryError:
            time.sleep(0.2)
    print("intruder holds 12 GiB from %.1f s" % (time.time() - start + delay), flush=True)
    time.sleep(held)
EOF
}
nvidia-smi -L | tee -a "$OUT/log.txt"
FAULT_ENV=()
log "fault 1: a process computing on GPU 0 from ~20 s into a 40 s burn-in"
hog 22 25 compute; agent busy-during-burnin 40 --mode burnin --only stress.sustained; wait
log "fault 2: another process takes 12 GiB in the middle of the memory test"
hog 14 30 memory
FAULT_ENV=(CUDAPROBE_MEMTEST_PASSES=4)
agent memory-taken-during-memtest 10 --mode burnin --only stress.memory_test; wait
log "fault 3: NVIDIA_TF32_OVERRIDE=0 (TF32 matmuls at fp32 speed)"
FAULT_ENV=(NVIDIA_TF32_OVERRIDE=0); agent tf32-override-off 10 --mode standard --only cuda.matmul,cuda.memory_bandwidth
log "fault 4: an allocator setting PyTorch refuses"
FAULT_ENV=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:maybe); agent alloc-conf-refused 10 --mode quick
FAULT_ENV=(PYTORCH_ALLOC_CONF=max_split_size_mb:lots); agent alloc-conf-refused-2 10 --mode quick
log "fault 5: CUDA_VISIBLE_DEVICES naming no GPU of this host"
FAULT_ENV=(CUDA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000); agent cvd-no-such-gpu 10 --mode quick
FAULT_ENV=()
tar -C "$F" -czf "$OUT/faults.tar.gz" . && log "faults packed"
if grep -q '"status": "error"' "$F/busy-during-burnin.json" "$F/memory-taken-during-memtest.json"; then
    log "an L7 check raised: no healthy run"; exit 3
fi
log "healthy: --mode burnin --burnin-seconds $N"
agent healthy "$N" --mode burnin
cp "$F/healthy.json" "$F/healthy.record.json" "$OUT/"
cp "$F/healthy.err" "$OUT/healthy.err.txt"
log done
