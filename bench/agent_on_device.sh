#!/usr/bin/env bash
# Runs the agent in every mode on a GPU host and keeps the reports and timings under $OUT/reports.tar.gz.
# Usage (device machine): OUT=/some/dir bench/agent_on_device.sh
# NCCL_NVLS_ENABLE=0 and the host's other NCCL variables are inherited, never overridden.
set -u
out=${OUT:-/tmp/cudaprobe-out}
work=$(mktemp -d)
nvidia-smi -L > "$work/nvidia-smi-L.txt" 2>&1
env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)' > "$work/env.txt"
run() {  # label mode [env...]
  label=$1 mode=$2; shift 2
  start=$(date +%s%N)
  env "$@" timeout 500 python3 -m agents.cudaprobe --mode "$mode" --json > "$work/$label-$mode.json" 2> "$work/$label-$mode.events"
  rc=$?
  end=$(date +%s%N)
  echo "$label $mode rc=$rc wall_ms=$(( (end - start) / 1000000 ))" | tee -a "$work/timings.txt"
}
for mode in quick standard full; do run gpus2 "$mode"; done
for mode in quick standard full; do run gpus1 "$mode" CUDA_VISIBLE_DEVICES=0; done
tar -C "$work" -czf "$out/reports.tar.gz" .
