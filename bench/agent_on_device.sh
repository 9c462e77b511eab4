#!/usr/bin/env bash
# Runs the agent in every mode on a GPU host and keeps the reports and timings under $OUT.
# Usage (device machine): OUT=/some/dir bench/agent_on_device.sh [label]
# NCCL_NVLS_ENABLE=0 and the host's other NCCL variables are inherited, never overridden.
set -u
label=${1:-host}
out=${OUT:-/tmp/cudaprobe-out}
mkdir -p "$out"
nvidia-smi -L > "$out/$label-nvidia-smi-L.txt" 2>&1
for mode in quick standard full; do
  start=$(date +%s%N)
  timeout 400 python3 -m agents.cudaprobe --mode "$mode" --json > "$out/$label-$mode.json" 2> "$out/$label-$mode.events"
  rc=$?
  end=$(date +%s%N)
  echo "$label $mode rc=$rc wall_ms=$(( (end - start) / 1000000 ))" | tee -a "$out/$label-timings.txt"
done
