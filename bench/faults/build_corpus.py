"""Build tests/data/triage_gpu_corpus.jsonl from what bench/faults/run_all.py printed on a GPU host.

    python bench/faults/build_corpus.py bench/faults/results/gpu_faults-2026-12-01.jsonl
    python bench/faults/build_corpus.py --batch b bench/faults/results/gpu_faults-b-2026-12-01.jsonl
    python bench/faults/build_corpus.py --batch c bench/faults/results/gpu_faults-c-DATE.jsonl
    python bench/faults/build_corpus.py --batch d bench/faults/results/gpu_faults-d-DATE.jsonl
    python bench/faults/build_corpus.py --batch e bench/faults/results/gpu_faults-e-DATE.jsonl

Each fault's text keeps its command, its return code and the versions of the stack that printed it; its
category is the one faults.py registered when the fault was written. A fault whose run did not show the
failure it was written for is left out, with the reason (DROPPED). Texts that are near copies of each other
(cudaweb.playbooks.novelty) form one group, and a group goes whole into one split, so no holdout text is a near
copy of a dev text: groups in a fixed pseudo-random order (sha1 of the group's first name) fill `holdout-gpu`
up to HOLDOUT_SHARE of the texts, keeping for every category at least one group in `dev-gpu`.

Batch b (faults written after the first blind measurement) is added, not re-split: a text that is a near copy of
any text already in either corpus goes to `repeat` (with `repeat_of`), every other one to `holdout-gpu-b`.
Batch c (a third blind holdout) is added the same way, to `holdout-gpu-c`; besides the faults named in DROPPED, a
fault of batch c that printed nothing, exited 0 (all but its performance advisories raise) or, for an advisory,
printed no warning, did not show its failure and is left out with that reason (not_shown). Batch d (a fourth
blind holdout, each fault aimed at a final message no earlier text printed) goes the same way to `holdout-gpu-d`.
A batch already in the corpus is not added twice.
"""

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))
from cudaweb.playbooks import novelty  # noqa: E402

OUT = REPO / "tests" / "data" / "triage_gpu_corpus.jsonl"
HOLDOUT_SHARE = 0.42
DROPPED = {  # run on torch 2.11.0+cu130, NCCL 2.28.9, driver 580.159.04: what each printed instead
    "anomaly_mode_nan_in_backward": "printed nothing: log of w*x gave no NaN gradient on that seed",
    "cublas_batched_gemm_huge_batch": "ran: cuBLAS took the batch",
    "cudnn_conv_bad_param_grouped": "ran: cuDNN took the grouped transposed convolution",
    "cudnn_conv_batch_too_large": "ran: PyTorch split the convolution",
    "cudnn_rnn_non_contiguous_weights": "a view error of our own weight surgery, not a cuDNN status",
    "ddp_device_ids_missing_gpu": "ran: gloo DDP accepted device_ids=[2] for a module on cuda:0",
    "deterministic_cublas_without_workspace_config": "ran: no error for a matmul in torch 2.11",
    "deterministic_index_add": "ran: index_add_ has a deterministic implementation in torch 2.11",
    "deterministic_scatter_reduce_and_cudnn_flag": "ran: scatter_reduce has a deterministic implementation",
    "deterministic_upsample_backward": "ran: bilinear upsampling backward is deterministic in torch 2.11",
    "oom_cublas_workspace_config_too_large": "ran: the workspace size was not taken literally",
    "tf32_advice_warning": "our script's own error (lightning.pytorch.demos is not imported by lightning)",
    "autocast_dtype_not_supported": "ran: no warning printed for autocast to float32 on CUDA",
    # batch d, read before its measurement: written as CPU-only builds by hiding CUDA from a CUDA build of torch,
    # which is device_access's cause (CUDA_VISIBLE_DEVICES), not a build without CUDA
    "current_accelerator_is_none": "printed 'No CUDA GPUs are available': GPUs hidden, not a CPU-only build",
    "triton_kernel_without_cuda": "printed Triton's '0 active drivers': GPUs hidden, not a CPU-only build",
    "lightning_gpu_accelerator_without_cuda": "printed 'No supported gpu backend found!': GPUs hidden, not a "
                                              "CPU-only build",
}
HOLDOUT_OF_BATCH = {"b": "holdout-gpu-b", "c": "holdout-gpu-c", "d": "holdout-gpu-d", "e": "holdout-gpu-e"}
MISLABELLED = {  # seen after the split: the run printed another failure than the one its category names
    "ddp_parameter_marked_ready_twice": "printed 'element 0 of tensors does not require grad' (the checkpointed "
                                        "input had no grad), not DDP's 'mark a variable ready only once'",
}


