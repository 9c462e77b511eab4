#!/bin/bash
# Issue 28 (part a) on a lent 1 x H200, one call, about 90 s of wall time (150 s at most):
#  1. the agent's GPU worker dies with its agent: a burn-in (--burnin-seconds 30, --only stress.sustained) whose
#     agent is killed with kill -9 about 15 s into the sustained load; then nvidia-smi --query-compute-apps is
#     polled every 0.1 s and the time until none of the processes it listed before the kill remains is written down
#     (with the time until the worker's pid is gone from /proc). The limit is 2 s. ~35 s.
#  2. stress.consistency with its known answer on the real H200 (and driver.processes: no stray worker named, the
#     killed agent's worker being gone), report and --record kept. ~25 s.
#  3. the fixture burnin/faults/memory-taken-during-memtest recorded again the way bench/burnin_on_device.sh made it
#     (another process takes 12 GiB 14 s in, 4 passes of the memory test): memory taken during the test now warns
#     memory_taken_during_test. ~35 s.
# Usage, from the repository root: OUT=DIR bench/i28a_on_device.sh (or bench/i28a_on_device.sh DIR).
# Writes $OUT/i28a-log.txt (every step, the kill timing, a line per run) and $OUT/i28a-reports.tar.gz (each run's
# report, --record and stderr, the 0.1 s nvidia-smi polls).
set -u
OUT=${OUT:-${1:?OUT dir}}
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
F=$(mktemp -d)
LOG="$OUT/i28a-log.txt"
log() { echo "$(date -u +%H:%M:%S.%N | cut -c1-12) $*" | tee -a "$LOG"; }
now() { date +%s%N; }
summary() {  # name: one line per run, and its L1/L7 checks
    $PY - "$F/$1.json" "$1" <<'EOF' | tee -a "$LOG"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as exc:
    print(" ", sys.argv[2], "no report:", exc); sys.exit()
print(" ", sys.argv[2], "verdict", r["verdict"], "duration_s", r["duration_s"])
for c in r["checks"]:
    if c["layer"] == "L7" or c["id"] == "driver.processes" or c["status"] not in ("pass", "skip"):
        print("  %-22s %-5s %s | %s" % (c["id"], c["status"], ",".join(c["signatures"]), c["summary"][:600]))
EOF
}
apps() { nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' ' | sort -u | tr '\n' ' '; }
alive() {  # pid: running (a zombie runs nothing and holds no GPU memory)
    [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f1)" != Z ]
}
children_of() {  # pid: its children's pids, from /proc (no procps needed)
    local stat
    for stat in /proc/[0-9]*/stat; do
        [ "$(sed 's/.*) //' "$stat" 2>/dev/null | cut -d' ' -f2)" = "$1" ] && { d=${stat%/stat}; echo -n "${d#/proc/} "; }
    done
}

nvidia-smi -L | tee -a "$LOG"
log "git $(git rev-parse --short HEAD 2>/dev/null) compute apps before anything: [$(apps)]"

# ---- 1. kill -9 of the agent mid-burn-in
log "1. burn-in (30 s, stress.sustained), agent killed ~15 s into the sustained load"
$PY -m agents.cudaprobe --mode burnin --burnin-seconds 30 --only stress.sustained --json >"$F/kill.json" \
    2>"$F/kill.err" &
AGENT=$!
started=""
for _ in $(seq 600); do  # up to 60 s for the check to start
    if grep -q '"event": "check_started", "id": "stress.sustained"' "$F/kill.err" 2>/dev/null; then
        started=1; break
    fi
    alive "$AGENT" || break
    sleep 0.1
