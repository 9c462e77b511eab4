#!/bin/sh
# Onboard a rack with no browser, and measure how long each step takes: read the hosts' SSH keys (ssh-keyscan), keep
# only those whose fingerprints you were given, import the nodes with those keys pinned (and their login key stored),
# then validate them by label and wait for the verdicts.
#
#   bench/onboard_rack.sh NODES.CSV FINGERPRINTS LABEL [more import_nodes options]
#   bench/onboard_rack.sh rack07.csv rack07.fingerprints rack-07 --credential "rack key" --key-file ~/.ssh/id_ed25519 \
#       --as alice --python /opt/torch/bin/python
#
# NODES.CSV     import_nodes' CSV: name,address,port,user,labels,transport (every node gets LABEL too)
# FINGERPRINTS  the hosts' SHA256 host key fingerprints, one a line: `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`
#               on each host's console, or the list your image build printed. A key the scan finds whose fingerprint
#               is not there is refused by its node's name, and nothing is imported.
# Environment:  PYTHON (default .venv/bin/python), MODE (validate_node --mode, default quick), OUT (a folder for
#               keyscan.txt and results.json; default a new one under /tmp), KEYSCAN_TIMEOUT (seconds, default 10).
# Exit status:  validate_node's: 0 every node passed, 1 a warning or a failure, 3 a run could not complete; 2 an input
#               error before any run (a host without a key in the scan, a fingerprint not given, a bad CSV line).
# tests/e2e/test_onboard_rack.py runs this against 20 hosts of the simulated cluster (tests/simcluster.py).
set -eu

if [ $# -lt 3 ]; then
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
NODES=$1 FINGERPRINTS=$2 LABEL=$3
shift 3
PYTHON=${PYTHON:-.venv/bin/python}
MODE=${MODE:-quick}
OUT=${OUT:-$(mktemp -d /tmp/onboard-rack.XXXXXX)}
mkdir -p "$OUT"

now() { date +%s.%N; }
took() { echo "$1 $2" | awk '{printf "%.1f", $2 - $1}'; }
start=$(now)

# 1. The hosts' keys, as each presents them (grouped by port: ssh-keyscan takes one -p per call).
"$PYTHON" - "$NODES" <<'EOF' >"$OUT/hosts.txt"
import csv, sys
for row in csv.DictReader(open(sys.argv[1], newline="")):
    if (row.get("transport") or "ssh").strip() == "ssh":
        print((row.get("port") or "22").strip() or "22", row["address"].strip())
EOF
: >"$OUT/keyscan.txt"
for port in $(cut -d' ' -f1 "$OUT/hosts.txt" | sort -u); do
    awk -v p="$port" '$1 == p {print $2}' "$OUT/hosts.txt" |
        ssh-keyscan -T "${KEYSCAN_TIMEOUT:-10}" -p "$port" -f - >>"$OUT/keyscan.txt" 2>>"$OUT/keyscan.log" || true
done
scanned=$(now)
echo "keyscan: $(grep -vc '^#' "$OUT/keyscan.txt" || true) keys of $(wc -l <"$OUT/hosts.txt") hosts in" \
    "$(took "$start" "$scanned") s" >&2

# 2. The nodes, their keys pinned only where the fingerprint was given (one transaction: all or nothing).
"$PYTHON" manage.py import_nodes "$NODES" --labels "$LABEL" --known-hosts "$OUT/keyscan.txt" \
    --fingerprints "$FINGERPRINTS" "$@"
imported=$(now)
echo "import_nodes: $(took "$scanned" "$imported") s" >&2

# 3. Every node of the label validated; the verdicts (with each run's root cause) in results.json.
status=0
"$PYTHON" manage.py validate_node --label "$LABEL" --mode "$MODE" --wait --json >"$OUT/results.json" || status=$?
done_at=$(now)
echo "validate_node: exit $status in $(took "$imported" "$done_at") s; onboarding $(took "$start" "$done_at") s;" \
    "results in $OUT/results.json" >&2
exit $status
