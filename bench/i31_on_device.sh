#!/usr/bin/env bash
# Issue 31 (i31) on a 1 x H200 host, about 30 s (up to 4 min more only where DCGM is installed):
#  1. the agent's L1 checks: driver.clocks_thermal must now carry temperature_c.gpu0 and power_w.gpu0 (each GPU's
#     own, read from NVML or nvidia-smi) beside max_temperature_c -> $OUT/i31-l1.json
#  2. where `dcgmi` is on PATH: a real `dcgmi diag -r 1 -j` (a new fixture for tests/fixtures/dcgm) and the agent's
#     --with-dcgm r1 report of it -> $OUT/i31-dcgmi-r1.json and $OUT/i31-dcgm-agent.json; without dcgmi the agent's
#     --with-dcgm report (dcgm.diag must be a skip "dcgmi is not installed") goes to $OUT/i31-dcgm-agent.json
# Changes no GPU setting; starts no daemon (dcgmi talks to an nv-hostengine only where one already runs).
set -u
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/i31-out}
mkdir -p "$out"
timeout 120 python3 -m agents.cudaprobe --mode quick --only L1 --json > "$out/i31-l1.json" 2> /dev/null
echo "L1 rc=$?"
if command -v dcgmi > /dev/null; then
  timeout 240 dcgmi diag -r 1 -j > "$out/i31-dcgmi-r1.json" 2>&1
  echo "dcgmi diag -r 1 rc=$?"
fi
timeout 300 python3 -m agents.cudaprobe --mode quick --only dcgm --with-dcgm r1 --json > "$out/i31-dcgm-agent.json" \
  2> /dev/null
echo "agent --with-dcgm r1 rc=$?"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
l1 = json.load(open(out + "/i31-l1.json"))
thermal = next(c for c in l1["checks"] if c["id"] == "driver.clocks_thermal")
print("clocks_thermal metrics:", thermal["metrics"])
dcgm = json.load(open(out + "/i31-dcgm-agent.json"))
for c in dcgm["checks"]:
    if c["id"].startswith("dcgm."):
        print(c["id"], c["status"], c["summary"][:120])
PY
