"""Plain loops for the figures the agent measures, to read beside its figures in the same lease (issue 22).

Run on the GPU host with its own interpreter: `python3 bench/reference_loop.py [--json FILE]`. Each figure is the
simplest loop that measures it, timed with CUDA events after a warm-up, on random data, with torch's defaults
(cuDNN autotuning off) unless the line says otherwise:
- dense matmul n^3 (8192) per dtype, held: products for 1 s (the GPU reaches its power limit and its clocks
  settle), then as many as run in 1.5 s, timed as one span (the throughput a training job gets);
- the same products timed from idle, 50 after 10 warm-ups (what this loop measured before issue 22: mostly the
  first ~0.1 s, when an idle H200 runs above its held rate), in this process after the held ones;
- host<->device copies of 256 MiB, pinned and pageable, 20 timed after 2 warm-ups;
- ResNet-18 (the agent's model, bs 256, channels-last, synthetic data on the GPU) SGD, AMP bf16 and fp16, 50 timed
  steps after 5 warm-ups, the loss read once at the end, the first step timed on its own.
`--copies` runs only the copies, three turns of: this loop's, then the agent's own GPU task
(agents/cudaprobe/checks/cuda.py gpu_copy_bandwidth, its 10 timed copies of a standard run) in this process: the
same method, buffer and size in one process with nothing else running, to set beside the agent's figure measured
while its training worker imports torch._dynamo (issue 33: pageable H2D 6.1 against 16.8 GB/s).
`--autotune` runs only the ResNet-18 loops, with cuDNN autotuning on (torch.backends.cudnn.benchmark): run it as a
process of its own, so that no plan chosen without autotuning is in cuDNN's cache.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def event_seconds(torch, func, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        func()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000.0 / iters


def matmul(torch, n, dtype, tf32, warmup, iters):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(warmup):
        a @ b
    seconds = event_seconds(torch, lambda: a @ b, iters)
    torch.backends.cuda.matmul.allow_tf32 = False
    return 2 * n**3 / seconds / 1e12


def held_matmul(torch, n, dtype, tf32, warmup_s=1.0, timed_s=1.5):
    """Products for warmup_s, then for timed_s (in steps of 10, synchronised between steps): TFLOP/s of the span."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)

    def run_for(seconds):
        began, products, spent = time.perf_counter(), 0, 0.0
        while time.perf_counter() - began < seconds:
            spent += event_seconds(torch, lambda: a @ b, 10) * 10
            products += 10
        return products, spent

    run_for(warmup_s)
    products, spent = run_for(timed_s)
    torch.backends.cuda.matmul.allow_tf32 = False
    return 2 * n**3 * products / spent / 1e12


def copies(torch, mib=256, iters=20):
    size = mib * 2**20
    device_buf = torch.empty(size, dtype=torch.uint8, device="cuda")
    figures = {}
    for kind, host in (("pinned", torch.empty(size, dtype=torch.uint8).pin_memory()),
                       ("pageable", torch.empty(size, dtype=torch.uint8))):
        host.fill_(1)
        for direction, func in (("h2d", lambda: device_buf.copy_(host, non_blocking=True)),
                                ("d2h", lambda: host.copy_(device_buf, non_blocking=True))):
            for _ in range(2):
                func()
            figures["%s_%s_gbs" % (direction, kind)] = size / event_seconds(torch, func, iters) / 1e9
    return figures


def resnet(torch, precision, steps=50, warmup=5, batch=256):
    from torch import nn

    from agents.cudaprobe.resnet import ResNet18

    torch.manual_seed(0)
    model = ResNet18(10).cuda().to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    dtype = torch.bfloat16 if precision == "amp_bf16" else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "amp_fp16")
    generator = torch.Generator(device="cuda").manual_seed(1234)
    images = torch.randn(batch, 3, 224, 224, generator=generator, device="cuda").contiguous(
        memory_format=torch.channels_last)
    labels = torch.randint(0, 10, (batch,), generator=generator, device="cuda")
    losses = []
    first = None
    began = time.perf_counter()
    for step in range(warmup + steps):
        if step == 1:
            torch.cuda.synchronize()
            first = time.perf_counter() - began
        if step == warmup:
            torch.cuda.synchronize()
            started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype):
            loss = criterion(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.detach())
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    assert all(bool(torch.isfinite(x)) for x in losses)
    return {"img_s": batch * steps / seconds, "first_step_s": first}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--autotune", action="store_true", help="only ResNet-18, with cuDNN autotuning on")
    parser.add_argument("--copies", action="store_true", help="only the copies: this loop's and the agent's task")
    args = parser.parse_args()
    started = time.perf_counter()
    import torch

    figures = {"torch": torch.__version__, "import_s": time.perf_counter() - started,
               "gpu": torch.cuda.get_device_name(0)}
    if args.copies:
        from agents.cudaprobe.checks.cuda import gpu_copy_bandwidth

        for turn in range(3):
            figures.update({"loop%d_%s" % (turn, k): v for k, v in copies(torch).items()})
            agent = gpu_copy_bandwidth({"mib": 256, "iters": 10})["gpus"][0]
            figures.update({"agent_task%d_%s" % (turn, k): v for k, v in agent.items() if k.endswith("_gbs")})
        args.autotune = None
    elif not args.autotune:
        plans = (("bf16", torch.bfloat16, False, 50), ("fp16", torch.float16, False, 50),
                 ("tf32", torch.float32, True, 50), ("fp32", torch.float32, False, 10))
        for name, dtype, tf32, iters in plans:
            figures["matmul_%s_tflops" % name] = held_matmul(torch, args.n, dtype, tf32)
        for name, dtype, tf32, iters in plans:
            time.sleep(2.0)  # idle again: clocks fall back
            figures["from_idle_matmul_%s_tflops" % name] = matmul(torch, args.n, dtype, tf32, 10, iters)
        figures.update(copies(torch))
    torch.backends.cudnn.benchmark = bool(args.autotune)
    suffix = "_autotuned" if args.autotune else ""
    for precision in ("amp_bf16", "amp_fp16") if args.autotune is not None else ():
        result = resnet(torch, precision)
        figures["resnet18_%s%s_img_s" % (precision, suffix)] = result["img_s"]
        figures["resnet18_%s%s_first_step_s" % (precision, suffix)] = result["first_step_s"]
    figures["wall_s"] = time.perf_counter() - started
    for key, value in figures.items():
        print("%-44s %s" % (key, "%.2f" % value if isinstance(value, float) else value))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