done
[ -n "$started" ] || log "stress.sustained never started (agent alive: $(alive "$AGENT" && echo yes || echo no))"
sleep 15
CHILDREN=$(children_of "$AGENT")
WORKERS=""
for pid in $CHILDREN; do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'agents.cudaprobe.worker --serve' && WORKERS="$WORKERS $pid"
done
WORKERS=${WORKERS# }
BEFORE=$(apps)
log "agent $AGENT, its GPU workers [$WORKERS] (children: [$CHILDREN]), compute apps before the kill [$BEFORE]"
for pid in $CHILDREN; do log "  $pid: $(tr '\0' ' ' </proc/$pid/cmdline 2>/dev/null | cut -c1-120)"; done
alive "$AGENT" || log "VOID: the agent ended before the kill (see kill.err): nothing measured"
[ -n "$BEFORE" ] || log "VOID for nvidia-smi: it listed no compute process before the kill (PID namespace?);" \
    "only the /proc measure counts"
t0=$(now)
kill -9 "$AGENT"
gone_smi="" gone_proc=""
: >"$F/kill-polls.txt"
while :; do  # 0.1 s polls, for 10 s at most (5 x the limit)
    t=$(( ($(now) - t0) / 1000000 ))
    [ "$t" -gt 10000 ] && break
    left=$(apps)
    ours=""
    for pid in $BEFORE; do case " $left " in *" $pid "*) ours="$ours $pid";; esac; done
    running=""
    for pid in $WORKERS; do alive "$pid" && running="$running $pid"; done
    echo "t_ms=$t compute_apps=[$left] ours_left=[${ours# }] workers_running=[${running# }]" >>"$F/kill-polls.txt"
    [ -z "$gone_smi" ] && [ -z "$ours" ] && gone_smi=$t
    [ -z "$gone_proc" ] && [ -z "$running" ] && gone_proc=$t
    [ -n "$gone_smi" ] && [ -n "$gone_proc" ] && break
    sleep 0.1
done
head -25 "$F/kill-polls.txt" | tee -a "$LOG"
log "KILL RESULT: our processes gone from nvidia-smi ${gone_smi:-NOT within 10 s} ms after kill -9 of the agent;" \
    "workers gone from /proc ${gone_proc:-NOT within 10 s} ms (limit 2000 ms)"
[ -n "$WORKERS" ] || log "VOID for /proc: no GPU worker was found among the agent's children"
for pid in $CHILDREN; do alive "$pid" && { log "child $pid survived the agent: killed by pid"; kill -9 "$pid"; }; done
wait "$AGENT" 2>/dev/null

# ---- 2. known-answer consistency (and the next agent names no stray)
log "2. stress.consistency with its known answer, driver.processes"
t0=$(now)
$PY -m agents.cudaprobe --mode burnin --only stress.consistency,driver.processes --json \
    --record "$F/consistency.record.json" >"$F/consistency.json" 2>"$F/consistency.err"
log "consistency rc=$? wall_ms=$(( ($(now) - t0) / 1000000 ))"
summary consistency

# ---- 3. memory-taken-during-memtest, recorded again as bench/burnin_on_device.sh recorded it
log "3. another process takes 12 GiB in the middle of the memory test (4 passes)"
$PY - 14 30 <<'EOF' >"$F/hog.txt" 2>&1 &
import sys, time
import torch
delay, held = float(sys.argv[1]), float(sys.argv[2])
time.sleep(delay)
start = time.time()
while True:  # retry until 12 GiB can be had, then hold it
    try:
        block = torch.empty(12 * 2**30, dtype=torch.uint8, device="cuda")
        break
    except torch.cuda.OutOfMemoryError:
        time.sleep(0.2)
print("intruder holds 12 GiB from %.1f s" % (time.time() - start + delay), flush=True)
time.sleep(held)
EOF
HOG=$!
t0=$(now)
CUDAPROBE_MEMTEST_PASSES=4 $PY -m agents.cudaprobe --json --burnin-seconds 10 --mode burnin \
    --only stress.memory_test --record "$F/memory-taken-during-memtest.record.json" \
    >"$F/memory-taken-during-memtest.json" 2>"$F/memory-taken-during-memtest.err"
log "memory-taken-during-memtest rc=$? wall_ms=$(( ($(now) - t0) / 1000000 )) N=10 args=--mode burnin --only stress.memory_test"
kill "$HOG" 2>/dev/null; wait "$HOG" 2>/dev/null
cat "$F/hog.txt" | tee -a "$LOG"
summary memory-taken-during-memtest
log "compute apps at the end: [$(apps)]"
tar -C "$F" -czf "$OUT/i28a-reports.tar.gz" . && log "packed: $(ls "$F" | tr '\n' ' ')"
rm -rf "$F"
