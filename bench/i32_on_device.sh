#!/usr/bin/env bash
# Batch e of the fault set (issue 32, first item): the 55 faults of bench/faults/faults.py with batch="e", run once on
# a 1 x H200 host with torch + CUDA, as batches a-d were (bench/faults/run_all.py, issue 23's closing note). Nothing
# here changes a GPU setting; NCCL_NVLS_ENABLE=0 is kept in every fault's environment (run_all.py sets it too).
#
# Usage (repo root, device machine): OUT=/some/dir bench/i32_on_device.sh
# Expected wall: ~250 s, at most ~290 s. The one serial fault (a cuSOLVER handle on a full GPU, timeout 90 s) runs
# alone first; the other 54 run 16 at a time, longest timeouts first (inductor 150 s, flex attention and a spawn
# script 120 s), each under its own timeout and process group; an outer timeout of 285 s ends run_all.py with
# SIGTERM, which ends the faults still running by their process groups and leaves what finished in the partial file.
#
# Writes 3 files to $OUT (flat names):
#   gpu_faults-e-DATE.jsonl  one object a fault {name, category, command, rc, seconds, timed_out, text, versions};
#                            the input of `bench/faults/build_corpus.py --batch e` (bench/i32_batch_e.sh)
#   run_all-e-DATE.log       run_all's own lines (versions, one line a fault with rc and seconds) and this script's
#   nvidia-smi-e-DATE.txt    the host's nvidia-smi before and after (driver, GPU memory left in use)
set -u
out=${OUT:?OUT must name the output folder}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
day=$(date -u +%F)
work=$(mktemp -d)
log="$out/run_all-e-$day.log"
smi="$out/nvidia-smi-e-$day.txt"
start=$(date +%s)

{ echo "== before"; nvidia-smi 2>&1; } > "$smi"
# longest timeouts first, so the 150 s fault does not start last and set the wall time
names=$(python3 - <<'PY'
import sys
sys.path.insert(0, "bench/faults")
import faults
batch = [f for f in faults.FAULTS.values() if f["batch"] == "e"]
print(" ".join(f["name"] for f in sorted(batch, key=lambda f: (-f["timeout"], f["name"]))))
PY
)
echo "batch e: $(wc -w <<<"$names") faults; started $(date -u +%FT%TZ)" | tee "$log"

timeout -s TERM 285 python3 bench/faults/run_all.py --out "$work" --jobs 16 --budget 120 $names >>"$log" 2>&1 &
runner=$!
wait "$runner"
rc=$?
echo "run_all rc=$rc after $(( $(date +%s) - start )) s" | tee -a "$log"

if [ -s "$work/gpu_faults.jsonl" ]; then
  cp "$work/gpu_faults.jsonl" "$out/gpu_faults-e-$day.jsonl"
else  # cut short: the faults that finished, sorted by name like run_all's own file
  python3 -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sys.stdout.write("".join(json.dumps(r) + "\n" for r in sorted(rows, key=lambda r: r["name"])))' \
    "$work/gpu_faults.partial.jsonl" > "$out/gpu_faults-e-$day.jsonl"
  echo "partial: $(wc -l < "$out/gpu_faults-e-$day.jsonl") faults kept" | tee -a "$log"
fi
{ echo "== after"; nvidia-smi 2>&1; } >> "$smi"
rm -rf "$work"
echo "done in $(( $(date +%s) - start )) s" | tee -a "$log"
