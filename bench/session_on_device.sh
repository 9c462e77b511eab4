#!/usr/bin/env bash
# One device lease for several issues' GPU proofs: runs each named bench/<name>_on_device.sh in turn, each with its
# own scratch OUT and a wall-time limit, and packs what each wrote into $OUT/<name>.tar.gz (the device tool brings
# back at most 8 files). Usage (device machine, repo root): OUT=... bash bench/session_on_device.sh name:limit_s ...
set -u
out=${OUT:?OUT}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv
  python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'; } \
  > "$out/session.txt" 2>&1
for item in "$@"; do
  name=${item%%:*} limit=${item#*:}
  scratch=$(mktemp -d)
  t0=$(date +%s)
  OUT=$scratch timeout -k 10 "$limit" bash "bench/${name}_on_device.sh" "$scratch" > "$scratch/stdout.txt" 2>&1
  rc=$?
  echo "$name rc=$rc wall_s=$(( $(date +%s) - t0 )) limit_s=$limit" | tee -a "$out/session.txt"
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader >> "$out/session.txt" 2>&1
  tail -5 "$scratch/stdout.txt" | sed "s/^/  $name: /" >> "$out/session.txt"
  tar -czf "$out/$name.tar.gz" -C "$scratch" . 2>> "$out/session.txt"
done
