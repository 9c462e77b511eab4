"""Child-process entry: `python -m agents.cudaprobe.gpu.worker --serve`.

Serving, it imports torch once, then reads one request per line on stdin ({"task": ..., "args": ...})
and answers each with one result line (CUDAPROBE_RESULT {...}) on stdout; an exception is reported in
the same line, never as a bare traceback, so the parent can always tell what happened. The parent
enforces every budget and kills the worker's process group when one runs out.
"""

import json
import math
import os
import sys
import time
import traceback

RESULT_MARKER = "CUDAPROBE_RESULT "
TASKS = {}
IMPORT_S = {}  # seconds `import torch` took in this process, when serve() did it


def task(func):
    TASKS[func.__name__] = func
    return func


def _config_flags(torch):
    flags = {}
    try:
        text = torch.__config__.show()
    except Exception:
        return flags
    for name in ("USE_CUDA", "USE_CUDNN", "USE_NCCL", "USE_GLOO", "CUDA_VERSION"):
        marker = name + "="
        if marker in text:
            flags[name] = text.split(marker, 1)[1].split(",", 1)[0].strip()
    return flags


@task
def torch_info(args):
    started = time.perf_counter()
    import torch

    info = {"import_s": IMPORT_S.get("torch", time.perf_counter() - started),"torch_version": str(torch.__version__), "cuda": torch.version.cuda,
            "file": getattr(torch, "__file__", None), "config": _config_flags(torch)}
    for key, getter in (
        ("cudnn", lambda: torch.backends.cudnn.version()),
        ("nccl", lambda: ".".join(map(str, torch.cuda.nccl.version()))),
        ("arch_list", lambda: torch.cuda.get_arch_list()),
        ("nccl_available", lambda: torch.distributed.is_available() and torch.distributed.is_nccl_available()),
        ("gloo_available", lambda: torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    ):
        try:
            info[key] = getter()
        except Exception as exc:
            info[key] = None
            info.setdefault("notes", []).append("%s: %s" % (key, exc))
    started = time.perf_counter()
    info["is_available"] = bool(torch.cuda.is_available())
    info["device_count"] = int(torch.cuda.device_count()) if info["is_available"] else 0
    info["is_available_s"] = time.perf_counter() - started
    devices = []
    for index in range(info["device_count"]):
        props = torch.cuda.get_device_properties(index)
        devices.append({"index": index, "name": props.name, "capability": "%d.%d" % (props.major, props.minor),
                        "total_memory_gib": props.total_memory / 2**30, "sm_count": props.multi_processor_count})
    info["devices"] = devices
    return info


def _sync_time(torch, device, func, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        func()
    end.record()
    torch.cuda.synchronize(device)
    return start.elapsed_time(end) / 1000.0 / iters


@task
def context(args):
    """Per GPU: context creation time, a 1 GiB allocation, a matmul checked against the CPU, memory."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    gpus = []
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(1024, 1024, generator=generator)
    b = torch.randn(1024, 1024, generator=generator)
    reference = (a.double() @ b.double())
    for index in range(torch.cuda.device_count()):
        entry = {"index": index}
        started = time.perf_counter()
        torch.cuda.set_device(index)
        torch.zeros(1, device=index)
        torch.cuda.synchronize(index)
        entry["context_s"] = time.perf_counter() - started
        started = time.perf_counter()
        block = torch.ones(256 * 2**20, dtype=torch.int32, device=index)  # 1 GiB
        entry["alloc_ok"] = int(block.sum().item()) == 256 * 2**20
        entry["alloc_s"] = time.perf_counter() - started
        del block
        product = (a.to(index) @ b.to(index)).double().cpu()
        entry["matmul_rel_err"] = float((product - reference).abs().max() / reference.abs().max())
        free, total = torch.cuda.mem_get_info(index)
        entry.update(free_gib=free / 2**30, total_gib=total / 2**30,
                     allocated_mib=torch.cuda.memory_allocated(index) / 2**20,
                     reserved_mib=torch.cuda.memory_reserved(index) / 2**20)
        gpus.append(entry)
    return {"gpus": gpus}


@task
def copy_bandwidth(args):
    """Host<->device copy bandwidth per GPU, pinned and pageable, timed with CUDA events."""
    import torch

    size = int(args.get("mib", 256)) * 2**20
    iters = int(args.get("iters", 10))
    gpus = []
    for index in range(torch.cuda.device_count()):
        torch.cuda.set_device(index)
        device_buf = torch.empty(size, dtype=torch.uint8, device=index)
        entry = {"index": index}
        for kind, host_buf in (("pinned", torch.empty(size, dtype=torch.uint8).pin_memory()),
                               ("pageable", torch.empty(size, dtype=torch.uint8))):
            host_buf.fill_(1)
            for direction, func in (("h2d", lambda: device_buf.copy_(host_buf, non_blocking=True)),
                                    ("d2h", lambda: host_buf.copy_(device_buf, non_blocking=True))):
                func()
                torch.cuda.synchronize(index)
                seconds = _sync_time(torch, index, func, iters)
                entry["%s_%s_gbs" % (direction, kind)] = size / seconds / 1e9
        gpus.append(entry)
    return {"gpus": gpus}


@task
def matmul(args):
    """Dense matmul TFLOP/s per GPU and dtype (n x n x n), after warm-up."""
    import torch

    n = int(args.get("n", 8192))
    plans = (("bf16", torch.bfloat16, False, 30), ("fp16", torch.float16, False, 30),
             ("tf32", torch.float32, True, 10), ("fp32", torch.float32, False, 4))
    gpus = []
    for index in range(torch.cuda.device_count()):
        torch.cuda.set_device(index)
        entry = {"index": index}
        for name, dtype, tf32, iters in plans:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device=index, dtype=dtype)
            b = torch.randn(n, n, device=index, dtype=dtype)
            for _ in range(3):
                a @ b
            seconds = _sync_time(torch, index, lambda: a @ b, iters)
            entry["%s_tflops" % name] = 2 * n**3 / seconds / 1e12
            del a, b
        torch.backends.cuda.matmul.allow_tf32 = False
        gpus.append(entry)
        torch.cuda.empty_cache()
    return {"gpus": gpus}


@task
def p2p(args):
    """Peer access matrix and device-to-device copy bandwidth between every ordered pair."""
    import torch

    count = torch.cuda.device_count()
    size = int(args.get("mib", 1024)) * 2**20
    pairs = []
    for src in range(count):
        for dst in range(count):
            if src == dst:
                continue
            entry = {"src": src, "dst": dst, "access": bool(torch.cuda.can_device_access_peer(src, dst))}
            a = torch.empty(size, dtype=torch.uint8, device=src)
            b = torch.empty(size, dtype=torch.uint8, device=dst)
            b.copy_(a)
            torch.cuda.synchronize(src)
            torch.cuda.synchronize(dst)
            with torch.cuda.device(src):
                entry["copy_gbs"] = size / _sync_time(torch, src, lambda: b.copy_(a, non_blocking=True), 10) / 1e9
            torch.cuda.synchronize(dst)
            pairs.append(entry)
            del a, b
    return {"pairs": pairs}


def _init_group(torch, backend, args):
    import datetime

    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(args["world"])
    addr, port = args["master"]
    kwargs = {"backend": backend, "rank": rank, "world_size": world, "init_method": "tcp://%s:%s" % (addr, port),
              "timeout": datetime.timedelta(seconds=args.get("timeout_s", 60))}
    if backend == "nccl":
        # The device is chosen before the group exists, so NCCL binds each rank to its own GPU.
        local = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local)
        kwargs["device_id"] = torch.device("cuda", local)
    started = time.perf_counter()
    dist.init_process_group(**kwargs)
    return dist, rank, world, time.perf_counter() - started


@task
def allreduce(args):
    """All-reduce correctness and bandwidth; busbw = algbw * 2(n-1)/n as nccl-tests defines it."""
    import torch

    backend = args.get("backend", "nccl")
    dist, rank, world, init_s = _init_group(torch, backend, args)
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    expected = world * (world + 1) / 2
    results = []
    correct = True
    try:
        for mib in args.get("sizes_mib", [4]):
            count = int(mib * 2**20 // 4)
            tensor = torch.full((count,), float(rank + 1), device=device)
            dist.all_reduce(tensor)
            correct = correct and bool((tensor[:1024] == expected).all()) and bool((tensor[-1024:] == expected).all())
            iters = max(3, min(40, int(2 * 2**30 / (mib * 2**20))))
            if backend != "nccl":
                iters = min(iters, 10)
            for _ in range(2):
                dist.all_reduce(tensor)
            dist.barrier()
            if backend == "nccl":
                torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(tensor)
            if backend == "nccl":
                torch.cuda.synchronize()
            seconds = (time.perf_counter() - started) / iters
            algbw = mib * 2**20 / seconds / 1e9
            results.append({"MiB": mib, "time_us": seconds * 1e6, "algbw_gbs": algbw,
                            "busbw_gbs": algbw * 2 * (world - 1) / world})
            del tensor
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return {"rank": rank, "world": world, "backend": backend, "init_s": init_s, "correct": correct,
            "sizes": results}


def _synthetic_batches(torch, device, batch, count, classes, channels_last):
    """Random images and labels made on the GPU itself (seeded): no dataset, no host-side cost."""
    generator = torch.Generator(device=device).manual_seed(1234)
    batches = []
    for _ in range(count):
        images = torch.randn(batch, 3, 224, 224, generator=generator, device=device)
        if channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        labels = torch.randint(0, classes, (batch,), generator=generator, device=device)
        batches.append((images, labels))
    return batches


def _train_loop(torch, model, batches, precision, steps, warmup, device, sampler_epochs=None):
    """Steps of SGD with the precision's recipe; returns losses and the seconds of the timed steps."""
    from torch import nn

    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    use_amp = precision.startswith("amp_")
    amp_dtype = torch.bfloat16 if precision == "amp_bf16" else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=(precision == "amp_fp16"))
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision != "fp32"
    losses = []
    started = None
    for step in range(steps + warmup):
        if step == warmup:
            torch.cuda.synchronize(device)
            started = time.perf_counter()
        images, labels = batches[step % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        # Only the forward pass and the loss run under autocast; backward and the
        # scaler's step/update stay outside it.
        with torch.autocast("cuda", dtype=amp_dtype, enabled=use_amp):
            loss = criterion(model(images), labels)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)  # gradients in true units before clipping
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        scaler.step(optimizer)
        scaler.update()
        losses.append(float(loss.detach()))
    torch.cuda.synchronize(device)
    return losses, time.perf_counter() - started


@task
def train(args):
    """ResNet-18 on synthetic data on one GPU, in each requested precision."""
    import torch

    from agents.cudaprobe.gpu.resnet import ResNet18

    index = int(args.get("gpu", os.environ.get("LOCAL_RANK", 0)))
    torch.cuda.set_device(index)
    device = torch.device("cuda", index)
    torch.backends.cudnn.benchmark = True
    batch, steps, warmup = int(args.get("batch", 256)), int(args.get("steps", 30)), int(args.get("warmup", 5))
    batches = _synthetic_batches(torch, device, batch, 4, 10, True)
    results = {}
    for precision in args.get("precisions", ["amp_bf16"]):
        torch.manual_seed(0)
        model = ResNet18(10).to(device).to(memory_format=torch.channels_last)
        torch.cuda.reset_peak_memory_stats(device)
        losses, seconds = _train_loop(torch, model, batches, precision, steps, warmup, device)
        results[precision] = {
            "img_s": batch * steps / seconds,
            "peak_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30,
            "loss_first": losses[0], "loss_last": losses[-1],
            "loss_head": sum(losses[:3]) / 3, "loss_tail": sum(losses[-3:]) / 3,
            "finite": all(math.isfinite(x) for x in losses),
        }
        del model
        torch.cuda.empty_cache()
    return {"gpu": index, "batch": batch, "steps": steps, "precisions": results}


@task
def ddp(args):
    """ResNet-18 DDP, AMP bf16, one rank per GPU, DistributedSampler with set_epoch each epoch."""
    import torch
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DistributedSampler

    from agents.cudaprobe.gpu.resnet import ResNet18

    dist, rank, world, init_s = _init_group(torch, "nccl", args)
    device = torch.device("cuda", torch.cuda.current_device())
    torch.backends.cudnn.benchmark = True
    batch, steps, warmup = int(args.get("batch", 256)), int(args.get("steps", 30)), int(args.get("warmup", 5))
    pool = _synthetic_batches(torch, device, batch, 4, 10, True)
    images = torch.cat([b[0] for b in pool])
    labels = torch.cat([b[1] for b in pool])
    sampler = DistributedSampler(range(len(labels)), num_replicas=world, rank=rank, shuffle=True, seed=0)
    torch.manual_seed(0)
    model = DistributedDataParallel(ResNet18(10).to(device).to(memory_format=torch.channels_last),
                                    device_ids=[device.index])
    epoch_batches = []
    epoch = 0
    while len(epoch_batches) < steps + warmup:
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        order = list(sampler)
        for start in range(0, len(order) - batch + 1, batch):
            index = torch.tensor(order[start:start + batch], device=device)
            epoch_batches.append((images.index_select(0, index), labels.index_select(0, index)))
        epoch += 1
    dist.barrier()
    try:
        losses, seconds = _train_loop(torch, model, epoch_batches, "amp_bf16", steps, warmup, device)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return {"rank": rank, "world": world, "batch": batch, "steps": steps, "img_s_rank": batch * steps / seconds,
            "img_s_total": world * batch * steps / seconds, "loss_first": losses[0], "loss_last": losses[-1],
            "finite": all(math.isfinite(x) for x in losses)}


def _release_cached_memory():
    """Hand the caching allocator's blocks back, so one task's buffers do not count against the next."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            for index in range(torch.cuda.device_count()):
                with torch.cuda.device(index):
                    torch.cuda.empty_cache()
    except Exception:
        pass  # best effort: a task's result never depends on it


def run_one(name, args):
    """Run one task; the result, or the exception described in it."""
    try:
        result = TASKS[name](args)
        _release_cached_memory()
        return result
    except BaseException as exc:  # the parent needs the reason in the result line, whatever it was
        return {"error": type(exc).__name__, "message": str(exc)[:4000], "traceback": traceback.format_exc()[-8000:]}


def reply(result):
    sys.stdout.write(RESULT_MARKER + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()


def serve():
    started = time.perf_counter()
    try:
        import torch  # noqa: F401 - paid once here, while the parent goes on with other checks
        IMPORT_S["torch"] = time.perf_counter() - started
    except BaseException:
        pass  # each task imports torch again and reports the error as its result
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            name, args = request["task"], request.get("args") or {}
        except (ValueError, KeyError, TypeError) as exc:
            reply({"error": "BadRequest", "message": str(exc)})
            continue
        reply(run_one(name, args))
    return 0


if __name__ == "__main__":
    sys.exit(serve())
