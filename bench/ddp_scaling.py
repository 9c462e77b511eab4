"""Where DDP's scaling goes: the agent's own DDP task (agents.cudaprobe.checks.train.gpu_ddp) on every local GPU,
with DistributedDataParallel's options varied, against the sum of single-GPU throughput (gpu_train, all GPUs at
once, as train.resnet18 measures it). Prints one line per variant. Run on a GPU host:

    python3 bench/ddp_scaling.py [--steps 20]
"""

import argparse
import json
import multiprocessing
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

VARIANTS = {
    "default (25 MiB buckets)": {},
    "gradient_as_bucket_view": {"gradient_as_bucket_view": True},
    "static_graph": {"static_graph": True},
    "buckets 100 MiB": {"bucket_cap_mb": 100},
    "buckets 5 MiB": {"bucket_cap_mb": 5},
    "static_graph + bucket view": {"static_graph": True, "gradient_as_bucket_view": True},
}


def _rank(rank, world, port, steps, queue):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank))
    from agents.cudaprobe.checks.train import gpu_ddp, gpu_train

    single = gpu_train({"precisions": ["amp_bf16"], "steps": steps, "warmup": 5, "batch": 256})
    queue.put(("single", rank, single["precisions"]["amp_bf16"]["img_s"]))
    for offset, (name, kwargs) in enumerate(VARIANTS.items()):
        result = gpu_ddp({"world": world, "master": ["127.0.0.1", port + offset], "steps": steps, "warmup": 5,
                          "batch": 256, "timeout_s": 60, "ddp_kwargs": kwargs})
        queue.put((name, rank, result))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--port", type=int, default=29700)
    args = parser.parse_args()
    import torch

    world = torch.cuda.device_count()
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    procs = [context.Process(target=_rank, args=(r, world, args.port, args.steps, queue)) for r in range(world)]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=600) for _ in range(world * (1 + len(VARIANTS)))]
    for proc in procs:
        proc.join()
    single = sum(value for name, _, value in results if name == "single")
    print("single-GPU sum (all GPUs at once): %.0f img/s" % single)
    for name in VARIANTS:
        rank0 = next(value for n, rank, value in results if n == name and rank == 0)
        total, no_sync = rank0["img_s_total"], rank0["img_s_total_no_sync"]
        print(json.dumps({"variant": name, "img_s_total": round(total), "scaling": round(total / single, 3),
                          "no_sync_img_s": round(no_sync), "comm_cost": round(1 - total / no_sync, 3),
                          "other_cost": round(1 - no_sync / single, 3)}))


if __name__ == "__main__":
    main()
