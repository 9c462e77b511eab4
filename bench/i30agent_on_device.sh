#!/usr/bin/env bash
# Issue 30 / 31 on a real H200 (1 GPU): the watch's and the health command's wall time and exit codes, healthy, then
# after an application fault made inside our own process (bench/i30agent_fault.py: a kernel storing through a bad
# pointer). Expected wall time: about 25 s (budget 60 s). Changes no GPU setting; starts nothing that outlives it.
# Writes to $OUT (3 files):
#   h200-gpus1-watch.json                 a healthy watch report (fixture: tests/fixtures/real/)
#   h200-gpus1-watch-xid-application.json the watch after the fault (fixture: tests/fixtures/real/issue30/; a warn, kept out of the healthy set)
#   i30agent-results.txt                  every run's wall time and exit code, the fault's own output, the Xid lines
set -u
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/i30agent-out}
mkdir -p "$out"
work=$(mktemp -d)
results="$out/i30agent-results.txt"
: > "$results"
py=python3
ms() { date +%s%N | cut -c1-13; }
say() { echo "$*" | tee -a "$results"; }
say "# $(nvidia-smi -L | head -1); driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
for i in 1 2 3 4 5; do
  t0=$(ms); timeout 30 $py -m agents.cudaprobe --mode watch --json > "$work/watch-$i.json" 2> "$work/watch-$i.err"
  rc=$?; t1=$(ms)
  say "watch run $i: rc=$rc wall_ms=$((t1 - t0)) verdict=$($py -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["verdict"], r["duration_s"])' "$work/watch-$i.json" 2>&1)"
done
cp "$work/watch-1.json" "$out/h200-gpus1-watch.json"
for i in 1 2 3; do
  t0=$(ms); line=$(timeout 60 $py -m agents.cudaprobe health 2>&1); rc=$?; t1=$(ms)
  say "health healthy run $i: rc=$rc wall_ms=$((t1 - t0)) said: $line"
done
t0=$(ms); line=$(timeout 60 $py -m agents.cudaprobe health --npd 2>&1); rc=$?; t1=$(ms)
say "health --npd healthy: rc=$rc wall_ms=$((t1 - t0)) said: $line"
t0=$(ms); line=$(CUDA_VISIBLE_DEVICES=0 timeout 60 $py -m agents.cudaprobe health --prolog 2>&1); rc=$?; t1=$(ms)
say "health --prolog (CUDA_VISIBLE_DEVICES=0) healthy: rc=$rc wall_ms=$((t1 - t0)) said: $line"
since=$(date -u +%Y-%m-%dT%H:%M:%S+00:00)
sleep 1
say "--- application fault at $since"
t0=$(ms); timeout 60 $py bench/i30agent_fault.py >> "$results" 2>&1; rc=$?; t1=$(ms)
say "fault process: rc=$rc wall_ms=$((t1 - t0))"
sleep 1
say "--- kernel log Xid lines since boot (last 10):"
dmesg 2>&1 | grep -E 'NVRM: Xid' | tail -10 >> "$results"
t0=$(ms); timeout 30 $py -m agents.cudaprobe --mode watch --json --since "$since" > "$out/h200-gpus1-watch-xid-application.json" 2> "$work/watch-fault.err"
rc=$?; t1=$(ms)
say "watch after the fault (--since $since): rc=$rc wall_ms=$((t1 - t0))"
$py -c 'import json,sys
r = json.load(open(sys.argv[1]))
x = [c for c in r["checks"] if c["id"] == "driver.xid"][0]
print("driver.xid:", x["status"], x["signatures"], x["summary"][:200])
print("per GPU:", json.dumps(x.get("gpus", [])))' "$out/h200-gpus1-watch-xid-application.json" >> "$results" 2>&1
t0=$(ms); timeout 30 $py -m agents.cudaprobe --mode watch --json > "$work/watch-fault-nosince.json" 2>/dev/null; rc=$?; t1=$(ms)
say "watch after the fault (no --since): rc=$rc wall_ms=$((t1 - t0))"
$py -c 'import json,sys
r = json.load(open(sys.argv[1]))
x = [c for c in r["checks"] if c["id"] == "driver.xid"][0]
print("driver.xid (no --since):", x["status"], x["signatures"], x["summary"][:200])' "$work/watch-fault-nosince.json" >> "$results" 2>&1
for flags in "" "--npd" "--since $since"; do
  t0=$(ms); line=$(timeout 60 $py -m agents.cudaprobe health $flags 2>&1); rc=$?; t1=$(ms)
  say "health $flags after the fault: rc=$rc wall_ms=$((t1 - t0)) said: $line"
done
say "agent processes left: $(ps -eo pid,args | grep -c '[a]gents.cudaprobe')"
rm -rf "$work"
