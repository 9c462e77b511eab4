#!/bin/bash
# Issue 33, second device round: the bare standard run of the code before (v0: .ab/v0, `git archive` of the commit
# before the change) against the code after (v1: this tree) and a variant (v2: .ab/v2, TF32's own warm-up also cut),
# taking turns, with the plain reference loop before and after; every report kept for its per-check timing.
# VARIANTS="v0 v1" (the final check of the code as committed) leaves v2 out.
# Usage (device tool, repo root, carry .ab): bash bench/i33b_on_device.sh   (writes $OUT/i33b-summary.txt and
# $OUT/i33b-reports.tar.gz). Make .ab here first:
#   rm -rf .ab && mkdir -p .ab/v0 .ab/v2 && git archive <before> agents | tar -x -C .ab/v0 && cp -r agents .ab/v2/ &&
#   sed -i 's/("tf32", "float32", True, 0.25,/("tf32", "float32", True, 0.03,/' .ab/v2/agents/cudaprobe/checks/cuda.py
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-5}
VARIANTS=${VARIANTS:-v0 v1 v2}
WORK=$(mktemp -d); ROOT=$PWD
exec > >(tee "$OUT/i33b-summary.txt") 2>&1
echo "== host"; date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit,temperature.gpu --format=csv,noheader
python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
where() { case $1 in v1) echo "$ROOT";; *) echo "$ROOT/.ab/$1";; esac; }
run() {  # variant, label
  local dir; dir=$(where "$1")
  local t0 t1; t0=$(date +%s.%N)
  (cd "$dir" && timeout 120 python3 -m agents.cudaprobe --mode standard --json > "$WORK/$1-$2.json" 2> "$WORK/$1-$2.err")
  local rc=$?; t1=$(date +%s.%N)
  echo "$1 $2 rc=$rc wall=$(python3 -c "print(round($t1 - $t0, 3))")" | tee -a "$WORK/walls.txt"
}
echo "== reference loop, before"
python3 bench/reference_loop.py --json "$WORK/reference-1.json" | grep -E "tflops|gbs|img_s|wall_s"
echo "== one discarded run of each (bytecode caches)"
for v in $VARIANTS; do run $v warm; done
echo "== $ROUNDS rounds, taking turns"
for i in $(seq "$ROUNDS"); do for v in $VARIANTS; do run $v "$i"; done; done
echo "== reference loop, after"
python3 bench/reference_loop.py --json "$WORK/reference-2.json" | grep -E "tflops|gbs|img_s|wall_s"
nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader | sed 's/^/left on the GPU: /'
python3 bench/i33b_table.py "$WORK"
tar -czf "$OUT/i33b-reports.tar.gz" -C "$WORK" .
