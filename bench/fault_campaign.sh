#!/usr/bin/env bash
# The fault campaign of docs/benchmarks.md, on a GPU host (the device machine): every fault is made inside our own
# processes and environment (variables, an NCCL conf file, a process of ours on a GPU, a port we hold), never by
# changing a GPU's settings. Each run is `python3 -m agents.cudaprobe --mode standard --json --record ...`;
# reports, records (the GPU tasks' raw outcomes) and timings go to $OUT/faults.tar.gz after every run.
# Usage (device machine): OUT=/some/dir bench/fault_campaign.sh [fault ...]   (default: all)
# NCCL_NVLS_ENABLE=0 and the host's other NCCL variables are inherited, never overridden.
set -u
out=${OUT:-/tmp/cudaprobe-faults}
work=$(mktemp -d)
mkdir -p "$work/faults" "$out"
hogs=()

keep() { tar -C "$work" -czf "$out/faults.tar.gz" . ; }

agent() {  # name python [VAR=value ...] [-- agent args]
  local name=$1 python=$2; shift 2
  local vars=() args=()
  while [ $# -gt 0 ]; do
    if [ "$1" = "--" ]; then shift; args=("$@"); break; fi
    vars+=("$1"); shift
  done
  local start end rc
  start=$(date +%s%N)
  env "${vars[@]}" PYTHONPATH="$PWD" timeout 240 "$python" -m agents.cudaprobe --mode standard --json \
    --record "$work/faults/$name.record.json" "${args[@]}" > "$work/faults/$name.json" 2> "$work/faults/$name.events"
  rc=$?
  end=$(date +%s%N)
  echo "$name rc=$rc wall_ms=$(( (end - start) / 1000000 ))" | tee -a "$work/timings.txt"
  keep
}

hog() {  # a process of ours on one GPU, in the background: hog GPU python-code
  CUDA_VISIBLE_DEVICES=$1 python3 -c "$2" > "$work/hog-$1.log" 2>&1 &
  hogs+=($!)
  for _ in $(seq 60); do grep -q ready "$work/hog-$1.log" 2>/dev/null && return; sleep 0.5; done
}

unhog() { for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done; hogs=(); }

run_fault() {
  case $1 in
    healthy) agent healthy python3 ;;
    healthy-sampled)  # which GPUs each of the agent's processes holds, sampled every 250 ms
      nvidia-smi --query-compute-apps=timestamp,pid,gpu_uuid --format=csv,noheader -lms 250 > "$work/apps.csv" &
      local sampler=$!
      agent healthy-sampled python3
      kill $sampler; wait $sampler 2>/dev/null
      nvidia-smi --query-gpu=index,uuid --format=csv,noheader > "$work/gpus.csv" ;;
    p2p-disabled) agent p2p-disabled python3 NCCL_P2P_DISABLE=1 ;;
    p2p-and-shm-disabled) agent p2p-and-shm-disabled python3 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 ;;
    p2p-level-in-conf-file)
      printf 'NCCL_P2P_LEVEL=LOC\n' > "$work/site-nccl.conf"
      agent p2p-level-in-conf-file python3 NCCL_CONF_FILE="$work/site-nccl.conf" ;;
    bad-socket-interface) agent bad-socket-interface python3 NCCL_SOCKET_IFNAME=nosuchif0 ;;
    one-nccl-channel) agent one-nccl-channel python3 NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1 ;;
    busy-gpu1)
      hog 1 'import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print("ready", flush=True)
while True:
    for _ in range(50):
        a @ a
    torch.cuda.synchronize()'
      agent busy-gpu1 python3
      unhog ;;
    memory-hog-gpu0)
      hog 0 'import time, torch
free, total = torch.cuda.mem_get_info()
block = torch.empty(free - int(1.5 * 2**30), dtype=torch.uint8, device="cuda")
print("ready", torch.cuda.mem_get_info(), flush=True)
time.sleep(600)'
      agent memory-hog-gpu0 python3
      unhog ;;
    gpu-hidden-by-cvd) agent gpu-hidden-by-cvd python3 CUDA_VISIBLE_DEVICES=0 ;;
    no-torch-in-venv)
      python3 -m venv "$work/venv-without-torch"
      agent no-torch-in-venv "$work/venv-without-torch/bin/python" ;;
    rendezvous-port-taken)
      python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 29411)); s.listen(); print("ready", flush=True); time.sleep(600)' \
        > "$work/port.log" 2>&1 &
      hogs+=($!)
      sleep 1
      agent rendezvous-port-taken python3 -- --master-port 29411
      unhog ;;
    *) echo "unknown fault $1" >&2 ;;
  esac
}

nvidia-smi -L > "$work/nvidia-smi-L.txt"
nvidia-smi topo -m > "$work/topo.txt"
env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)' > "$work/env.txt"
faults=("$@")
[ ${#faults[@]} -gt 0 ] || faults=(healthy healthy-sampled p2p-disabled p2p-and-shm-disabled p2p-level-in-conf-file
  bad-socket-interface one-nccl-channel busy-gpu1 memory-hog-gpu0 gpu-hidden-by-cvd no-torch-in-venv
  rendezvous-port-taken)
for fault in "${faults[@]}"; do run_fault "$fault"; done
ps -eo pid,args | grep -c '[a]gents.cudaprobe' | sed 's/^/agent processes left: /' | tee -a "$work/timings.txt"
keep