def groups(entries):
    texts = [e["text"] for e in entries]
    parent = list(range(len(entries)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j, _ in novelty.near_copies(texts, texts):
        parent[root(i)] = root(j)
    found = {}
    for i in range(len(entries)):
        found.setdefault(root(i), []).append(entries[i])
    return sorted(found.values(), key=lambda g: hashlib.sha1(min(e["id"] for e in g).encode()).hexdigest())


def split(entries):
    all_groups = groups(entries)
    budget = HOLDOUT_SHARE * len(entries)
    left = {}  # category -> groups not (yet) in the holdout
    for group in all_groups:
        for category in {e["category"] for e in group}:
            left[category] = left.get(category, 0) + 1
    held = 0
    for group in all_groups:
        categories = {e["category"] for e in group}
        to_holdout = held + len(group) <= budget and all(left[c] >= 2 for c in categories)
        for entry in group:
            entry["split"] = "holdout-gpu" if to_holdout else "dev-gpu"
        if to_holdout:
            held += len(group)
            for c in categories:
                left[c] -= 1
    return all_groups


def _entry(run, path):
    return {"id": "gpu-" + run["name"], "category": run["category"], "source": "bench/faults/faults.py::%s" % run["name"],
            "split": None, "text": run["text"], "command": run["command"], "rc": run["rc"],
            "timed_out": run["timed_out"], "versions": run["versions"], "recorded": Path(path).name}


# a warning line of torch's logging (glog style: W, month, day, time), as dynamo and inductor print theirs
GLOG_WARNING = re.compile(r"^(?:\[rank\d+\]:\s*)?\[?W\d{4} \d\d:\d\d:\d\d", re.MULTILINE)


def not_shown(run):
    """Why a run of batch c, d or e did not show the failure its fault was written for, or None when it did.

    Every fault of these batches but the performance advisories raises; an advisory is a Python or C++ warning
    (UserWarning, TORCH_WARN) or a warning line of torch's logging (dynamo, inductor), printed while the job goes on.
    """
    if not run["text"].strip():
        return "printed nothing (exit status %s%s)" % (run["rc"], ", timed out" if run["timed_out"] else "")
    if run["rc"] == 0 and run["category"] != "performance":
        return "ran: exit status 0"
    if run["rc"] == 0 and "warning" not in run["text"].lower() and not GLOG_WARNING.search(run["text"]):
        return "ran: exit status 0 and no warning printed"
    return None


def add_batch(path, batch="b", public=REPO / "tests" / "data" / "triage_corpus.jsonl"):
    split = HOLDOUT_OF_BATCH[batch]
    earlier = [json.loads(line) for p in (public, OUT) for line in p.open(encoding="utf-8") if line.strip()]
    if any(split in (e["split"], e.get("gathered_as")) for e in earlier):
        sys.exit("%s is already in %s; not added twice" % (split, OUT.name))
    runs = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    left_out = {r["name"]: DROPPED[r["name"]] for r in runs if r["name"] in DROPPED}
    if batch != "b":  # batch b was built before this check; its texts stay as they were
        left_out.update({r["name"]: not_shown(r) for r in runs if r["name"] not in left_out and not_shown(r)})
    new = [_entry(run, path) for run in runs if run["name"] not in left_out]
    for entry in new:
        entry["split"] = split
    for i, j, _ in novelty.near_copies([e["text"] for e in new], [e["text"] for e in earlier]):
        new[i].update(split="repeat", gathered_as=split)
        new[i]["repeat_of"] = sorted(set(new[i].get("repeat_of", [])) | {earlier[j]["id"]})
    with OUT.open("a", encoding="utf-8") as fh:
        for entry in sorted(new, key=lambda e: (e["split"], e["id"])):
            fh.write(json.dumps(entry, sort_keys=True) + "\n")
    held = sum(e["split"] == split for e in new)
    print("batch %s: %d texts: %s %d, repeat %d; %d left out" % (batch, len(new), split, held, len(new) - held,
                                                                 len(left_out)))
    for name, reason in sorted(left_out.items()):
        print("  left out %s: %s" % (name, reason))


def main(path):
    entries = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        run = json.loads(line)
        if run["name"] in DROPPED:
            continue
        entries.append({"id": "gpu-" + run["name"], "category": run["category"],
                        "source": "bench/faults/faults.py::%s" % run["name"], "split": None, "text": run["text"],
                        "command": run["command"], "rc": run["rc"], "timed_out": run["timed_out"],
                        "versions": run["versions"], "recorded": Path(path).name})
    all_groups = split(entries)
    entries = [e for e in entries if e["id"][len("gpu-"):] not in MISLABELLED]
    with OUT.open("w", encoding="utf-8") as fh:
        for entry in sorted(entries, key=lambda e: (e["split"], e["id"])):
            fh.write(json.dumps(entry, sort_keys=True) + "\n")
    n_held = sum(e["split"] == "holdout-gpu" for e in entries)
    print("%d texts (%d left out, %d mislabelled), %d groups of near copies: dev-gpu %d, holdout-gpu %d" % (
        len(entries), len(DROPPED), len(MISLABELLED), len(all_groups), len(entries) - n_held, n_held))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--batch", default="a", choices=["a"] + sorted(HOLDOUT_OF_BATCH))
    args = parser.parse_args()
    add_batch(args.path, args.batch) if args.batch in HOLDOUT_OF_BATCH else main(args.path)
