#!/usr/bin/env bash
# Batch e's outputs (bench/i32_on_device.sh) into the corpus, and its one blind measurement (issue 32, first item).
#
# Usage (repo root, this machine): bench/i32_batch_e.sh DIR     DIR: the files the device run wrote to $OUT
#
# 1. copies gpu_faults-e-DATE.jsonl, run_all-e-DATE.log and nvidia-smi-e-DATE.txt to bench/faults/results/;
# 2. builds holdout-gpu-e: `bench/faults/build_corpus.py --batch e` (near copies of earlier texts go to `repeat`,
#    faults that did not show their failure are left out with the reason);
# 3. measures holdout-gpu-e once, counts only (bench/triage_accuracy.py prints no text), on checkouts of the code
#    that never saw it: BLIND (7c9dcd5, main when issue 32 began: no rule of issue 32 in it) and c90c82f (before the
#    one matcher change made after batch e's expected messages were read; issue 23's note); then on this checkout;
# 4. writes the figures, with the date and each commit, to bench/faults/results/measure-e-DATE.txt.
# Nothing here prints a held-out text. Commit the results folder and tests/data/triage_gpu_corpus.jsonl together.
set -u
src=${1:?the folder of the files the device run wrote}
blind=${BLIND:-7c9dcd5}
also=${ALSO:-c90c82f}
py=${PYTHON:-.venv/bin/python}
repo=$(pwd)
jsonl=$(ls "$src"/gpu_faults-e-*.jsonl 2>/dev/null | head -1)
[ -n "$jsonl" ] || { echo "no gpu_faults-e-*.jsonl in $src" >&2; exit 2; }
day=$(basename "$jsonl" .jsonl); day=${day#gpu_faults-e-}
cp "$src"/gpu_faults-e-*.jsonl "$src"/run_all-e-*.log "$src"/nvidia-smi-e-*.txt bench/faults/results/ 2>/dev/null
kept=bench/faults/results/$(basename "$jsonl")
"$py" bench/faults/build_corpus.py --batch e "$kept" || exit 1

report=bench/faults/results/measure-e-$day.txt
corpus=$repo/tests/data/triage_gpu_corpus.jsonl
{
  echo "holdout-gpu-e, measured once $(date -u '+%F %H:%M') UTC (counts only; no text shown)"
  echo "device run: $(basename "$jsonl"); $(head -1 bench/faults/results/run_all-e-"$day".log 2>/dev/null)"
} > "$report"
for commit in "$blind" "$also"; do
  tree=$(mktemp -d)/tree
  git worktree add -q --detach "$tree" "$commit" || exit 1
  echo "== code $(git rev-parse --short "$commit") ($(git log -1 --format=%cI "$commit"))" >> "$report"
  "$py" bench/triage_accuracy.py --repo "$tree" --split holdout-gpu-e "$corpus" >> "$report" 2>&1
  git worktree remove --force "$tree"
done
echo "== code $(git rev-parse --short HEAD) (this checkout, $(git status --porcelain | grep -q . && echo 'with changes' || echo clean))" >> "$report"
"$py" bench/triage_accuracy.py --split holdout-gpu-e "$corpus" >> "$report" 2>&1
cat "$report"
