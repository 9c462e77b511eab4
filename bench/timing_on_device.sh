#!/usr/bin/env bash
# Before / after timing of the bare agent in one lease (issue 22), with the plain reference loop beside it.
# Usage (device machine, from a folder holding before/ and after/, each with agents/ and bench/):
#   OUT=/some/dir BUDGET_S=400 bash after/bench/timing_on_device.sh
# SIDES=after (default "before after"), QUICK_RUNS / STANDARD_RUNS / FULL_RUNS (5 each) and REFERENCE=0 (no
# reference loop) narrow it, for a second lease that re-measures one side. COLD_RUNS=N (default 0) first runs
# after/ quick and standard N times each with its bytecode cache emptied before each run (agents/cudaprobe/
# bytecode.py; the cache is $work/pycache, kept out of the tarball): the first run on a host.
# Order: the reference loop, then quick x5, standard x5 and full (as many as the budget allows, two at least
# asked), before and after taking turns so that a drift of the lease hits both alike; the reference loop again
# at the end when time is left. after/ runs keep --record files. Everything goes into $OUT/timing.tar.gz.
set -u
out=${OUT:-/tmp/cudaprobe-timing}
budget=${BUDGET_S:-400}
work=$(mktemp -d)
here=$(pwd)
t0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - t0) )); }
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} CUDAPROBE_BYTECODE_CACHE=$work/pycache
{ nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv
  python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
  python3 -c 'import sys; print("dont_write_bytecode", sys.flags.dont_write_bytecode)'
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA|PYTHON)' ; } > "$work/host.txt" 2>&1
cat "$work/host.txt"
reference() {  # name [args]
  local name=$1; shift
  (cd "$here/after" && python3 bench/reference_loop.py --json "$work/$name.json" "$@") > "$work/$name.txt" 2>&1
  echo "reference $name rc=$? $(grep -E '^(matmul_tf32|resnet18_amp_bf16|wall_s)' "$work/$name.txt" |
    tr -s ' ' | tr '\n' ' ')"
}
run() {  # side mode[-cold] index [need_s]
  local side=$1 mode=${2%-cold} i=$3 need=${4:-0} name="$1-$2-$3" extra=()
  if [ "$(left)" -lt "$need" ]; then echo "skip $name: $(left) s left"; return; fi
  [ "$side" = after ] && extra=(--record "$work/$name.record.json")
  local start end
  start=$(date +%s%N)
  (cd "$here/$side" && timeout 300 python3 -m agents.cudaprobe --mode "$mode" --json "${extra[@]}") \
    > "$work/$name.json" 2> "$work/$name.events"
  local rc=$?
  end=$(date +%s%N)
  echo "$side $mode $i rc=$rc wall_ms=$(( (end - start) / 1000000 ))" | tee -a "$work/timings.txt"
}
sides=${SIDES:-before after}
has() { case " $sides " in *" $1 "*) return 0;; esac; return 1; }
if [ "${REFERENCE:-1}" = 1 ]; then
  reference reference-1
  reference reference-autotune --autotune
  python3 -X importtime -c 'import torch' 2> "$work/importtime.txt"
fi
for i in $(seq "${COLD_RUNS:-0}"); do rm -rf "$work/pycache"; run after quick-cold $i 10; done
for i in $(seq "${COLD_RUNS:-0}"); do rm -rf "$work/pycache"; run after standard-cold $i 40; done
for i in $(seq "${QUICK_RUNS:-5}"); do has before && run before quick $i 10; has after && run after quick $i 10; done
for i in $(seq "${STANDARD_RUNS:-5}"); do
  has after && run after standard $i 40; has before && run before standard $i 40; done
for i in $(seq "${FULL_RUNS:-5}"); do has after && run after full $i 45; has before && run before full $i 70; done
[ "${REFERENCE:-1}" = 1 ] && [ "$(left)" -gt 20 ] && reference reference-2
ps -eo pid,args | grep -c '[a]gents.cudaprobe' | sed 's/^/agent processes left: /' | tee -a "$work/timings.txt"
ls /tmp | grep -c cudaprobe | sed 's/^/agent temp files left: /' | tee -a "$work/timings.txt"
echo "bytecode cache: $(find "$work/pycache" -name '*.pyc' 2>/dev/null | wc -l) files, $(du -sh "$work/pycache" 2>/dev/null | cut -f1)" | tee -a "$work/timings.txt"
tar -C "$work" --exclude=./pycache -czf "$out/timing.tar.gz" .
(cd "$here/after" && python3 bench/agent_timing.py --walls "$work/timings.txt" \
  --compare $(ls "$work"/before-*[0-9].json 2>/dev/null) -- $(ls "$work"/after-*[0-9].json | grep -v cold)) \
  | tee "$out/summary.txt"
