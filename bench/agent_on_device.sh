#!/usr/bin/env bash
# Runs the agent in every mode on a GPU host and keeps the reports and timings under $OUT/reports.tar.gz.
# Usage (device machine): OUT=/some/dir bench/agent_on_device.sh [label]
# With two or more GPUs it also runs every mode with CUDA_VISIBLE_DEVICES=0 (label gpus1-cvd0).
# quick runs twice: first on a cold page cache (the first torch import after boot), then warm.
# NCCL_NVLS_ENABLE=0 and the host's other NCCL variables are inherited, never overridden.
set -u
out=${OUT:-/tmp/cudaprobe-out}
work=$(mktemp -d)
count=$(nvidia-smi -L | grep -c '^GPU ')
label=${1:-gpus$count}
nvidia-smi -L > "$work/$label-nvidia-smi-L.txt" 2>&1
env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)' > "$work/$label-env.txt"
python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__)' > "$work/$label-python.txt" 2>&1
python3 -c 'import pynvml; print("pynvml", pynvml.__file__)' >> "$work/$label-python.txt" 2>&1
run() {  # label mode name [env...]
  local lbl=$1 mode=$2 name=$3; shift 3
  start=$(date +%s%N)
  env "$@" timeout 500 python3 -m agents.cudaprobe --mode "$mode" --json > "$work/$name.json" 2> "$work/$name.events"
  rc=$?
  end=$(date +%s%N)
  echo "$lbl $mode ($name) rc=$rc wall_ms=$(( (end - start) / 1000000 ))" | tee -a "$work/timings.txt"
}
run "$label" quick "$label-quick-cold"
for mode in quick standard full; do run "$label" "$mode" "$label-$mode"; done
if [ "$count" -ge 2 ]; then
  for mode in quick standard full; do run gpus1-cvd0 "$mode" "gpus1-cvd0-$mode" CUDA_VISIBLE_DEVICES=0; done
fi
ps -eo pid,args | grep -c '[a]gents.cudaprobe' | sed 's/^/agent processes left: /' | tee -a "$work/timings.txt"
ls /tmp | grep -c cudaprobe | sed 's/^/agent temp files left: /' | tee -a "$work/timings.txt"
tar -C "$work" -czf "$out/reports-$label.tar.gz" .
