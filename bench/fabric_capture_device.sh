#!/bin/bash
# Capture the fabric's real outputs on a GPU host into $OUT (fixtures for tests/fixtures/fabric/h200x1-device):
# nvidia-smi -q, nvlink -s / -e, topo -m, NVML's NVLink and fabric readings (agents.cudaprobe.nvml_fabric), the
# sysfs the fabric checks read (bench/fabric_capture.py, tarred) and what else tells the fabric's story.
# Reads only: it changes nothing on the host.
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
PY=${PY:-python3}
nvidia-smi -q > "$OUT/nvsmi_q.txt" 2>&1
nvidia-smi nvlink -s > "$OUT/nvlink_s.txt" 2>&1
nvidia-smi nvlink -e > "$OUT/nvlink_e.txt" 2>&1
nvidia-smi topo -m > "$OUT/topo_m.txt" 2>&1
$PY -m agents.cudaprobe.nvml_fabric > "$OUT/nvml_fabric.json" 2>&1
rm -rf /tmp/sysfs && $PY bench/fabric_capture.py /tmp/sysfs > /dev/null && tar -C /tmp -czf "$OUT/sysfs.tar.gz" sysfs
{
  for cmd in "date -u" "uname -a" "cat /proc/driver/nvidia/version" "nvidia-smi -L" "nvidia-smi nvlink -c" \
             "ls -l /dev/" "ls -l /sys/class/infiniband /sys/class/net" "pgrep -a fabricmanager" \
             "systemctl is-active nvidia-fabricmanager" "ls /sys/bus/pci/devices" "lspci -D -nn"; do
    echo "===== $cmd"; timeout 20 $cmd 2>&1
  done
  echo "===== dmesg (SXid, Xid, NVSwitch, NVLink, AER lines)"
  timeout 20 dmesg 2>&1 | grep -i -E "sxid|xid|nvswitch|nvlink|aer|fabric" | tail -200
  echo "===== pynvml raw (field values per link)"
  timeout 30 $PY - <<'PYEOF' 2>&1
import pynvml as nv
nv.nvmlInit()
for i in range(nv.nvmlDeviceGetCount()):
    h = nv.nvmlDeviceGetHandleByIndex(i)
    print("GPU", i, nv.nvmlDeviceGetPciInfo(h).busId)
    for fid in (91, 90):  # LINK_COUNT, SPEED_MBPS_COMMON
        v = nv.nvmlDeviceGetFieldValues(h, [fid])[0]
        print(" field", fid, "ret", v.nvmlReturn, "value", v.value.uiVal)
    for link in range(18):
        v = nv.nvmlDeviceGetFieldValues(h, [(164, link), (165, link), (166, link)])
        print(" link", link, [(x.fieldId, x.nvmlReturn, x.value.uiVal) for x in v])
PYEOF
} > "$OUT/extra.txt" 2>&1
ls -la "$OUT"
