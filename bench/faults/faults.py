"""Faults a training job meets, each made for real inside this process (never a GPU setting): one function a fault.

    python3 bench/faults/faults.py NAME          # one fault; what it prints is the text of the corpus
    python3 bench/faults/faults.py --list        # name, category, launcher, environment as JSON lines

Every fault is registered with the playbook category an operator needs for it (set when the fault was written,
before any triage ran on its text), the environment it runs under, and how it is launched: `python` (this file),
`torchrun` (N local workers of this file; each worker runs the function) or `child` (the function starts its own
processes). Batch "b" was written after the first blind measurement, for a second blind holdout (its categories
set before it ran, like the first's); batch "c", with mechanisms and API paths of neither, for a third
(holdout-gpu-c); batch "d", each fault aimed at a final message no text of a, b or c printed, for a fourth
(holdout-gpu-d); batch "e", aimed the same way past every text of a to d, for a fifth (holdout-gpu-e).
bench/faults/run_all.py runs them all (or one batch: --batch e) and keeps each text with its command and the
versions.
Memory-filling faults are `serial`: run_all.py runs them alone, so they cannot starve the others.
"""

import json
import os
import sys
from datetime import timedelta

FAULTS = {}


def fault(category, env=None, launcher="python", nproc=1, serial=False, timeout=60, note="", batch="a"):
    def register(fn):
        FAULTS[fn.__name__] = {"name": fn.__name__, "category": category, "env": env or {}, "launcher": launcher,
                               "nproc": nproc, "serial": serial, "timeout": timeout, "note": note or fn.__doc__ or "",
                               "batch": batch, "fn": fn}
        return fn
    return register


def _torch():
    import torch
    return torch


def _sync():
    _torch().cuda.synchronize()


def _port():
    return int(os.environ.get("FAULT_PORT", "29711"))


def _world(backend, world_size=1, rank=0, **kwargs):
    import torch.distributed as dist
    dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % _port(), rank=rank, world_size=world_size,
                            **kwargs)
    return dist


def _env_world(backend, **kwargs):
    """Under torchrun: the rank and world from its environment."""
    import torch.distributed as dist
    dist.init_process_group(backend, **kwargs)
    return dist


def _fill_gpu(leave_mib):
    """Take the GPU's free memory in this process, leaving about leave_mib MiB; returns the blocks."""
    torch = _torch()
    free, _ = torch.cuda.mem_get_info()
    blocks = []
    chunk = 1 << 30
    while free - chunk > leave_mib * (1 << 20):
        try:
            blocks.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            break
        free, _ = torch.cuda.mem_get_info()
    while free > leave_mib * (1 << 20) + (64 << 20):
        try:
            blocks.append(torch.empty(32 << 20, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            break
        free, _ = torch.cuda.mem_get_info()
    return blocks


# ---- out-of-range indices and device-side asserts --------------------------------------------------------------

@fault("illegal_access")
def embedding_index_out_of_range():
    """An embedding looked up with an id past its vocabulary."""
    torch = _torch()
    emb = torch.nn.Embedding(1000, 64).cuda()
    ids = torch.tensor([[3, 17, 1000, 4]], device="cuda")
    out = emb(ids)
    print(out.sum().item())


@fault("illegal_access")
def cross_entropy_target_out_of_range():
    """A classification target >= the number of classes."""
    torch = _torch()
    logits = torch.randn(8, 10, device="cuda", requires_grad=True)
    target = torch.tensor([1, 2, 3, 10, 4, 5, 6, 7], device="cuda")
    loss = torch.nn.functional.cross_entropy(logits, target)
    loss.backward()
    print(loss.item())


@fault("illegal_access")
def advanced_index_out_of_bounds():
    """Fancy indexing with an index past the dimension, on the GPU."""
    torch = _torch()
    x = torch.randn(128, 16, device="cuda")
    idx = torch.tensor([0, 5, 200], device="cuda")
    print(x[idx].sum().item())


@fault("illegal_access")
def scatter_add_index_out_of_bounds():
    """scatter_add_ with an index past the output size."""
    torch = _torch()
    out = torch.zeros(10, device="cuda")
    index = torch.tensor([0, 3, 12, 5], device="cuda")
    out.scatter_add_(0, index, torch.ones(4, device="cuda"))
    print(out.sum().item())


@fault("illegal_access")
def gather_index_out_of_bounds():
    """torch.gather with an index past the dimension."""
    torch = _torch()
    x = torch.randn(4, 6, device="cuda")
    idx = torch.tensor([[0, 9], [1, 2], [3, 4], [5, 0]], device="cuda")
    print(torch.gather(x, 1, idx).sum().item())


@fault("illegal_access")
def binary_cross_entropy_input_outside_0_1():
    """BCE given logits instead of probabilities."""
    torch = _torch()
    pred = torch.randn(32, device="cuda") * 3
    target = torch.randint(0, 2, (32,), device="cuda").float()
    print(torch.nn.functional.binary_cross_entropy(pred, target).item())


@fault("illegal_access")
def nll_loss_negative_target():
    """A padding label of -1 without ignore_index."""
    torch = _torch()
    logp = torch.log_softmax(torch.randn(6, 5, device="cuda"), dim=1)
    target = torch.tensor([0, 1, -1, 2, 3, 4], device="cuda")
    print(torch.nn.functional.nll_loss(logp, target, ignore_index=-100).item())


@fault("illegal_access")
def assert_async_false():
    """torch._assert_async on a false condition (a data check on the GPU)."""
    torch = _torch()
    labels = torch.tensor([3, 1, 7], device="cuda")
    torch._assert_async((labels < 5).all())
    _sync()


@fault("illegal_access")
def cupy_kernel_illegal_address():
    """A custom CUDA kernel writing far past its buffer (CuPy RawKernel), then a torch call."""
    import cupy
    torch = _torch()
    kernel = cupy.RawKernel(r'''
    extern "C" __global__ void scatter(float* out, const long long* idx, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) out[idx[i]] = 1.0f;
    }''', "scatter")
    out = torch.zeros(1024, device="cuda")
    idx = torch.tensor([1, 2, 1 << 40], device="cuda")
    kernel((1,), (32,), (out.data_ptr(), idx.data_ptr(), 3))
    print(out.sum().item())


@fault("illegal_access")
def cupy_kernel_misaligned_address():
    """A custom kernel reading a float4 from an address that is not 16-byte aligned."""
    import cupy
    kernel = cupy.RawKernel(r'''
    extern "C" __global__ void load4(const char* base, float* out) {
        const float4* p = reinterpret_cast<const float4*>(base + 4);
        float4 v = *p;
        out[0] = v.x + v.y + v.z + v.w;
    }''', "load4")
    base = cupy.zeros(64, dtype=cupy.uint8)
    out = cupy.zeros(1, dtype=cupy.float32)
    kernel((1,), (1,), (base, out))
    cupy.cuda.runtime.deviceSynchronize()


@fault("illegal_access", env={"TRITON_DEBUG": "1"})
def triton_device_assert():
    """A Triton kernel's own tl.device_assert on a bad index."""
    import triton
    import triton.language as tl
    torch = _torch()

    @triton.jit
    def lookup(table, idx, out, n, size: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        i = tl.load(idx + offs, mask=mask, other=0)
        tl.device_assert(i < size, "index out of range")
        tl.store(out + offs, tl.load(table + i, mask=mask), mask=mask)

    table = torch.randn(16, device="cuda")
    idx = torch.tensor([1, 2, 40, 3], device="cuda")
    out = torch.empty(4, device="cuda")
    lookup[(1,)](table, idx, out, 4, size=16, BLOCK=16)
    print(out.sum().item())


# ---- invalid ordinals and hidden devices ------------------------------------------------------------------------

@fault("device_access", note="a device index past torch.cuda.device_count() (1 on this host)")
def tensor_on_missing_ordinal():
    """A tensor put on cuda:3 of a one-GPU host."""
    torch = _torch()
    x = torch.ones(4, device="cuda:3")
    print(x)


@fault("device_access")
def set_device_missing_ordinal():
    """torch.cuda.set_device(LOCAL_RANK) with a rank past the GPUs."""
    torch = _torch()
    local_rank = 5
    torch.cuda.set_device(local_rank)
    torch.zeros(1, device="cuda")


@fault("device_access")
def get_device_properties_missing():
    """torch.cuda.get_device_properties of a GPU that is not there."""
    torch = _torch()
    print(torch.cuda.get_device_name(0))
    print(torch.cuda.get_device_properties(4))


@fault("device_access", env={"CUDA_VISIBLE_DEVICES": "7"})
def cuda_visible_devices_names_missing_gpu():
    """CUDA_VISIBLE_DEVICES names a GPU index the host does not have."""
    torch = _torch()
    print("cuda available:", torch.cuda.is_available(), "devices:", torch.cuda.device_count())
    model = torch.nn.Linear(4, 4).cuda()
    print(model)


@fault("device_access", launcher="torchrun", nproc=2)
def torchrun_rank_past_gpus():
    """Two local workers on a one-GPU host, each on cuda:LOCAL_RANK."""
    torch = _torch()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = torch.nn.Linear(8, 8).to("cuda:%d" % local_rank)
    print(model(torch.randn(2, 8, device="cuda")).sum().item())


@fault("device_access")
def ddp_device_ids_missing_gpu():
    """DDP told device_ids=[2] on a one-GPU host."""
    torch = _torch()
    _world("gloo")
    model = torch.nn.Linear(8, 8).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[2])
    print(ddp)


# ---- allocator settings refused ---------------------------------------------------------------------------------

@fault("oom", env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segment:True"})
def alloc_conf_unknown_key():
    """A misspelt PYTORCH_CUDA_ALLOC_CONF key."""
    torch = _torch()
    print(torch.zeros(4, device="cuda").sum().item())


@fault("oom", env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:yes"})
def alloc_conf_bad_boolean():
    """expandable_segments given a value that is not True/False."""
    torch = _torch()
    print(torch.zeros(4, device="cuda").sum().item())


@fault("oom", env={"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:8"})
def alloc_conf_split_size_too_small():
    """max_split_size_mb below the allocator's minimum."""
    torch = _torch()
    print(torch.zeros(4, device="cuda").sum().item())


@fault("oom", env={"PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:1.4"})
def alloc_conf_gc_threshold_out_of_range():
    """garbage_collection_threshold outside (0, 1)."""
    torch = _torch()
    print(torch.zeros(4, device="cuda").sum().item())


@fault("oom", env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocManaged"})
def alloc_conf_unknown_backend():
    """An allocator backend PyTorch does not have."""
    torch = _torch()
    print(torch.zeros(4, device="cuda").sum().item())


@fault("oom")
def memory_fraction_out_of_range():
    """torch.cuda.set_per_process_memory_fraction(1.5)."""
    torch = _torch()
    torch.cuda.set_per_process_memory_fraction(1.5)


# ---- out of memory, each kind ----------------------------------------------------------------------------------

@fault("oom")
def oom_single_huge_allocation():
    """One tensor larger than the GPU."""
    torch = _torch()
    x = torch.empty(200 * (1 << 30) // 4, dtype=torch.float32, device="cuda")
    print(x.shape)


@fault("oom")
def oom_under_memory_fraction():
    """An allocation over this process's memory fraction (the GPU itself has room)."""
    torch = _torch()
    torch.cuda.set_per_process_memory_fraction(0.02)
    kept = [torch.empty(512 << 20, dtype=torch.uint8, device="cuda") for _ in range(4)]
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    print(len(kept), x.shape)


@fault("oom", env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
def oom_cuda_malloc_async():
    """The cudaMallocAsync backend out of memory."""
    torch = _torch()
    x = torch.empty(300 << 30, dtype=torch.uint8, device="cuda")
    print(x.shape)


@fault("oom", env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
def oom_expandable_segments_in_backward():
    """Backward of a wide layer under expandable segments, over a memory fraction."""
    torch = _torch()
    torch.cuda.set_per_process_memory_fraction(0.03)
    layer = torch.nn.Linear(8192, 8192).cuda()
    x = torch.randn(65536, 8192, device="cuda", requires_grad=True)
    h = torch.relu(layer(x))
    h = torch.relu(layer(h))
    h.sum().backward()


@fault("oom")
def oom_activations_in_forward():
    """A batch whose activations do not fit (attention scores of a long sequence)."""
    torch = _torch()
    torch.cuda.set_per_process_memory_fraction(0.05)
    q = torch.randn(16, 16, 16384, 64, device="cuda", dtype=torch.float16)
    scores = q @ q.transpose(-1, -2)
    print(scores.softmax(-1).sum().item())


@fault("oom", launcher="torchrun", nproc=1)
def oom_inside_ddp():
    """OOM in forward of a DDP model, under torchrun (NCCL, one rank)."""
    torch = _torch()
    torch.cuda.set_device(0)
    dist = _env_world("nccl")
    torch.cuda.set_per_process_memory_fraction(0.04)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(4096, 16384), torch.nn.GELU(), torch.nn.Linear(16384, 4096)).cuda(), device_ids=[0])
    for step in range(3):
        out = model(torch.randn(32768 * (step + 1), 4096, device="cuda"))
        out.float().pow(2).mean().backward()
    dist.destroy_process_group()


@fault("oom", serial=True)
def oom_cublas_workspace():
    """The first matmul when the GPU is full: cuBLAS cannot get its handle or workspace."""
    torch = _torch()
    a = torch.randn(64, 64, device="cuda")
    blocks = _fill_gpu(leave_mib=2)
    print("held %d blocks" % len(blocks))
    print((a @ a).sum().item())


@fault("oom", env={"CUBLAS_WORKSPACE_CONFIG": ":4194304:8"})
def oom_cublas_workspace_config_too_large():
    """CUBLAS_WORKSPACE_CONFIG asking for a workspace larger than the GPU."""
    torch = _torch()
    a = torch.randn(256, 256, device="cuda")
    print((a @ a).sum().item())


@fault("oom", serial=True, launcher="child")
def oom_context_when_another_process_holds_the_gpu():
    """A second process starts CUDA while one of ours holds all the GPU's memory."""
    import subprocess
    import time
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys; sys.path.insert(0, %r); import faults; b = faults._fill_gpu(leave_mib=1); "
        "print('ready', len(b), flush=True); import time; time.sleep(60)") % os.path.dirname(__file__)],
        stdout=subprocess.PIPE, text=True)
    try:
        holder.stdout.readline()
        time.sleep(1)
        done = subprocess.run([sys.executable, "-c", "import torch; x = torch.ones(1024, device='cuda'); "
                               "print((x @ x).item())"], capture_output=True, text=True, timeout=60)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        sys.exit(done.returncode)
    finally:
        holder.kill()


@fault("oom", serial=True)
def oom_nccl_init_on_full_gpu():
    """NCCL's communicator set up when the GPU has no memory left."""
    torch = _torch()
    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")
    blocks = _fill_gpu(leave_mib=8)
    dist = _world("nccl", device_id=torch.device("cuda", 0))
    x = torch.ones(1 << 20, device="cuda") if not blocks else blocks[-1][:1024].float()
    dist.all_reduce(x)
    _sync()
    print(x.sum().item())


@fault("oom", serial=True)
def oom_cudnn_conv_on_full_gpu():
    """A convolution when the GPU has no memory left for cuDNN's workspace."""
    torch = _torch()
    torch.backends.cudnn.benchmark = True
    conv = torch.nn.Conv2d(64, 128, 3, padding=1).cuda().half()
    x = torch.randn(32, 64, 128, 128, device="cuda", dtype=torch.float16)
    blocks = _fill_gpu(leave_mib=4)
    print(len(blocks), conv(x).sum().item())


@fault("oom")
def oom_pinned_host_memory():
    """Pinned host memory larger than the host has."""
    torch = _torch()
    x = torch.empty(1 << 42, dtype=torch.uint8, pin_memory=True)
    print(x.shape)


# ---- NaN and inf: forward, backward (anomaly mode), loss scaler ----------------------------------------------

@fault("amp_numerics")
def anomaly_mode_nan_in_backward():
    """Anomaly mode finds a NaN made by log of a negative number."""
    torch = _torch()
    torch.autograd.set_detect_anomaly(True)
    w = torch.randn(16, device="cuda", requires_grad=True)
    x = torch.randn(16, device="cuda")
    loss = torch.log(w * x).sum()
    loss.backward()


@fault("amp_numerics")
def anomaly_mode_sqrt_of_zero():
    """Anomaly mode: the gradient of sqrt at 0 is inf, times 0 is NaN (a norm of a zero vector)."""
    torch = _torch()
    with torch.autograd.detect_anomaly():
        v = torch.zeros(8, 3, device="cuda", requires_grad=True)
        dist = (v - v.detach()).pow(2).sum(-1).sqrt()
        dist.mean().backward()


@fault("amp_numerics")
def clip_grad_norm_non_finite():
    """clip_grad_norm_(error_if_nonfinite=True) after a step that overflowed."""
    torch = _torch()
    model = torch.nn.Linear(32, 1).cuda()
    x = torch.full((4, 32), 1e30, device="cuda")
    loss = model(x).pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)


@fault("amp_numerics")
def grad_scaler_fp16_parameters():
    """GradScaler with a model made half precision (model.half())."""
    torch = _torch()
    model = torch.nn.Linear(16, 16).cuda().half()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    loss = model(torch.randn(4, 16, device="cuda", dtype=torch.float16)).float().mean()
    scaler.scale(loss).backward()
    scaler.step(opt)


@fault("amp_numerics")
def grad_scaler_unscale_twice():
    """scaler.unscale_ called twice in one step (once for clipping, once again)."""
    torch = _torch()
    model = torch.nn.Linear(16, 16).cuda()
    opt = torch.optim.AdamW(model.parameters())
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(torch.randn(4, 16, device="cuda")).float().mean()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.unscale_(opt)


@fault("amp_numerics")
def grad_scaler_step_without_backward():
    """scaler.step with no scaled backward in this iteration."""
    torch = _torch()
    model = torch.nn.Linear(16, 16).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    scaler.step(opt)


@fault("amp_numerics")
def grad_scaler_scale_collapses():
    """A training loop under fp16 autocast whose gradients overflow every step; it prints loss and scale."""
    torch = _torch()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 16)
    for step in range(8):
        x = torch.randn(32, 64, device="cuda") * 3000
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).pow(2).mean()
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        print("step %d loss %s scale %s" % (step, loss.item(), scaler.get_scale()))


@fault("amp_numerics")
def fp16_forward_overflow_loss_inf():
    """A plain loop whose fp16 forward overflows: it prints loss: inf, then nan."""
    torch = _torch()
    torch.manual_seed(0)
    model = torch.nn.Linear(512, 512).cuda().half()
    opt = torch.optim.SGD(model.parameters(), lr=10.0)
    for step in range(4):
        x = torch.randn(64, 512, device="cuda", dtype=torch.float16) * 40
        loss = model(x).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("epoch 0 step %d loss: %s" % (step, loss.item()))


@fault("amp_numerics")
def multinomial_nan_probabilities():
    """Sampling from probabilities that went NaN (a softmax of inf logits)."""
    torch = _torch()
    logits = torch.tensor([[1.0, float("inf"), float("inf")]], device="cuda")
    probs = torch.softmax(logits, dim=-1)
    print(torch.multinomial(probs, 1).item())


@fault("amp_numerics")
def nan_check_in_training_loop():
    """A loop that checks torch.isfinite(loss) and stops, as many training scripts do."""
    torch = _torch()
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e4)
    for step in range(50):
        loss = model(torch.randn(8, 16, device="cuda")).pow(2).mean()
        if not torch.isfinite(loss):
            raise FloatingPointError("non-finite loss %s at step %d" % (loss.item(), step))
        opt.zero_grad()
        loss.backward()
        opt.step()


# ---- collectives: mismatches, timeouts, desyncs --------------------------------------------------------------

@fault("nccl_timeout", launcher="torchrun", nproc=2, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
def collective_shape_mismatch_detail():
    """Ranks all_reduce tensors of different shapes; TORCH_DISTRIBUTED_DEBUG=DETAIL checks them."""
    torch = _torch()
    dist = _env_world("gloo")
    x = torch.ones(4 if dist.get_rank() == 0 else 8)
    dist.all_reduce(x)
    print(x.sum())


@fault("nccl_timeout", launcher="torchrun", nproc=2, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
def collective_op_mismatch_detail():
    """Rank 0 all_reduces while rank 1 broadcasts (a branch that differs per rank)."""
    torch = _torch()
    dist = _env_world("gloo")
    x = torch.ones(4)
    if dist.get_rank() == 0:
        dist.all_reduce(x)
    else:
        dist.broadcast(x, src=0)
    print(x.sum())


@fault("nccl_timeout", launcher="torchrun", nproc=2)
def gloo_collective_size_mismatch():
    """Ranks all_reduce tensors of different sizes, no debug checks (gloo)."""
    torch = _torch()
    dist = _env_world("gloo", timeout=timedelta(seconds=10))
    x = torch.ones(4 if dist.get_rank() == 0 else 1000)
    dist.all_reduce(x)
    print(x.sum())


@fault("nccl_timeout", launcher="torchrun", nproc=2)
def gloo_allgather_uneven():
    """all_gather with a different tensor size on each rank."""
    torch = _torch()
    dist = _env_world("gloo", timeout=timedelta(seconds=10))
    n = 3 if dist.get_rank() == 0 else 5
    out = [torch.zeros(n) for _ in range(2)]
    dist.all_gather(out, torch.ones(n))
    print(out)


@fault("nccl_timeout", launcher="torchrun", nproc=2)
def gloo_rank_skips_collective_timeout():
    """Rank 1 never reaches the all_reduce; gloo's timeout of 5 s fires on rank 0."""
    import time
    torch = _torch()
    dist = _env_world("gloo", timeout=timedelta(seconds=5))
    if dist.get_rank() == 0:
        x = torch.ones(4)
        dist.all_reduce(x)
    else:
        time.sleep(12)


@fault("nccl_timeout", launcher="torchrun", nproc=2)
def monitored_barrier_rank_missing():
    """monitored_barrier names the rank that did not arrive."""
    import time
    dist = _env_world("gloo")
    if dist.get_rank() == 1:
        time.sleep(10)
    else:
        dist.monitored_barrier(timeout=timedelta(seconds=3))


@fault("nccl_timeout", timeout=60, env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"})
def nccl_watchdog_timeout():
    """An NCCL all_reduce queued behind a kernel that runs past the group's 5 s timeout: the watchdog fires."""
    torch = _torch()
    torch.cuda.set_device(0)
    dist = _world("nccl", timeout=timedelta(seconds=5), device_id=torch.device("cuda", 0))
    x = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(x)
    _sync()
    torch.cuda._sleep(int(3e10))
    dist.all_reduce(x)
    _sync()


@fault("nccl_timeout", launcher="torchrun", nproc=1, timeout=60,
       env={"TORCH_NCCL_DESYNC_DEBUG": "1", "TORCH_NCCL_TRACE_BUFFER_SIZE": "100"})
def nccl_timeout_desync_debug_torchrun():
    """The watchdog timeout under torchrun with desync debugging and the flight recorder on."""
    torch = _torch()
    torch.cuda.set_device(0)
    dist = _env_world("nccl", timeout=timedelta(seconds=5), device_id=torch.device("cuda", 0))
    x = torch.ones(1 << 20, device="cuda")
    dist.broadcast(x, src=0)
    _sync()
    torch.cuda._sleep(int(3e10))
    dist.all_gather_into_tensor(torch.empty(1 << 20, device="cuda"), x)
    _sync()


@fault("nccl_timeout", timeout=60, env={"TORCH_NCCL_BLOCKING_WAIT": "1"})
def nccl_blocking_wait_timeout():
    """TORCH_NCCL_BLOCKING_WAIT=1: the timeout is raised in the waiting thread."""
    torch = _torch()
    torch.cuda.set_device(0)
    dist = _world("nccl", timeout=timedelta(seconds=5), device_id=torch.device("cuda", 0))
    x = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(x)
    _sync()
    torch.cuda._sleep(int(3e10))
    work = dist.all_reduce(x, async_op=True)
    work.wait()


@fault("nccl_timeout", timeout=60)
def nccl_work_wait_timeout():
    """work.wait(timeout=...) on a collective that cannot finish in time."""
    torch = _torch()
    torch.cuda.set_device(0)
    dist = _world("nccl", device_id=torch.device("cuda", 0))
    x = torch.ones(1 << 20, device="cuda")
    torch.cuda._sleep(int(3e10))
    work = dist.all_reduce(x, async_op=True)
    work.wait(timeout=timedelta(seconds=3))
    _sync()


@fault("nccl_timeout", launcher="torchrun", nproc=2, timeout=60)
def gloo_p2p_recv_never_sent():
    """Rank 1 waits to receive what rank 0 never sends (a pipeline stage out of step)."""
    import time
    torch = _torch()
    dist = _env_world("gloo", timeout=timedelta(seconds=5))
    x = torch.zeros(16)
    if dist.get_rank() == 1:
        dist.recv(x, src=0)
    else:
        time.sleep(12)


@fault("nccl_timeout", launcher="torchrun", nproc=2)
def gloo_p2p_size_mismatch():
    """Rank 0 sends 8 floats, rank 1 receives 4 (pipeline stages disagree on a shape)."""
    torch = _torch()
    dist = _env_world("gloo", timeout=timedelta(seconds=10))
    if dist.get_rank() == 0:
        dist.send(torch.ones(8), dst=1)
    else:
        x = torch.zeros(4)
        dist.recv(x, src=0)
        print(x)


# ---- rendezvous ------------------------------------------------------------------------------------------------

@fault("rendezvous")
def store_client_connect_timeout():
    """A TCPStore client to a master that never starts."""
    from torch.distributed import TCPStore
    TCPStore("127.0.0.1", _port(), world_size=2, is_master=False, timeout=timedelta(seconds=3))


@fault("rendezvous")
def init_world_two_only_one_arrives():
    """init_process_group for world_size=2 when the other rank never starts."""
    _world("gloo", world_size=2, rank=0, timeout=timedelta(seconds=5))


@fault("rendezvous", launcher="child")
def master_port_in_use():
    """MASTER_PORT taken by a socket of ours when rank 0 starts its store."""
    import socket
    import subprocess
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    port = held.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
    done = subprocess.run([sys.executable, "-c", "import torch.distributed as d; d.init_process_group('gloo')"],
                          env=env, capture_output=True, text=True, timeout=60)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    sys.exit(done.returncode)


@fault("rendezvous")
def env_init_without_master_addr():
    """init_process_group('nccl') from env:// with no MASTER_ADDR (launched with python, not torchrun)."""
    import torch.distributed as dist
    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        os.environ.pop(name, None)
    os.environ["RANK"], os.environ["WORLD_SIZE"] = "0", "1"
    dist.init_process_group("nccl")


@fault("rendezvous", env={"MASTER_ADDR": "trainer-0.cluster.invalid", "MASTER_PORT": "29500", "RANK": "1",
                          "WORLD_SIZE": "2"})
def master_addr_unresolvable():
    """MASTER_ADDR is a host name that does not resolve."""
    import torch.distributed as dist
    dist.init_process_group("gloo", timeout=timedelta(seconds=8))


@fault("rendezvous", launcher="child", timeout=90)
def torchrun_rendezvous_timeout():
    """torchrun for two nodes (c10d rendezvous) when only one node starts."""
    import subprocess
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
                           "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:%d" % _port(), "--rdzv-id=job7",
                           "--rdzv-conf=join_timeout=8,read_timeout=8", "-m", "json.tool", "--help"],
                          capture_output=True, text=True, timeout=80)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    sys.exit(done.returncode)


@fault("rendezvous")
def ddp_without_process_group():
    """DistributedDataParallel built before init_process_group."""
    torch = _torch()
    model = torch.nn.Linear(8, 8).cuda()
    torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])


# ---- NCCL and transport errors ---------------------------------------------------------------------------------

@fault("nccl_network", env={"NCCL_SOCKET_IFNAME": "ib-fabric9", "NCCL_DEBUG": "WARN"})
def nccl_socket_ifname_missing():
    """NCCL_SOCKET_IFNAME names an interface this host does not have."""
    torch = _torch()
    torch.cuda.set_device(0)
    dist = _world("nccl", device_id=torch.device("cuda", 0))
    x = torch.ones(4, device="cuda")
    dist.all_reduce(x)
    _sync()


@fault("nccl_network", env={"NCCL_NET": "IB", "NCCL_DEBUG": "WARN"})
def nccl_net_ib_required_missing():
    """NCCL_NET=IB on a host without InfiniBand."""
    torch = _torch()
    torch.cuda.set_device(0)
    dist = _world("nccl", device_id=torch.device("cuda", 0))
    x = torch.ones(4, device="cuda")
    dist.all_reduce(x)
    _sync()


@fault("nccl_network", env={"GLOO_SOCKET_IFNAME": "ib-fabric9"})
def gloo_socket_ifname_missing():
    """GLOO_SOCKET_IFNAME names an interface this host does not have."""
    _world("gloo", timeout=timedelta(seconds=10))


@fault("nccl_network", launcher="child")
def nccl_two_ranks_one_gpu():
    """Two NCCL ranks on the same GPU (a wrong LOCAL_RANK to device mapping)."""
    import subprocess
    code = ("import os, torch, torch.distributed as d; torch.cuda.set_device(0); "
            "d.init_process_group('nccl', device_id=torch.device('cuda', 0)); x = torch.ones(4, device='cuda'); "
            "d.all_reduce(x); torch.cuda.synchronize(); print(x)")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_port()), WORLD_SIZE="2", NCCL_DEBUG="WARN")
    procs = [subprocess.Popen([sys.executable, "-c", code], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    rc = 0
    for rank, proc in enumerate(procs):
        try:
            out, _ = proc.communicate(timeout=50)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        sys.stdout.write("".join("[rank%d]: %s\n" % (rank, line) for line in out.splitlines()))
        rc = rc or proc.returncode
    sys.exit(rc)


@fault("nccl_network", env={"NCCL_DEBUG": "WARN", "NCCL_IB_DISABLE": "1", "NCCL_P2P_DISABLE": "1",
                            "NCCL_SHM_DISABLE": "1", "NCCL_NET": "Socket", "NCCL_SOCKET_IFNAME": "=lo9"})
def nccl_exact_ifname_missing():
    """Every transport disabled but sockets, and the exact socket interface named does not exist."""
    torch = _torch()
    torch.cuda.set_device(0)
    dist = _world("nccl", device_id=torch.device("cuda", 0))
    x = torch.ones(4, device="cuda")
    dist.all_reduce(x)
    _sync()


@fault("device_access")
def peer_access_missing_gpu():
    """Enabling peer access to a second GPU on a one-GPU host (P2P)."""
    torch = _torch()
    print("peer 0->1:", torch.cuda.can_device_access_peer(0, 1))


@fault("device_mismatch")
def nccl_all_reduce_cpu_tensor():
    """An NCCL process group given a CPU tensor."""
    torch = _torch()
    torch.cuda.set_device(0)
    dist = _world("nccl", device_id=torch.device("cuda", 0))
    x = torch.ones(4)
    dist.all_reduce(x)


# ---- device mismatches -----------------------------------------------------------------------------------------

@fault("device_mismatch")
def linear_input_on_cpu():
    """A CPU batch into a model on the GPU."""
    torch = _torch()
    model = torch.nn.Linear(16, 4).cuda()
    print(model(torch.randn(2, 16)))


@fault("device_mismatch")
def conv_input_on_cpu():
    """A CPU image batch into a convolution on the GPU."""
    torch = _torch()
    conv = torch.nn.Conv2d(3, 8, 3).cuda()
    print(conv(torch.randn(1, 3, 32, 32)).shape)


@fault("device_mismatch")
def tensor_created_in_forward_on_cpu():
    """A mask made with torch.ones inside forward, without device=."""
    torch = _torch()

    class Masked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x):
            mask = torch.tril(torch.ones(x.shape[1], x.shape[1]))
            return self.proj(x) * mask

    print(Masked().cuda()(torch.randn(8, 8, device="cuda")).sum())


@fault("device_mismatch")
def lstm_hidden_state_on_cpu():
    """An LSTM on the GPU given an initial hidden state made on the CPU."""
    torch = _torch()
    lstm = torch.nn.LSTM(10, 20, batch_first=True).cuda()
    h0 = (torch.zeros(1, 3, 20), torch.zeros(1, 3, 20))
    print(lstm(torch.randn(3, 5, 10, device="cuda"), h0)[0].shape)


@fault("device_mismatch")
def index_with_cuda_indices_on_cpu_tensor():
    """A CPU tensor indexed with indices on the GPU."""
    torch = _torch()
    table = torch.randn(100, 4)
    idx = torch.tensor([1, 2, 3], device="cuda")
    print(table[idx])


@fault("device_mismatch")
def numpy_of_cuda_tensor():
    """.numpy() on a tensor on the GPU (a metric computed with numpy)."""
    torch = _torch()
    pred = torch.randn(10, device="cuda")
    import numpy
    print(numpy.mean(pred.numpy()))


@fault("device_mismatch")
def generator_on_other_device():
    """A CPU generator passed to a random op on the GPU."""
    torch = _torch()
    gen = torch.Generator().manual_seed(1)
    print(torch.randn(4, device="cuda", generator=gen))


@fault("device_mismatch")
def ddp_module_on_cpu_with_device_ids():
    """DDP with device_ids=[0] for a module still on the CPU."""
    torch = _torch()
    _world("gloo")
    model = torch.nn.Linear(8, 8)
    torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])


@fault("device_mismatch")
def optimizer_state_on_cpu_for_gpu_params():
    """Adam's state moved to the CPU (to save memory), then a step on the GPU (fused Adam)."""
    torch = _torch()
    model = torch.nn.Linear(8, 8).cuda()
    opt = torch.optim.Adam(model.parameters(), fused=True)
    model(torch.randn(2, 8, device="cuda")).sum().backward()
    opt.step()
    for state in opt.state.values():
        for key, value in state.items():
            if torch.is_tensor(value):
                state[key] = value.cpu()
    model(torch.randn(2, 8, device="cuda")).sum().backward()
    opt.step()


@fault("device_mismatch")
def pin_memory_of_cuda_tensors():
    """A DataLoader with pin_memory=True over a dataset that already returns GPU tensors."""
    torch = _torch()
    data = torch.utils.data.TensorDataset(torch.randn(16, 4, device="cuda"))
    loader = torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True)
    for (batch,) in loader:
        print(batch.shape)


@fault("device_mismatch")
def loss_target_on_cpu():
    """cross_entropy with predictions on the GPU and targets on the CPU."""
    torch = _torch()
    logits = torch.randn(4, 3, device="cuda")
    target = torch.tensor([0, 1, 2, 1])
    print(torch.nn.functional.cross_entropy(logits, target))


# ---- checkpoints onto a missing GPU ----------------------------------------------------------------------------

def _checkpoint_on(path, device_text):
    """A checkpoint saved on cuda:0, its storages' location rewritten to another GPU (as if saved on rank 3)."""
    import zipfile
    torch = _torch()
    torch.save({"model": torch.nn.Linear(4, 4).cuda().state_dict(), "step": 10}, path)
    with zipfile.ZipFile(path) as src:
        items = [(info, src.read(info.filename)) for info in src.infolist()]
    with zipfile.ZipFile(path, "w") as dst:
        for info, data in items:
            if info.filename.endswith("data.pkl"):
                data = data.replace(b"cuda:0", device_text.encode())
            dst.writestr(info, data)


@fault("checkpoint_device")
def load_checkpoint_saved_on_missing_gpu():
    """torch.load of a checkpoint saved on cuda:3 on a one-GPU host."""
    import tempfile
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    _checkpoint_on(path, "cuda:3")
    state = torch.load(path)
    print(state["step"])


@fault("checkpoint_device", launcher="child")
def load_gpu_checkpoint_without_cuda():
    """torch.load of a GPU checkpoint in a process that sees no GPU (CUDA_VISIBLE_DEVICES='')."""
    import subprocess
    import tempfile
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    _checkpoint_on(path, "cuda:0")
    done = subprocess.run([sys.executable, "-c", "import torch; s = torch.load(%r); print(s['step'])" % path],
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES=""), capture_output=True, text=True, timeout=60)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    sys.exit(done.returncode)


@fault("checkpoint_device")
def load_checkpoint_map_location_to_missing_gpu():
    """map_location naming a GPU the host does not have (cuda:LOCAL_RANK with a rank past the GPUs)."""
    import tempfile
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    _checkpoint_on(path, "cuda:0")
    state = torch.load(path, map_location="cuda:2")
    print(state["step"])


@fault("checkpoint_device")
def load_state_dict_device_dict_map():
    """map_location as a dict that maps cuda:1 to cuda:0 while the checkpoint says cuda:3."""
    import tempfile
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    _checkpoint_on(path, "cuda:3")
    state = torch.load(path, map_location={"cuda:1": "cuda:0"}, weights_only=True)
    print(state["step"])


# ---- CUDA in a forked DataLoader worker -------------------------------------------------------------------------

class _GpuDataset:
    """A dataset whose __getitem__ moves each item to the GPU (the mistake)."""

    def __len__(self):
        return 64

    def __getitem__(self, i):
        torch = _torch()
        return torch.full((4,), float(i)).cuda()


@fault("cuda_fork")
def dataloader_worker_uses_cuda_after_fork():
    """DataLoader(num_workers=2) with the default fork start, CUDA initialised in the parent, used in __getitem__."""
    torch = _torch()
    model = torch.nn.Linear(4, 1).cuda()
    loader = torch.utils.data.DataLoader(_GpuDataset(), batch_size=8, num_workers=2)
    for batch in loader:
        print(model(batch).sum().item())


@fault("cuda_fork")
def multiprocessing_fork_after_cuda():
    """A worker process forked after CUDA was initialised uses CUDA."""
    import multiprocessing
    torch = _torch()
    torch.zeros(1, device="cuda")
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        print(pool.map(_cuda_square, [3]))


def _cuda_square(x):
    torch = _torch()
    return (torch.tensor(float(x), device="cuda") ** 2).item()


@fault("cuda_fork")
def dataloader_collate_moves_to_cuda():
    """A collate_fn that moves each batch to the GPU, in forked workers."""
    torch = _torch()
    torch.cuda.init()
    data = torch.utils.data.TensorDataset(torch.randn(32, 4))

    def collate(items):
        return torch.stack([x for (x,) in items]).to("cuda", non_blocking=True)

    loader = torch.utils.data.DataLoader(data, batch_size=8, num_workers=2, collate_fn=collate)
    print(sum(b.sum().item() for b in loader))


# ---- DDP and unused parameters ---------------------------------------------------------------------------------

class _Branchy:
    @staticmethod
    def model():
        torch = _torch()

        class Branchy(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.trunk = torch.nn.Linear(16, 16)
                self.head_a = torch.nn.Linear(16, 4)
                self.head_b = torch.nn.Linear(16, 4)

            def forward(self, x):
                return self.head_a(torch.relu(self.trunk(x)))  # head_b never used

        return Branchy()


def _ddp_steps(model, steps=3):
    torch = _torch()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(8, 16, device="cuda")).sum().backward()
        opt.step()


@fault("ddp_unused_parameters", launcher="torchrun", nproc=1)
def ddp_unused_parameter_second_iteration():
    """A head that forward never uses, DDP without find_unused_parameters (NCCL, one rank)."""
    torch = _torch()
    torch.cuda.set_device(0)
    _env_world("nccl")
    model = torch.nn.parallel.DistributedDataParallel(_Branchy.model().cuda(), device_ids=[0])
    _ddp_steps(model)


@fault("ddp_unused_parameters", launcher="torchrun", nproc=1, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
def ddp_unused_parameter_debug_detail():
    """The same with TORCH_DISTRIBUTED_DEBUG=DETAIL: the parameters are named."""
    torch = _torch()
    torch.cuda.set_device(0)
    _env_world("nccl")
    model = torch.nn.parallel.DistributedDataParallel(_Branchy.model().cuda(), device_ids=[0])
    _ddp_steps(model)


@fault("ddp_unused_parameters", launcher="torchrun", nproc=1)
def ddp_parameter_marked_ready_twice():
    """Reentrant activation checkpointing inside DDP with find_unused_parameters=True."""
    torch = _torch()
    import torch.utils.checkpoint as checkpoint
    torch.cuda.set_device(0)
    _env_world("nccl")

    class Checkpointed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = torch.nn.Linear(16, 16)

        def forward(self, x):
            x = checkpoint.checkpoint(self.block, x, use_reentrant=True)
            return checkpoint.checkpoint(self.block, x, use_reentrant=True)

    model = torch.nn.parallel.DistributedDataParallel(Checkpointed().cuda(), device_ids=[0],
                                                      find_unused_parameters=True)
    _ddp_steps(model)


@fault("ddp_unused_parameters", launcher="torchrun", nproc=1)
def ddp_find_unused_parameters_none_found():
    """find_unused_parameters=True on a model that uses every parameter: DDP's warning."""
    torch = _torch()
    torch.cuda.set_device(0)
    _env_world("nccl")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 16).cuda(), device_ids=[0],
                                                      find_unused_parameters=True)
    _ddp_steps(model)


@fault("ddp_unused_parameters", launcher="torchrun", nproc=1)
def ddp_no_parameter_requires_grad():
    """DDP around a frozen model (every parameter requires_grad=False)."""
    torch = _torch()
    torch.cuda.set_device(0)
    _env_world("nccl")
    frozen = torch.nn.Linear(16, 16).cuda().requires_grad_(False)
    torch.nn.parallel.DistributedDataParallel(frozen, device_ids=[0])


@fault("ddp_unused_parameters", launcher="torchrun", nproc=1)
def ddp_static_graph_changes():
    """static_graph=True on a model whose used parameters change between iterations."""
    torch = _torch()
    torch.cuda.set_device(0)
    _env_world("nccl")

    class Switch(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return self.a(x) if self.calls % 2 else self.b(x)

    model = torch.nn.parallel.DistributedDataParallel(Switch().cuda(), device_ids=[0], static_graph=True)
    _ddp_steps(model, steps=4)


# ---- cuBLAS / cuDNN / cuFFT status errors ----------------------------------------------------------------------

@fault("cublas_cudnn")
def cublas_invalid_value_cupy():
    """A cuBLAS GEMM called with a leading dimension smaller than the matrix (CuPy's cuBLAS binding)."""
    import cupy
    from cupy_backends.cuda.libs import cublas
    handle = cupy.cuda.device.get_cublas_handle()
    a = cupy.ones((64, 64), dtype=cupy.float32)
    c = cupy.zeros((64, 64), dtype=cupy.float32)
    one = numpy_float(1.0)
    zero = numpy_float(0.0)
    cublas.sgemm(handle, 0, 0, 64, 64, 64, one.ctypes.data, a.data.ptr, 16, a.data.ptr, 64, zero.ctypes.data,
                 c.data.ptr, 64)
    cupy.cuda.runtime.deviceSynchronize()


def numpy_float(value):
    import numpy
    return numpy.array(value, dtype=numpy.float32)


@fault("cublas_cudnn")
def cublas_not_supported_fp8_layout():
    """torch._scaled_mm (fp8 through cuBLASLt) with a layout cuBLASLt does not take."""
    torch = _torch()
    a = torch.randn(64, 32, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(32, 48, device="cuda").to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device="cuda")
    print(torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16).shape)


@fault("cublas_cudnn")
def cudnn_conv_batch_too_large():
    """A convolution over a batch whose size cuDNN cannot index (over 2**31 elements per call)."""
    torch = _torch()
    conv = torch.nn.Conv3d(1, 1, 3, padding=1).cuda().half()
    x = torch.randn(1, 1, 1300, 1300, 1300, device="cuda", dtype=torch.float16)
    print(conv(x).shape)


@fault("cublas_cudnn")
def cudnn_rnn_non_contiguous_weights():
    """cuDNN LSTM on weights made non-contiguous (flatten_parameters never called after a change)."""
    torch = _torch()
    lstm = torch.nn.LSTM(32, 64, num_layers=2).cuda()
    with torch.no_grad():
        lstm.weight_hh_l0.set_(lstm.weight_hh_l0.t().contiguous().t())
    out, _ = lstm(torch.randn(10, 4, 32, device="cuda"))
    print(out.sum().item())


@fault("cublas_cudnn")
def cufft_plan_too_large():
    """A cuFFT plan larger than cuFFT can make."""
    torch = _torch()
    x = torch.randn(3, 2 ** 31 + 11, device="cuda", dtype=torch.float16)
    print(torch.fft.rfft(x).shape)


@fault("cublas_cudnn", env={"CUDNN_LOGERR_DBG": "1", "CUDNN_LOGDEST_DBG": "stderr"})
def cudnn_conv_bad_param_grouped():
    """A grouped transposed convolution with a channel count cuDNN cannot split, cuDNN's error log on."""
    torch = _torch()
    torch.backends.cudnn.benchmark = True
    conv = torch.nn.ConvTranspose2d(6, 9, 3, groups=3).cuda()
    x = torch.randn(2, 6, 16, 16, device="cuda").to(memory_format=torch.channels_last)
    y = conv(x)
    y.sum().backward()
    print(y.shape)


@fault("cublas_cudnn")
def cublas_batched_gemm_huge_batch():
    """bmm over more matrices than cuBLAS's grid allows in one call, fp16."""
    torch = _torch()
    a = torch.randn(2 ** 22, 2, 2, device="cuda", dtype=torch.float16)
    print(torch.bmm(a, a).sum().item())


# ---- deterministic algorithms ---------------------------------------------------------------------------------

@fault("deterministic_algorithms")
def deterministic_index_add():
    """index_add_ on the GPU under torch.use_deterministic_algorithms(True)."""
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    out = torch.zeros(10, device="cuda")
    out.index_add_(0, torch.tensor([1, 1, 2], device="cuda"), torch.ones(3, device="cuda"))
    print(out)


@fault("deterministic_algorithms")
def deterministic_upsample_backward():
    """Backward of bilinear upsampling on the GPU under deterministic algorithms."""
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    x = torch.randn(1, 3, 16, 16, device="cuda", requires_grad=True)
    torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear").sum().backward()


@fault("deterministic_algorithms")
def deterministic_cublas_without_workspace_config():
    """A matmul under deterministic algorithms without CUBLAS_WORKSPACE_CONFIG."""
    os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    a = torch.randn(32, 32, device="cuda")
    print((a @ a).sum().item())


@fault("deterministic_algorithms")
def deterministic_warn_only_histc():
    """torch.histc on the GPU with use_deterministic_algorithms(True, warn_only=True): a warning."""
    torch = _torch()
    torch.use_deterministic_algorithms(True, warn_only=True)
    print(torch.histc(torch.randn(1000, device="cuda"), bins=10))


@fault("deterministic_algorithms")
def deterministic_ctc_loss_backward():
    """CTC loss backward on the GPU (speech models) under deterministic algorithms."""
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    log_probs = torch.randn(50, 4, 20, device="cuda").log_softmax(2).detach().requires_grad_()
    targets = torch.randint(1, 20, (4, 30), device="cuda", dtype=torch.long)
    loss = torch.nn.functional.ctc_loss(log_probs, targets, torch.full((4,), 50, dtype=torch.long),
                                        torch.full((4,), 30, dtype=torch.long))
    loss.backward()


@fault("deterministic_algorithms")
def deterministic_scatter_reduce_and_cudnn_flag():
    """cudnn.deterministic set, and use_deterministic_algorithms: scatter_reduce on the GPU refused."""
    torch = _torch()
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    src = torch.randn(6, device="cuda")
    out = torch.zeros(3, device="cuda").scatter_reduce(0, torch.tensor([0, 1, 1, 2, 2, 0], device="cuda"), src,
                                                          reduce="amax")
    print(out)


# ---- performance advice the stack prints ---------------------------------------------------------------------

@fault("performance")
def sync_debug_mode_error_on_item():
    """torch.cuda.set_sync_debug_mode('error'): a .item() in the loop synchronises."""
    torch = _torch()
    torch.cuda.set_sync_debug_mode("error")
    loss = torch.randn(4, device="cuda").sum()
    print(loss.item())


@fault("performance")
def tf32_advice_warning():
    """fp32 matmuls with the default precision: PyTorch's TF32 advice (Lightning prints it too)."""
    torch = _torch()
    import lightning
    model = lightning.pytorch.demos.boring_classes.BoringModel()
    trainer = lightning.Trainer(max_steps=2, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model)
    print(torch.get_float32_matmul_precision())


# ---- batch b: written after the first blind measurement, run once for a second blind holdout ------------------

class _CudaAttributeDataset:
    """A dataset that keeps its data on the GPU and indexes it in __getitem__."""

    def __init__(self):
        self.data = _torch().randn(64, 4, device="cuda")

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return self.data[i] * 2


@fault("cuda_fork", batch="b", timeout=30)
def dataloader_dataset_holds_cuda_tensor():
    """A dataset holding a GPU tensor, indexed in forked DataLoader workers."""
    torch = _torch()
    loader = torch.utils.data.DataLoader(_CudaAttributeDataset(), batch_size=16, num_workers=2)
    print(sum(batch.sum().item() for batch in loader))


def _gpu_norm(x):
    torch = _torch()
    return torch.linalg.norm(torch.full((8,), float(x), device="cuda")).item()


@fault("cuda_fork", batch="b", timeout=30)
def process_pool_executor_fork_after_cuda():
    """concurrent.futures.ProcessPoolExecutor (fork) evaluating on the GPU after the parent initialised CUDA."""
    import concurrent.futures
    import multiprocessing
    torch = _torch()
    torch.cuda.synchronize()
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        print(list(pool.map(_gpu_norm, [1, 2, 3])))


@fault("rendezvous", batch="b", timeout=30)
def init_process_group_twice():
    """A library calls init_process_group after the training script already did."""
    _world("gloo")
    _world("gloo")


@fault("rendezvous", batch="b", timeout=30)
def rank_outside_world_size():
    """RANK=2 for WORLD_SIZE=2 (an off-by-one in a launcher script)."""
    _world("gloo", world_size=2, rank=2, timeout=timedelta(seconds=5))


@fault("rendezvous", batch="b", timeout=30, env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "95000", "RANK": "0",
                                                  "WORLD_SIZE": "1"})
def master_port_out_of_range():
    """MASTER_PORT beyond 65535 (a job id pasted into the port)."""
    import torch.distributed as dist
    dist.init_process_group("gloo")


@fault("performance", batch="b", timeout=35)
def lightning_tensor_core_advice():
    """Lightning's advice on a GPU with Tensor Cores and fp32 matmuls at full precision."""
    import lightning.pytorch as pl
    from lightning.pytorch.demos.boring_classes import BoringModel
    trainer = pl.Trainer(max_steps=2, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(BoringModel())


@fault("performance", batch="b", timeout=40)
def dataloader_more_workers_than_cpus():
    """A DataLoader asking for more workers than the host has CPUs."""
    torch = _torch()
    data = torch.utils.data.TensorDataset(torch.randn(256, 4))
    loader = torch.utils.data.DataLoader(data, batch_size=8, num_workers=(os.cpu_count() or 8) * 2)
    print(next(iter(loader))[0].shape)


@fault("amp_numerics", batch="b", timeout=30)
def autocast_dtype_not_supported():
    """torch.autocast on CUDA asked for float32 (autocast is switched off, the step runs in fp32)."""
    torch = _torch()
    model = torch.nn.Linear(64, 64).cuda()
    with torch.autocast("cuda", dtype=torch.float32):
        out = model(torch.randn(8, 64, device="cuda"))
    print(out.dtype)


@fault("amp_numerics", batch="b", timeout=30)
def custom_function_nan_gradient_anomaly():
    """A custom autograd.Function whose backward divides by zero, found by anomaly mode."""
    torch = _torch()

    class SafeLog(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.log1p(x.clamp(min=0))

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 0 / (x - x)

    torch.autograd.set_detect_anomaly(True)
    x = torch.rand(16, device="cuda", requires_grad=True)
    SafeLog.apply(x).sum().backward()


@fault("amp_numerics", batch="b", timeout=30)
def grad_scaler_no_inf_checks():
    """scaler.step on an optimizer whose parameters got no gradient from the scaled loss."""
    torch = _torch()
    used, unused = torch.nn.Linear(8, 8).cuda(), torch.nn.Linear(8, 8).cuda()
    opt = torch.optim.SGD(unused.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = used(torch.randn(4, 8, device="cuda")).float().mean()
    scaler.scale(loss).backward()
    scaler.step(opt)


@fault("device_mismatch", batch="b", timeout=30)
def torch_where_mixed_devices():
    """torch.where with the condition on the GPU and the values on the CPU."""
    torch = _torch()
    cond = torch.rand(8, device="cuda") > 0.5
    print(torch.where(cond, torch.ones(8), torch.zeros(8)))


@fault("device_mismatch", batch="b", timeout=30)
def embedding_indices_on_cpu():
    """Token ids left on the CPU for an embedding on the GPU."""
    torch = _torch()
    emb = torch.nn.Embedding(100, 16).cuda()
    print(emb(torch.tensor([[1, 2, 3]])).shape)


@fault("device_access", batch="b", timeout=40)
def init_process_group_device_id_missing_gpu():
    """init_process_group(device_id=cuda:3) on a one-GPU host (a rank-to-GPU map for eight GPUs)."""
    torch = _torch()
    _world("nccl", device_id=torch.device("cuda", 3))


@fault("device_access", batch="b", timeout=30, env={"CUDA_VISIBLE_DEVICES": "0,0"})
def cuda_visible_devices_repeated():
    """CUDA_VISIBLE_DEVICES naming the same GPU twice, then the second used."""
    torch = _torch()
    print("devices:", torch.cuda.device_count())
    print(torch.ones(2, device="cuda:1"))


@fault("checkpoint_device", batch="b", timeout=30)
def safetensors_load_to_missing_gpu():
    """safetensors.torch.load_file(device='cuda:3') on a one-GPU host."""
    import tempfile
    from safetensors.torch import load_file, save_file
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    save_file({"weight": torch.randn(4, 4)}, path)
    print(load_file(path, device="cuda:3").keys())


@fault("checkpoint_device", batch="b", timeout=30)
def load_checkpoint_map_location_callable():
    """map_location as a function putting every storage on cuda:3."""
    import tempfile
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    _checkpoint_on(path, "cuda:0")
    state = torch.load(path, map_location=lambda storage, location: storage.cuda(3))
    print(state["step"])


@fault("checkpoint_device", batch="b", timeout=30)
def load_checkpoint_mmap_saved_on_missing_gpu():
    """torch.load(mmap=True) of a checkpoint saved on cuda:5."""
    import tempfile
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    _checkpoint_on(path, "cuda:5")
    state = torch.load(path, mmap=True, weights_only=True)
    print(state["step"])


@fault("cublas_cudnn", batch="b", timeout=30)
def sdpa_cudnn_attention_unsupported():
    """scaled_dot_product_attention forced to cuDNN attention with a head size it does not take."""
    torch = _torch()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q = torch.randn(2, 4, 128, 320, device="cuda", dtype=torch.float16)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        print(torch.nn.functional.scaled_dot_product_attention(q, q, q).shape)


@fault("cublas_cudnn", batch="b", timeout=30)
def cufft_plan_invalid_size_cupy():
    """A cuFFT plan of size 0 (CuPy's cuFFT binding)."""
    import cupy
    from cupy.cuda import cufft
    plan = cufft.Plan1d(0, cufft.CUFFT_C2C, 1)
    print(plan, cupy.__version__)


@fault("deterministic_algorithms", batch="b", timeout=30)
def deterministic_debug_mode_grid_sample_backward():
    """torch.set_deterministic_debug_mode('error') and grid_sample's backward on the GPU."""
    torch = _torch()
    torch.set_deterministic_debug_mode("error")
    x = torch.randn(1, 3, 8, 8, device="cuda", requires_grad=True)
    grid = torch.rand(1, 4, 4, 2, device="cuda") * 2 - 1
    torch.nn.functional.grid_sample(x, grid, align_corners=False).sum().backward()


@fault("nccl_network", batch="b", timeout=25, env={"NCCL_COMM_ID": "203.0.113.7:9", "NCCL_DEBUG": "WARN"})
def nccl_comm_id_unreachable():
    """NCCL_COMM_ID points the bootstrap at a root that cannot be reached."""
    torch = _torch()
    torch.cuda.set_device(0)
    dist = _world("nccl", device_id=torch.device("cuda", 0))
    x = torch.ones(4, device="cuda")
    dist.all_reduce(x)
    _sync()


@fault("ddp_unused_parameters", batch="b", timeout=40)
def ddp_unused_head_gloo_single_process():
    """A two-head model whose second head is not in the loss, DDP over gloo in a plain python process."""
    torch = _torch()
    _world("gloo")
    model = torch.nn.parallel.DistributedDataParallel(_Branchy.model().cuda())
    _ddp_steps(model, steps=2)


# ---- batch c: written for a third blind holdout (holdout-gpu-c), categories set before it ran -----------------

def _relay(done):
    """Print what a child printed and leave with its exit status."""
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    sys.exit(done.returncode)


def _child(code, env=None, timeout=60):
    import subprocess
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **(env or {})), capture_output=True,
                          text=True, timeout=timeout)


def _torchrun_child(args, timeout=60):
    import subprocess
    return subprocess.run([sys.executable, "-m", "torch.distributed.run"] + args, capture_output=True, text=True,
                          timeout=timeout)


@fault("illegal_access", batch="c", timeout=25)
def index_select_out_of_range():
    """torch.index_select on the GPU with a row index past the table (a stale vocabulary map)."""
    torch = _torch()
    table = torch.randn(100, 8, device="cuda")
    rows = torch.tensor([1, 5, 150], device="cuda")
    print(torch.index_select(table, 0, rows).sum().item())


@fault("illegal_access", batch="c", timeout=25)
def embedding_bag_index_out_of_range():
    """An EmbeddingBag (a recommender's sparse features) given an id past its table."""
    torch = _torch()
    bag = torch.nn.EmbeddingBag(1000, 32, mode="sum").cuda()
    ids = torch.tensor([1, 2, 1 << 33, 5], device="cuda")  # far past the table: no read lands in our own memory
    offsets = torch.tensor([0, 2], device="cuda")
    print(bag(ids, offsets).sum().item())


@fault("illegal_access", batch="c", timeout=25)
def max_unpool_indices_from_other_layer():
    """max_unpool2d given the indices of a pooling over a larger map (a decoder wired to the wrong encoder stage)."""
    torch = _torch()
    big = torch.randn(1, 1, 16, 16, device="cuda")
    _, indices = torch.nn.functional.max_pool2d(big, 2, return_indices=True)
    small = torch.randn(1, 1, 4, 4, device="cuda")
    pooled, _ = torch.nn.functional.max_pool2d(small, 2, return_indices=True)
    print(torch.nn.functional.max_unpool2d(pooled, indices[..., :2, :2], 2).sum().item())


@fault("illegal_access", batch="c", timeout=60)
def triton_kernel_store_out_of_bounds():
    """A Triton kernel storing at an offset far past its output (no mask on the offset)."""
    import triton
    import triton.language as tl
    torch = _torch()

    @triton.jit
    def shift(x, out, n, offset, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out + offs + offset, tl.load(x + offs, mask=mask), mask=mask)

    x = torch.randn(1024, device="cuda")
    out = torch.empty_like(x)
    shift[(1,)](x, out, 1024, 1 << 36, BLOCK=1024)
    print(out.sum().item())


@fault("illegal_access", batch="c", timeout=90, env={"TORCHINDUCTOR_COMPILE_THREADS": "1"})
def compiled_embedding_index_out_of_range():
    """An embedding inside torch.compile (inductor's own bounds assert) given an id past the vocabulary."""
    torch = _torch()
    emb = torch.nn.Embedding(1000, 64).cuda()

    @torch.compile
    def scaled(ids):
        return emb(ids) * 2.0

    print(scaled(torch.tensor([[3, 17, 1000]], device="cuda")).sum().item())


@fault("device_access", batch="c", timeout=25, env={"CUDA_VISIBLE_DEVICES": ""})
def nccl_backend_without_visible_gpu():
    """init_process_group('nccl') in a process that sees no GPU (CUDA_VISIBLE_DEVICES emptied by a wrapper)."""
    _world("nccl", timeout=timedelta(seconds=10))


@fault("device_access", batch="c", timeout=45)
def lightning_more_devices_than_gpus():
    """A Lightning Trainer asking for two GPUs on a host where one is visible."""
    import lightning.pytorch as pl
    pl.Trainer(accelerator="gpu", devices=2, logger=False, enable_checkpointing=False, enable_progress_bar=False)


@fault("device_access", batch="c", timeout=25)
def cuda_stream_on_missing_gpu():
    """A side stream made for cuda:2 (a copy engine per local rank) on a one-GPU host."""
    torch = _torch()
    torch.zeros(1, device="cuda")
    stream = torch.cuda.Stream(device="cuda:2")
    print(stream)


@fault("device_mismatch", batch="c", timeout=25)
def cat_cpu_token_with_gpu_features():
    """A class token made on the CPU concatenated to patch features on the GPU."""
    torch = _torch()
    patches = torch.randn(4, 16, 32, device="cuda")
    cls_token = torch.zeros(4, 1, 32)
    print(torch.cat([cls_token, patches], dim=1).shape)


@fault("device_mismatch", batch="c", timeout=25)
def lstm_input_on_cpu():
    """A sequence batch left on the CPU for an LSTM on the GPU."""
    torch = _torch()
    lstm = torch.nn.LSTM(10, 20, batch_first=True).cuda()
    print(lstm(torch.randn(3, 5, 10))[0].shape)


@fault("device_mismatch", batch="c", timeout=25)
def pack_padded_sequence_lengths_on_gpu():
    """pack_padded_sequence given its lengths on the GPU (moved there with the batch)."""
    torch = _torch()
    batch = torch.randn(3, 7, 10, device="cuda")
    lengths = torch.tensor([7, 5, 2], device="cuda")
    packed = torch.nn.utils.rnn.pack_padded_sequence(batch, lengths, batch_first=True)
    print(packed.data.shape)


@fault("device_mismatch", batch="c", timeout=25)
def cross_entropy_class_weights_on_cpu():
    """CrossEntropyLoss built with class weights on the CPU (the criterion never moved), used on GPU logits."""
    torch = _torch()
    criterion = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 5.0, 0.5]))
    logits = torch.randn(8, 3, device="cuda")
    target = torch.randint(0, 3, (8,), device="cuda")
    print(criterion(logits, target).item())


@fault("device_mismatch", batch="c", timeout=25)
def unregistered_tensor_attribute_matmul():
    """A rotation kept as a plain tensor attribute (not a buffer), so model.cuda() left it on the CPU."""
    torch = _torch()

    class Rotate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(16, 16)
            self.rotation = torch.linalg.qr(torch.randn(16, 16))[0]

        def forward(self, x):
            return torch.mm(self.proj(x), self.rotation)

    print(Rotate().cuda()(torch.randn(4, 16, device="cuda")).sum().item())


@fault("device_mismatch", batch="c", timeout=90)
def compiled_function_mixed_devices():
    """A torch.compile'd step given one tensor on the GPU and one on the CPU (found while tracing)."""
    torch = _torch()

    @torch.compile
    def blend(features, bias):
        return torch.relu(features + bias)

    print(blend(torch.randn(4, 8, device="cuda"), torch.randn(4, 8)).sum().item())


@fault("cuda_fork", batch="c", timeout=25)
def os_fork_child_uses_cuda():
    """os.fork() after CUDA started (a checkpoint writer forked off the trainer), the child touching the GPU."""
    import traceback
    torch = _torch()
    weights = torch.randn(64, device="cuda")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            print("child: saving", weights.cpu().sum().item())
            os._exit(0)
        except Exception:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))


def _consume_tensor(queue):
    tensor = queue.get(timeout=20)
    print("consumer got", tensor.sum().item())


@fault("cuda_fork", batch="c", timeout=40)
def fork_queue_receives_cuda_tensor():
    """torch.multiprocessing with the fork context: a worker receives a GPU tensor through a Queue."""
    import torch.multiprocessing as mp
    torch = _torch()
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    torch.zeros(1, device="cuda")
    worker = ctx.Process(target=_consume_tensor, args=(queue,))
    worker.start()
    batch = torch.ones(16, device="cuda")
    queue.put(batch)
    worker.join(30)
    sys.exit(worker.exitcode if worker.exitcode is not None else 1)


@fault("cuda_fork", batch="c", timeout=25)
def dataloader_worker_init_sets_cuda_device():
    """A worker_init_fn that calls torch.cuda.set_device in each forked DataLoader worker."""
    torch = _torch()
    model = torch.nn.Linear(4, 1).cuda()

    def init_worker(worker_id):
        torch.cuda.set_device(0)

    data = torch.utils.data.TensorDataset(torch.randn(32, 4))
    loader = torch.utils.data.DataLoader(data, batch_size=8, num_workers=2, worker_init_fn=init_worker)
    for (batch,) in loader:
        print(model(batch.cuda()).sum().item())


@fault("ddp_unused_parameters", batch="c", timeout=40)
def ddp_parameter_used_outside_forward():
    """find_unused_parameters=True and a head called through model.module in the loss, outside DDP's forward."""
    torch = _torch()
    _world("gloo")
    model = torch.nn.parallel.DistributedDataParallel(_Branchy.model().cuda(), find_unused_parameters=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        x = torch.randn(8, 16, device="cuda")
        auxiliary = model.module.head_b(torch.relu(model.module.trunk(x)))
        (model(x).sum() + auxiliary.pow(2).mean()).backward()
        opt.step()


@fault("ddp_unused_parameters", batch="c", timeout=40)
def ddp_reentrant_checkpoint_reused_block():
    """One block checkpointed twice with reentrant checkpointing, DDP with find_unused_parameters=True."""
    torch = _torch()
    import torch.utils.checkpoint as checkpoint
    _world("gloo")

    class Shared(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Linear(16, 16)
            self.block = torch.nn.Linear(16, 16)

        def forward(self, x):
            x = self.embed(x)
            x = checkpoint.checkpoint(self.block, x, use_reentrant=True)
            return checkpoint.checkpoint(self.block, x, use_reentrant=True)

    model = torch.nn.parallel.DistributedDataParallel(Shared().cuda(), find_unused_parameters=True)
    _ddp_steps(model, steps=2)


@fault("amp_numerics", batch="c", timeout=25)
def anomaly_mode_acos_margin_above_one():
    """An angular-margin loss adding the margin to the cosine before acos: cos + m > 1 is NaN (anomaly mode)."""
    torch = _torch()
    torch.manual_seed(0)
    torch.autograd.set_detect_anomaly(True)
    features = torch.randn(8, 32, device="cuda", requires_grad=True)
    centres = features.detach() + 0.01 * torch.randn(8, 32, device="cuda")
    cosine = torch.nn.functional.cosine_similarity(features, centres, dim=-1)
    theta = torch.acos(cosine + 0.1)
    theta.mean().backward()


@fault("amp_numerics", batch="c", timeout=25)
def anomaly_mode_masked_mean_empty_mask():
    """A masked mean over a batch with no valid token: 0/0 in forward, NaN in backward (anomaly mode)."""
    torch = _torch()
    with torch.autograd.detect_anomaly():
        pred = torch.randn(4, 10, device="cuda", requires_grad=True)
        mask = torch.zeros(4, 10, device="cuda")
        loss = (pred * mask).sum() / mask.sum()
        loss.backward()


@fault("amp_numerics", batch="c", timeout=25)
def anomaly_mode_softmax_fully_masked_row():
    """Attention where one query has every key masked (-inf everywhere): softmax gives NaN (anomaly mode)."""
    torch = _torch()
    torch.autograd.set_detect_anomaly(True)
    q = torch.randn(6, 16, device="cuda", requires_grad=True)
    k = torch.randn(6, 16, device="cuda")
    v = torch.randn(6, 16, device="cuda")
    allowed = torch.ones(6, 6, dtype=torch.bool, device="cuda")
    allowed[2] = False  # a padded query row
    scores = (q @ k.T).masked_fill(~allowed, float("-inf"))
    (scores.softmax(-1) @ v).sum().backward()


def _scaled_step():
    torch = _torch()
    model = torch.nn.Linear(16, 16).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(torch.randn(4, 16, device="cuda")).float().mean()
    scaler.scale(loss).backward()
    return model, opt, scaler


@fault("amp_numerics", batch="c", timeout=25)
def grad_scaler_step_twice():
    """scaler.step called twice before scaler.update (a second optimizer loop over the same optimizer)."""
    _, opt, scaler = _scaled_step()
    scaler.step(opt)
    scaler.step(opt)
    scaler.update()


@fault("amp_numerics", batch="c", timeout=25)
def grad_scaler_unscale_after_step():
    """scaler.unscale_ after scaler.step in the same iteration (clipping moved below the step)."""
    torch = _torch()
    model, opt, scaler = _scaled_step()
    scaler.step(opt)
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)


@fault("amp_numerics", batch="c", timeout=25)
def grad_scaler_update_scale_on_cpu():
    """scaler.update(new_scale=...) with the scale restored from a checkpoint loaded to the CPU."""
    torch = _torch()
    _, opt, scaler = _scaled_step()
    scaler.step(opt)
    restored = torch.tensor(1024.0)
    scaler.update(new_scale=restored)


@fault("amp_numerics", batch="c", timeout=25)
def multinomial_fp16_underflow_zero_row():
    """Sampling from exp(logits) computed in fp16: very negative logits underflow to 0, every row sums to 0."""
    torch = _torch()
    logits = torch.randn(4, 50, device="cuda") * 3 - 40
    weights = torch.exp(logits.half())
    print(torch.multinomial(weights.float(), 1).flatten().tolist())


@fault("nccl_timeout", batch="c", launcher="torchrun", nproc=2, timeout=40)
def gloo_all_to_all_split_mismatch():
    """all_to_all_single where the ranks disagree on the split sizes (an expert router's counts out of step)."""
    torch = _torch()
    dist = _env_world("gloo", timeout=timedelta(seconds=8))
    rank = dist.get_rank()
    send = torch.arange(4, dtype=torch.float32) + 10 * rank
    input_splits = [2, 2] if rank == 0 else [1, 3]
    output_splits = [2, 2] if rank == 0 else [3, 1]
    received = torch.empty(sum(output_splits))
    dist.all_to_all_single(received, send, output_splits, input_splits)
    print(rank, received.tolist())


@fault("nccl_timeout", batch="c", launcher="torchrun", nproc=2, timeout=45)
def new_group_not_called_on_every_rank():
    """new_group() called on rank 0 only (inside an `if rank == 0:` block); it waits for rank 1."""
    import time
    torch = _torch()
    dist = _env_world("gloo", timeout=timedelta(seconds=6))
    if dist.get_rank() == 0:
        group = dist.new_group([0, 1], timeout=timedelta(seconds=6))
        x = torch.ones(4)
        dist.all_reduce(x, group=group)
    else:
        time.sleep(25)


def _ranks_as_children(code, sizes, env=None, timeout=35):
    """Start one `python -c code` per rank (RANK, WORLD_SIZE from sizes) and print their outputs, prefixed."""
    import subprocess
    base = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_port()), **(env or {}))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=dict(base, RANK=str(rank), WORLD_SIZE=str(size)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank, size in enumerate(sizes)]
    rc = 0
    for rank, proc in enumerate(procs):
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        sys.stdout.write("".join("[rank%d]: %s\n" % (rank, line) for line in out.splitlines()))
        rc = rc or proc.returncode
    sys.exit(rc)


@fault("nccl_timeout", batch="c", launcher="child", timeout=45)
def gloo_peer_exits_mid_training():
    """Rank 1 dies between two steps (killed from outside, exit 137); rank 0 is in the next all_reduce."""
    code = ("import datetime, os, time, torch, torch.distributed as d; "
            "d.init_process_group('gloo', timeout=datetime.timedelta(seconds=20)); x = torch.ones(1024); "
            "d.all_reduce(x); print('step 0 done', flush=True)\n"
            "if d.get_rank() == 1:\n time.sleep(1); os._exit(137)\n"
            "d.all_reduce(x); print('step 1 done', x.sum())")
    _ranks_as_children(code, (2, 2))


@fault("rendezvous", batch="c", timeout=25)
def tcpstore_master_waits_for_workers():
    """The master's TCPStore waiting for a world of 2 when only it starts (wait_for_workers)."""
    from torch.distributed import TCPStore
    TCPStore("127.0.0.1", _port(), world_size=2, is_master=True, timeout=timedelta(seconds=4),
             wait_for_workers=True)


@fault("rendezvous", batch="c", timeout=25)
def store_get_key_never_set():
    """store.get of a key the other processes never set (a launcher's own handshake)."""
    from torch.distributed import TCPStore
    store = TCPStore("127.0.0.1", _port(), world_size=1, is_master=True, timeout=timedelta(seconds=3))
    print(store.get("trainer/ready"))


@fault("rendezvous", batch="c", launcher="child", timeout=45)
def world_size_differs_between_ranks():
    """Two ranks started with different WORLD_SIZE (2 and 3: a node's launcher script out of date)."""
    code = ("import datetime, torch, torch.distributed as d; d.init_process_group('gloo', "
            "timeout=datetime.timedelta(seconds=8)); print('rank', d.get_rank(), 'of', d.get_world_size()); "
            "x = torch.ones(4); d.all_reduce(x); print('first all_reduce', x)")
    _ranks_as_children(code, (2, 3), timeout=20)


@fault("rendezvous", batch="c", launcher="child", timeout=45)
def torchrun_etcd_backend_missing():
    """torchrun told --rdzv-backend=etcd on a host without the etcd client or server."""
    _relay(_torchrun_child(["--nnodes=1", "--nproc-per-node=1", "--rdzv-backend=etcd",
                            "--rdzv-endpoint=127.0.0.1:%d" % _port(), "--rdzv-id=job7", "-m", "json.tool", "--help"],
                           timeout=40))


@fault("rendezvous", batch="c", launcher="child", timeout=60)
def torchrun_static_rendezvous_master_missing():
    """torchrun on node 1 of 2 with --master-addr/--master-port (static rendezvous) when node 0 never starts."""
    _relay(_torchrun_child(["--nnodes=2", "--node-rank=1", "--nproc-per-node=1", "--master-addr=127.0.0.1",
                            "--master-port=%d" % _port(), "--rdzv-conf=timeout=8", "-m", "json.tool", "--help"],
                           timeout=55))


@fault("rendezvous", batch="c", timeout=25)
def tcp_init_method_without_port():
    """init_method=tcp://HOST with the port left out."""
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1", rank=0, world_size=1,
                            timeout=timedelta(seconds=5))


def _retarget_locations(path, old, new):
    """Rewrite the storage location strings of a torch.save archive (pickle protocol 2: BINUNICODE, length-prefixed)."""
    import struct
    import zipfile
    with zipfile.ZipFile(path) as src:
        items = [(info, src.read(info.filename)) for info in src.infolist()]
    before = b"X" + struct.pack("<I", len(old)) + old.encode()
    after = b"X" + struct.pack("<I", len(new)) + new.encode()
    with zipfile.ZipFile(path, "w") as dst:
        for info, data in items:
            if info.filename.endswith("data.pkl"):
                data = data.replace(before, after)
            dst.writestr(info, data)


@fault("checkpoint_device", batch="c", timeout=25)
def load_checkpoint_saved_on_mps():
    """torch.load on the cluster of a checkpoint saved on a laptop's Apple GPU (storages on mps)."""
    import tempfile
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    torch.save({"model": torch.nn.Linear(4, 4).state_dict(), "step": 10}, path)
    _retarget_locations(path, "cpu", "mps")
    state = torch.load(path, weights_only=True)
    print(state["step"])


@fault("checkpoint_device", batch="c", timeout=25)
def map_location_unknown_device_string():
    """map_location='gpu:0' (not a torch device type)."""
    import tempfile
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    torch.save({"model": torch.nn.Linear(4, 4).state_dict(), "step": 10}, path)
    state = torch.load(path, map_location="gpu:0", weights_only=True)
    print(state["step"])


@fault("checkpoint_device", batch="c", timeout=40)
def jit_load_map_location_missing_gpu():
    """torch.jit.load of a TorchScript model with map_location=cuda:3 (a serving config for an 8-GPU host)."""
    import tempfile
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "model.pt")
    torch.jit.save(torch.jit.script(torch.nn.Linear(4, 4).cuda()), path)
    model = torch.jit.load(path, map_location="cuda:3")
    print(model)


@fault("oom", batch="c", timeout=25, env={"PYTORCH_CUDA_ALLOC_CONF": "roundup_power2_divisions:3"})
def alloc_conf_roundup_divisions_not_power_of_two():
    """roundup_power2_divisions given 3 (it takes powers of two)."""
    torch = _torch()
    print(torch.zeros(4, device="cuda").sum().item())


@fault("oom", batch="c", timeout=25,
       env={"PYTORCH_CUDA_ALLOC_CONF": "pinned_use_cuda_host_register:True,pinned_num_register_threads:3"})
def alloc_conf_register_threads_not_power_of_two():
    """pinned_num_register_threads given 3 (it takes powers of two)."""
    torch = _torch()
    print(torch.zeros(4, pin_memory=True).to("cuda").sum().item())


@fault("oom", batch="c", timeout=25)
def allocator_backend_changed_at_runtime():
    """torch.cuda.memory._set_allocator_settings('backend:cudaMallocAsync') after the caching allocator started."""
    torch = _torch()
    torch.zeros(4, device="cuda")
    torch.cuda.memory._set_allocator_settings("backend:cudaMallocAsync")
    print(torch.zeros(4, device="cuda").sum().item())


def _memory_budget(gib):
    """This process's memory fraction set so that it may hold about `gib` GiB (the GPU's other users unaffected)."""
    torch = _torch()
    _, total = torch.cuda.mem_get_info()
    torch.cuda.set_per_process_memory_fraction(gib * (1 << 30) / total)


@fault("oom", batch="c", timeout=40)
def oom_losses_kept_with_graph():
    """A loop that keeps every step's loss tensor (not loss.item()): each step's activations stay alive."""
    torch = _torch()
    _memory_budget(4)
    model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096)).cuda()
    history = []
    for step in range(200):
        loss = model(torch.randn(8192, 4096, device="cuda")).pow(2).mean()
        history.append(loss)
        print("step %d" % step, flush=True)


@fault("oom", batch="c", timeout=40)
def oom_optimizer_state_first_step():
    """The model and its gradients fit; Adam's state, made at the first optimizer.step(), does not."""
    torch = _torch()
    _memory_budget(4)
    model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192, bias=False) for _ in range(6)]).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    model(torch.randn(64, 8192, device="cuda")).pow(2).mean().backward()
    print("allocated %.2f GiB before the step" % (torch.cuda.memory_allocated() / (1 << 30)), flush=True)
    opt.step()


@fault("oom", batch="c", timeout=40)
def oom_inside_cuda_graph_capture():
    """An allocation too large for the memory budget made while capturing a CUDA graph."""
    torch = _torch()
    _memory_budget(2)
    static = torch.randn(1024, 1024, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        tiled = static.repeat(2048, 1)
        out = tiled.sum()
    graph.replay()
    print(out.item())


@fault("cublas_cudnn", batch="c", timeout=25)
def int8_matmul_below_cublaslt_minimum():
    """torch._int_mm (int8 GEMM through cuBLASLt) on a batch of 8 rows, below the size it takes."""
    torch = _torch()
    a = torch.randint(-128, 127, (8, 64), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 127, (64, 32), dtype=torch.int8, device="cuda")
    print(torch._int_mm(a, b).shape)


@fault("cublas_cudnn", batch="c", timeout=25)
def sdpa_flash_forced_with_mask():
    """scaled_dot_product_attention forced to flash attention with an explicit attention mask."""
    torch = _torch()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q = torch.randn(2, 4, 128, 64, device="cuda", dtype=torch.float16)
    mask = torch.ones(128, 128, device="cuda", dtype=torch.bool).tril()
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        print(torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask).shape)


@fault("cublas_cudnn", batch="c", timeout=25)
def cusolver_invalid_value_cupy():
    """A cuSOLVER Cholesky workspace query with a negative order (CuPy's cuSOLVER binding)."""
    import cupy
    from cupy_backends.cuda.libs import cusolver
    handle = cupy.cuda.device.get_cusolver_handle()
    a = cupy.eye(4, dtype=cupy.float32)
    print(cusolver.spotrf_bufferSize(handle, 0, -4, a.data.ptr, 4))


@fault("deterministic_algorithms", batch="c", timeout=25)
def deterministic_segmentation_cross_entropy():
    """A segmentation loss (CrossEntropyLoss on N,C,H,W logits) on the GPU under deterministic algorithms."""
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    criterion = torch.nn.CrossEntropyLoss()
    logits = torch.randn(2, 5, 16, 16, device="cuda", requires_grad=True)
    target = torch.randint(0, 5, (2, 16, 16), device="cuda")
    criterion(logits, target).backward()


@fault("deterministic_algorithms", batch="c", timeout=25)
def deterministic_median_with_indices():
    """torch.median over a dimension (a robust loss) on the GPU under deterministic algorithms."""
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    errors = torch.randn(16, 100, device="cuda").abs()
    values, indices = torch.median(errors, dim=1)
    print(values.mean().item(), indices[:4].tolist())


@fault("deterministic_algorithms", batch="c", timeout=25)
def deterministic_reflection_pad_backward():
    """Backward through ReflectionPad2d (an image generator's padding) under deterministic algorithms."""
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    net = torch.nn.Sequential(torch.nn.ReflectionPad2d(3), torch.nn.Conv2d(3, 8, 7)).cuda()
    net(torch.randn(2, 3, 32, 32, device="cuda", requires_grad=True)).mean().backward()


@fault("performance", batch="c", timeout=25)
def rnn_weights_not_contiguous_warning():
    """An LSTM whose recurrent weight got new storage through .data (a weight-drop trick): cuDNN compacts per call."""
    torch = _torch()
    lstm = torch.nn.LSTM(32, 64).cuda()
    lstm.weight_hh_l0.data = lstm.weight_hh_l0.data.clone()
    for _ in range(2):
        out, _ = lstm(torch.randn(10, 4, 32, device="cuda"))
    print(out.shape)


@fault("performance", batch="c", timeout=40)
def ddp_grad_strides_changed_warning():
    """A model turned channels_last after DDP was built: gradient strides no longer match DDP's bucket views."""
    torch = _torch()
    _world("gloo")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 3)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    model.to(memory_format=torch.channels_last)
    for _ in range(2):
        x = torch.randn(4, 3, 32, 32, device="cuda").to(memory_format=torch.channels_last)
        ddp(x).sum().backward()
    print("done")


@fault("performance", batch="c", timeout=90, env={"TORCHINDUCTOR_COMPILE_THREADS": "1"})
def inductor_tf32_disabled_warning():
    """torch.compile of an fp32 matmul on a GPU with TF32 tensor cores and the default matmul precision."""
    torch = _torch()

    @torch.compile
    def layer(x, w):
        return torch.relu(x @ w)

    print(layer(torch.randn(512, 512, device="cuda"), torch.randn(512, 512, device="cuda")).sum().item())


def _nccl_one_rank():
    torch = _torch()
    torch.cuda.set_device(0)
    dist = _world("nccl", timeout=timedelta(seconds=15), device_id=torch.device("cuda", 0))
    x = torch.ones(4, device="cuda")
    dist.all_reduce(x)
    _sync()
    print(x.sum().item())


@fault("nccl_network", batch="c", timeout=25, env={"NCCL_COMM_ID": "trainer-0", "NCCL_DEBUG": "WARN"})
def nccl_comm_id_malformed():
    """NCCL_COMM_ID given a host without a port."""
    _nccl_one_rank()


@fault("nccl_network", batch="c", timeout=25, env={"NCCL_ALGO": "Ring,Butterfly", "NCCL_DEBUG": "WARN"})
def nccl_algo_invalid():
    """NCCL_ALGO naming an algorithm NCCL does not have."""
    _nccl_one_rank()


@fault("nccl_network", batch="c", timeout=25, env={"NCCL_PROTO": "LL256", "NCCL_DEBUG": "WARN"})
def nccl_proto_invalid():
    """NCCL_PROTO naming a protocol NCCL does not have."""
    _nccl_one_rank()


@fault("nccl_network", batch="c", timeout=25, env={"GLOO_DEVICE_TRANSPORT": "IBVERBS"})
def gloo_device_transport_unknown():
    """GLOO_DEVICE_TRANSPORT naming a transport this build of gloo does not have."""
    _world("gloo", timeout=timedelta(seconds=10))


@fault("driver_runtime_mismatch", batch="c", timeout=25)
def ptx_newer_than_driver_cupy():
    """A kernel's PTX of an ISA version newer than the driver knows (built by a newer toolkit), loaded by CuPy."""
    import cupy
    ptx = b".version 9.9\n.target sm_90\n.address_size 64\n\n.visible .entry noop()\n{\n\tret;\n}\n\0"
    module = cupy.cuda.function.Module()
    module.load(ptx)
    print(module.get_function("noop"))


@fault("driver_runtime_mismatch", batch="c", timeout=25)
def cubin_for_other_arch_cupy():
    """A kernel compiled to an sm_80 cubin only (an A100 build) loaded on this GPU."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc
    source = 'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }'
    program = nvrtc.createProgram(source, "twice.cu", [], [])
    nvrtc.compileProgram(program, ["-arch=sm_80"])
    cubin = nvrtc.getCUBIN(program)
    module = cupy.cuda.function.Module()
    module.load(cubin)
    print(module.get_function("twice"))


@fault("driver_runtime_mismatch", batch="c", timeout=45, env={"CUDA_FORCE_PTX_JIT": "1"})
def force_ptx_jit_without_ptx():
    """CUDA_FORCE_PTX_JIT=1 (left from a forward-compatibility test): kernels must come from PTX the build lacks."""
    torch = _torch()
    x = torch.randn(1024, device="cuda")
    print((x * 2).sum().item())


# ---- batch d: written for a fourth blind holdout (holdout-gpu-d), categories set before it ran ----------------
# Each fault of batch d aims at a final message that no text of batches a, b, c printed (not only a new mechanism).

def _lightning_module(step_body=None):
    """A tiny LightningModule; step_body(module, batch) returns the loss (default: the linear layer's MSE)."""
    import lightning.pytorch as pl
    torch = _torch()

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(8, 1)
            self.spare = torch.nn.Linear(8, 1)

        def training_step(self, batch, _):
            if step_body is not None:
                return step_body(self, batch)
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    return Tiny(), torch.utils.data.DataLoader(data, batch_size=16)


def _trainer(**kwargs):
    import lightning.pytorch as pl
    base = dict(max_steps=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False)
    base.update(kwargs)
    return pl.Trainer(**base)


# oom

@fault("oom", batch="d", timeout=30)
def oom_cupy_pool_limit():
    """CuPy's memory pool capped at 1 GiB (a co-located preprocessing job's share) asked for 2 GiB."""
    import cupy
    cupy.get_default_memory_pool().set_limit(size=1 << 30)
    frames = cupy.empty((512, 1024, 1024), dtype=cupy.float32)
    print(frames.nbytes)


@fault("oom", batch="d", timeout=30)
def oom_cupy_pinned_host_buffer():
    """A pinned host staging buffer of 256 TiB (a size computed in elements, used as bytes) through CuPy."""
    import cupy
    buffer = cupy.cuda.alloc_pinned_memory(1 << 48)  # past the address space: refused at once, nothing pinned
    print(buffer.size())


@fault("oom", batch="d", timeout=60)
def oom_triton_shared_memory():
    """A Triton matmul with 128x128x128 fp32 tiles and 4 stages: more shared memory than one SM has."""
    import triton
    import triton.language as tl
    torch = _torch()

    @triton.jit
    def matmul(a, b, c, N: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, N, BK):
            rk = k + tl.arange(0, BK)
            x = tl.load(a + rm[:, None] * N + rk[None, :])
            y = tl.load(b + rk[:, None] * N + rn[None, :])
            acc += tl.dot(x, y)
        tl.store(c + rm[:, None] * N + rn[None, :], acc)

    n = 1024
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    c = torch.empty(n, n, device="cuda")
    matmul[(n // 128, n // 128)](a, b, c, N=n, BM=128, BN=128, BK=128, num_stages=4, num_warps=8)
    print(c.sum().item())


@fault("oom", batch="d", timeout=25, env={"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb"})
def alloc_conf_key_without_value():
    """PYTORCH_CUDA_ALLOC_CONF naming max_split_size_mb with its value left out."""
    torch = _torch()
    model = torch.nn.Linear(8, 8).cuda()
    print(model.weight.norm().item())


@fault("oom", batch="d", timeout=25,
       env={"PYTORCH_CUDA_ALLOC_CONF": "pinned_use_cuda_host_register:True,pinned_num_register_threads:1024"})
def alloc_conf_register_threads_too_many():
    """pinned_num_register_threads given 1024 (a power of two, but past the limit)."""
    torch = _torch()
    staging = torch.empty(1 << 16, pin_memory=True)
    print(staging.cuda(non_blocking=True).shape)


# illegal_access

@fault("illegal_access", batch="d", timeout=25)
def index_add_index_out_of_range():
    """index_add_ accumulating per-class sums with a class id past the table (GPU)."""
    torch = _torch()
    sums = torch.zeros(10, 4, device="cuda")
    classes = torch.tensor([0, 3, 12, 5], device="cuda")
    sums.index_add_(0, classes, torch.ones(4, 4, device="cuda"))
    print(sums.sum().item())


@fault("illegal_access", batch="d", timeout=25)
def index_copy_index_out_of_range():
    """index_copy_ writing a KV-cache slot past the cache length (GPU)."""
    torch = _torch()
    cache = torch.zeros(16, 8, device="cuda")
    slots = torch.tensor([2, 16], device="cuda")
    cache.index_copy_(0, slots, torch.ones(2, 8, device="cuda"))
    print(cache.sum().item())


@fault("illegal_access", batch="d", timeout=25)
def index_fill_index_out_of_range():
    """index_fill_ masking token positions with a position past the sequence (GPU)."""
    torch = _torch()
    scores = torch.randn(4, 32, device="cuda")
    positions = torch.tensor([1, 40], device="cuda")
    scores.index_fill_(1, positions, float("-inf"))
    print(scores.sum().item())


@fault("illegal_access", batch="d", timeout=25)
def take_index_out_of_range():
    """torch.take on a flattened feature map with a flat index past its numel (GPU)."""
    torch = _torch()
    fmap = torch.randn(8, 8, device="cuda")
    flat = torch.tensor([0, 63, 64 * 1024], device="cuda")
    print(torch.take(fmap, flat).sum().item())


@fault("illegal_access", batch="d", timeout=25)
def multi_margin_loss_target_out_of_range():
    """multi_margin_loss with a target class past the number of classes (GPU)."""
    torch = _torch()
    scores = torch.randn(4, 5, device="cuda", requires_grad=True)
    target = torch.tensor([0, 1, 7, 2], device="cuda")
    print(torch.nn.functional.multi_margin_loss(scores, target).item())


@fault("illegal_access", batch="d", timeout=25)
def cupy_kernel_trap():
    """A custom kernel that calls __trap() when it meets a bad record (CuPy RawKernel)."""
    import cupy
    kernel = cupy.RawKernel(r'''
    extern "C" __global__ void check(const int* labels, int n) {
        int i = threadIdx.x;
        if (i < n && labels[i] < 0) __trap();
    }''', "check")
    labels = cupy.array([1, 2, -1, 3], dtype=cupy.int32)
    kernel((1,), (32,), (labels, cupy.int32(4)))
    cupy.cuda.runtime.deviceSynchronize()


@fault("illegal_access", batch="d", timeout=25)
def cupy_kernel_device_assert():
    """A custom kernel's own assert (what assert() expands to) on a label out of range (CuPy RawKernel)."""
    import cupy
    kernel = cupy.RawKernel(r'''
    extern "C" __device__ void __assertfail(const char*, const char*, unsigned int, const char*,
                                            decltype(sizeof(0)));
    #define ASSERT(c) do { if (!(c)) __assertfail(#c, __FILE__, __LINE__, __func__, 1); } while (0)
    extern "C" __global__ void check(const int* labels, int n, int classes) {
        int i = threadIdx.x;
        if (i < n) ASSERT(labels[i] < classes);
    }''', "check")
    labels = cupy.array([1, 2, 9, 3], dtype=cupy.int32)
    kernel((1,), (32,), (labels, cupy.int32(4), cupy.int32(5)))
    cupy.cuda.runtime.deviceSynchronize()


# device_mismatch

@fault("device_mismatch", batch="d", timeout=60)
def triton_kernel_given_cpu_tensor():
    """A Triton kernel launched with an output tensor left on the CPU."""
    import triton
    import triton.language as tl
    torch = _torch()

    @triton.jit
    def double(x, out, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)

    x = torch.randn(256, device="cuda")
    out = torch.empty(256)
    double[(1,)](x, out, 256, BLOCK=256)
    print(out.sum().item())


@fault("device_mismatch", batch="d", timeout=25)
def set_storage_from_other_device():
    """Tensor.set_ tying a GPU tensor to a storage that lives on the CPU (weight sharing by storage)."""
    torch = _torch()
    shared = torch.randn(16).untyped_storage()
    weight = torch.empty(0, device="cuda")
    weight.set_(shared)
    print(weight.sum().item())


@fault("device_mismatch", batch="d", timeout=25)
def parameters_to_vector_mixed_devices():
    """parameters_to_vector (a flat-parameter optimizer) over a model whose head stayed on the CPU."""
    torch = _torch()
    body = torch.nn.Linear(8, 8).cuda()
    head = torch.nn.Linear(8, 2)
    print(torch.nn.utils.parameters_to_vector(list(body.parameters()) + list(head.parameters())).shape)


@fault("device_mismatch", batch="d", timeout=25)
def legacy_cuda_constructor_from_cpu_tensor():
    """torch.cuda.FloatTensor(cpu_tensor) (legacy code building a GPU tensor from host data)."""
    torch = _torch()
    host = torch.randn(4, 4)
    print(torch.cuda.FloatTensor(host).sum().item())


@fault("device_mismatch", batch="d", timeout=25)
def backward_gradient_on_cpu():
    """output.backward(gradient) with the upstream gradient made on the CPU."""
    torch = _torch()
    model = torch.nn.Linear(8, 4).cuda()
    out = model(torch.randn(2, 8, device="cuda"))
    out.backward(torch.ones(2, 4))
    print(model.weight.grad.sum().item())


@fault("device_mismatch", batch="d", timeout=25)
def stft_window_on_cpu():
    """torch.stft of GPU audio with a Hann window made on the CPU."""
    torch = _torch()
    audio = torch.randn(2, 16000, device="cuda")
    window = torch.hann_window(400)
    spec = torch.stft(audio, n_fft=400, hop_length=160, window=window, return_complex=True)
    print(spec.shape)


@fault("device_mismatch", batch="d", timeout=25)
def rng_state_moved_to_gpu():
    """A checkpoint dict moved whole to the GPU on resume, its CPU RNG state with it, then torch.set_rng_state."""
    torch = _torch()
    checkpoint = {"model": torch.nn.Linear(4, 4).state_dict(), "rng": torch.get_rng_state()}
    checkpoint = {k: (v.cuda() if torch.is_tensor(v) else v) for k, v in checkpoint.items()}
    torch.set_rng_state(checkpoint["rng"])
    print(torch.rand(1).item())


# device_access

@fault("device_access", batch="d", timeout=25)
def cupy_device_missing_ordinal():
    """CuPy told to use device 3 (a per-rank device from an 8-GPU config) on a one-GPU host."""
    import cupy
    with cupy.cuda.Device(3):
        print(cupy.zeros(4).sum())


@fault("device_access", batch="d", timeout=25, env={"CUDA_VISIBLE_DEVICES": ""})
def cupy_without_visible_gpu():
    """A CuPy preprocessing step in a process whose CUDA_VISIBLE_DEVICES a wrapper emptied."""
    import cupy
    print(cupy.arange(8).sum())


@fault("device_access", batch="d", timeout=25)
def memory_stats_missing_gpu():
    """torch.cuda.memory_stats(device=4) (a monitoring hook with a global rank for a local device)."""
    torch = _torch()
    torch.zeros(1, device="cuda")
    print(torch.cuda.memory_stats(device=4)["allocated_bytes.all.current"])


@fault("device_access", batch="d", timeout=25)
def memory_fraction_missing_gpu():
    """set_per_process_memory_fraction for device 2 on a one-GPU host."""
    torch = _torch()
    torch.zeros(1, device="cuda")
    torch.cuda.set_per_process_memory_fraction(0.5, device=2)
    print(torch.zeros(4, device="cuda:2"))


def _spawned_rank(rank):
    torch = _torch()
    torch.cuda.set_device(rank)
    print("rank", rank, torch.zeros(1, device="cuda").item(), flush=True)


@fault("device_access", batch="d", timeout=60)
def spawn_ranks_past_gpus():
    """torch.multiprocessing.spawn of 2 workers, each calling torch.cuda.set_device(rank), on a one-GPU host."""
    import torch.multiprocessing as mp
    mp.spawn(_spawned_rank, nprocs=2)


# amp_numerics

@fault("amp_numerics", batch="d", timeout=25)
def categorical_from_nan_probabilities():
    """A policy's action distribution built from fp16 probabilities that overflowed to NaN."""
    torch = _torch()
    logits = torch.randn(4, 10, device="cuda").half() * 2000
    probs = torch.softmax(logits * 100, dim=-1)  # fp16 logits past 65504 are inf: softmax rows of NaN
    dist = torch.distributions.Categorical(probs=probs.float())
    print(dist.sample().tolist())


@fault("amp_numerics", batch="d", timeout=25)
def normal_scale_underflow_fp16():
    """A Gaussian policy whose std (exp of a very negative log-std in fp16) underflowed to 0."""
    torch = _torch()
    log_std = torch.full((4, 2), -20.0, device="cuda").half()
    std = torch.exp(log_std).float()
    dist = torch.distributions.Normal(torch.zeros(4, 2, device="cuda"), std)
    print(dist.sample().sum().item())


@fault("amp_numerics", batch="d", timeout=25)
def binary_cross_entropy_under_autocast():
    """binary_cross_entropy on sigmoid outputs inside a float16 autocast region."""
    torch = _torch()
    model = torch.nn.Linear(16, 1).cuda()
    x = torch.randn(8, 16, device="cuda")
    y = torch.randint(0, 2, (8, 1), device="cuda").float()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.binary_cross_entropy(torch.sigmoid(model(x)), y)
    loss.backward()


@fault("amp_numerics", batch="d", timeout=25)
def grad_scaler_step_with_closure():
    """scaler.step(optimizer, closure) (an LBFGS loop moved to mixed precision)."""
    torch = _torch()
    model = torch.nn.Linear(8, 1).cuda()
    opt = torch.optim.LBFGS(model.parameters())
    scaler = torch.amp.GradScaler("cuda")
    x = torch.randn(16, 8, device="cuda")

    def closure():
        opt.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        return loss

    scaler.step(opt, closure=closure)


@fault("amp_numerics", batch="d", timeout=25)
def grad_scaler_load_empty_state():
    """Resuming with a GradScaler state saved while AMP was disabled (an empty dict) into an enabled scaler."""
    torch = _torch()
    saved = torch.amp.GradScaler("cuda", enabled=False).state_dict()
    scaler = torch.amp.GradScaler("cuda")
    scaler.load_state_dict(saved)


@fault("amp_numerics", batch="d", timeout=25)
def cholesky_of_fp16_covariance():
    """A covariance accumulated in fp16 overflows to inf; its Cholesky factorisation then fails."""
    torch = _torch()
    features = (torch.randn(256, 8, device="cuda") * 300).half()
    cov = (features.T @ features).float() / 256
    print(torch.linalg.cholesky(cov).diagonal().tolist())


# rendezvous


@fault("rendezvous", batch="d", timeout=25)
def init_method_unknown_scheme():
    """init_method=tpc://... (a typo of tcp://)."""
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="tpc://127.0.0.1:%d" % _port(), rank=0, world_size=1,
                            timeout=timedelta(seconds=5))


@fault("rendezvous", batch="d", timeout=25)
def init_with_both_store_and_init_method():
    """init_process_group given a TCPStore and an init_method at once."""
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", _port(), 1, True, timeout=timedelta(seconds=5))
    dist.init_process_group("gloo", store=store, init_method="tcp://127.0.0.1:%d" % (_port() + 1), rank=0,
                            world_size=1)


@fault("rendezvous", batch="d", launcher="child", timeout=45)
def torchrun_unknown_rdzv_backend():
    """torchrun --rdzv-backend=zookeeper (a backend torch.distributed.elastic does not have)."""
    _relay(_torchrun_child(["--nnodes=1", "--nproc-per-node=1", "--rdzv-backend=zookeeper",
                            "--rdzv-endpoint=127.0.0.1:%d" % _port(), "--rdzv-id=job7", "-m", "json.tool", "--help"],
                           timeout=40))


@fault("rendezvous", batch="d", launcher="child", timeout=45)
def torchrun_nnodes_min_above_max():
    """torchrun --nnodes=4:2 (minimum and maximum swapped in an elastic job spec)."""
    _relay(_torchrun_child(["--nnodes=4:2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                            "--rdzv-endpoint=127.0.0.1:%d" % _port(), "-m", "json.tool", "--help"], timeout=40))


@fault("rendezvous", batch="d", launcher="child", timeout=45)
def torchrun_nproc_per_node_invalid():
    """torchrun --nproc-per-node=gpus (a template variable left unexpanded)."""
    _relay(_torchrun_child(["--standalone", "--nproc-per-node=gpus", "-m", "json.tool", "--help"], timeout=40))


@fault("rendezvous", batch="d", launcher="child", timeout=45)
def torchrun_endpoint_port_not_number():
    """torchrun --rdzv-endpoint=HOST:$PORT with $PORT unset in the job script (an empty port)."""
    _relay(_torchrun_child(["--nnodes=1", "--nproc-per-node=1", "--rdzv-backend=c10d",
                            "--rdzv-endpoint=127.0.0.1:$MASTER_PORT", "-m", "json.tool", "--help"], timeout=40))


@fault("rendezvous", batch="d", timeout=30)
def master_port_is_another_service():
    """MASTER_PORT pointing at another service on the master (it answers, but not as a TCPStore)."""
    import socket
    import threading
    import torch.distributed as dist
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", _port()))
    server.listen(8)

    def answer():
        while True:
            conn, _ = server.accept()
            conn.recv(64)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    dist.TCPStore("127.0.0.1", _port(), 2, False, timeout=timedelta(seconds=5))


# nccl_timeout

@fault("nccl_timeout", batch="d", launcher="torchrun", nproc=2, timeout=40)
def gloo_async_work_wait_timeout():
    """An async all_reduce waited on with work.wait(timeout=3 s) while the other rank is still in its data step."""
    import time
    torch = _torch()
    dist = _env_world("gloo", timeout=timedelta(seconds=20))
    grads = torch.ones(1 << 16)
    if dist.get_rank() == 0:
        work = dist.all_reduce(grads, async_op=True)
        work.wait(timeout=timedelta(seconds=3))
        print("reduced", grads[0].item())
    else:
        time.sleep(10)


@fault("nccl_timeout", batch="d", launcher="torchrun", nproc=2, timeout=40)
def gloo_broadcast_src_disagree():
    """broadcast where each rank believes itself the source (src=rank instead of src=0)."""
    torch = _torch()
    dist = _env_world("gloo", timeout=timedelta(seconds=8))
    rank = dist.get_rank()
    weights = torch.full((1 << 20,), float(rank))
    dist.broadcast(weights, src=rank)
    print(rank, weights[0].item())


@fault("nccl_timeout", batch="d", launcher="torchrun", nproc=2, timeout=45)
def ddp_join_uneven_inputs_throw():
    """DDP's join(throw_on_early_termination=True) with one rank's shard shorter than the other's."""
    torch = _torch()
    dist = _env_world("gloo", timeout=timedelta(seconds=15))
    rank = dist.get_rank()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4).cuda())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with model.join(throw_on_early_termination=True):
        for step in range(3 if rank == 0 else 6):
            opt.zero_grad()
            model(torch.randn(8, 16, device="cuda")).sum().backward()
            opt.step()
            print("rank %d step %d" % (rank, step), flush=True)


# nccl_network

@fault("nccl_network", batch="d", timeout=30)
def gloo_device_hostname_unresolvable():
    """A gloo device bound by hostname (the node's name in the job's host list) that does not resolve here."""
    import torch.distributed as dist
    device = dist.ProcessGroupGloo.create_device(hostname="trainer-3.cluster.invalid")
    print(device)


@fault("nccl_network", batch="d", timeout=30, env={"TP_SOCKET_IFNAME": "ib-fabric9"})
def rpc_tensorpipe_ifname_missing():
    """torch.distributed.rpc (TensorPipe) told by TP_SOCKET_IFNAME to use an interface this host lacks."""
    import torch.distributed.rpc as rpc
    options = rpc.TensorPipeRpcBackendOptions(init_method="tcp://127.0.0.1:%d" % _port(), rpc_timeout=10)
    rpc.init_rpc("worker0", rank=0, world_size=1, rpc_backend_options=options)
    rpc.shutdown()


@fault("nccl_network", batch="d", timeout=30)
def nccl_comm_id_port_in_use():
    """NCCL_COMM_ID naming a port that another service on this node already listens on."""
    import socket
    held = socket.socket()
    held.bind(("127.0.0.1", _port() + 1))
    held.listen(1)
    os.environ.update(NCCL_COMM_ID="127.0.0.1:%d" % (_port() + 1), NCCL_DEBUG="WARN")
    _nccl_one_rank()


# checkpoint_device

def _saved_state():
    import tempfile
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    torch.save({"model": torch.nn.Linear(4, 4).state_dict(), "step": 10}, path)
    return path


@fault("checkpoint_device", batch="d", timeout=25)
def map_location_unexpanded_variable():
    """map_location='cuda:${LOCAL_RANK}' from a YAML config whose variable was never expanded."""
    torch = _torch()
    state = torch.load(_saved_state(), map_location="cuda:${LOCAL_RANK}", weights_only=True)
    print(state["step"])


@fault("checkpoint_device", batch="d", timeout=25)
def map_location_negative_local_rank():
    """map_location=torch.device('cuda', local_rank) with LOCAL_RANK unset, so local_rank = -1."""
    torch = _torch()
    local_rank = int(os.environ.get("LOCAL_RANK", "-1"))
    state = torch.load(_saved_state(), map_location=torch.device("cuda", local_rank), weights_only=True)
    print(state["step"])


@fault("checkpoint_device", batch="d", timeout=25)
def load_checkpoint_saved_on_meta():
    """A checkpoint saved from a model built on the meta device (deferred init, never materialised)."""
    torch = _torch()
    path = _saved_state()
    _retarget_locations(path, "cpu", "meta")
    state = torch.load(path, weights_only=True)
    model = torch.nn.Linear(4, 4).cuda()
    model.load_state_dict(state["model"])
    print(model.weight.sum().item())


@fault("checkpoint_device", batch="d", launcher="child", timeout=60)
def jit_load_gpu_model_without_visible_gpu():
    """A TorchScript model saved on the GPU, loaded without map_location in a process that sees no GPU."""
    import tempfile
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "model.pt")
    torch.jit.save(torch.jit.script(torch.nn.Linear(4, 4).cuda()), path)
    _relay(_child("import torch; m = torch.jit.load(%r); print(m(torch.randn(2, 4)))" % path,
                  env={"CUDA_VISIBLE_DEVICES": ""}, timeout=50))


# cuda_fork

@fault("cuda_fork", batch="d", timeout=60)
def lightning_ddp_fork_after_cuda():
    """Lightning's strategy='ddp_fork' in a script that already moved a tensor to the GPU."""
    torch = _torch()
    torch.zeros(1, device="cuda")
    model, loader = _lightning_module()
    _trainer(accelerator="gpu", devices=1, strategy="ddp_fork").fit(model, loader)


def _produce_and_exit(queue):
    torch = _torch()
    queue.put(torch.ones(1 << 20, device="cuda"))


@fault("cuda_fork", batch="d", timeout=60)
def cuda_ipc_producer_exits():
    """A spawn worker puts a GPU tensor on a queue and exits before the trainer has taken it."""
    import time
    import torch.multiprocessing as mp
    torch = _torch()
    torch.zeros(1, device="cuda")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    worker = ctx.Process(target=_produce_and_exit, args=(queue,))
    worker.start()
    worker.join(40)
    time.sleep(1)
    received = queue.get(timeout=10)
    print("received", received.sum().item())


def _echo_back(inbox, outbox):
    tensor = inbox.get()
    outbox.put(tensor[:8])


@fault("cuda_fork", batch="d", timeout=60)
def cuda_ipc_resend_received_tensor():
    """A spawn worker sends back (a slice of) the GPU tensor it received from the trainer."""
    import torch.multiprocessing as mp
    torch = _torch()
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.SimpleQueue(), ctx.SimpleQueue()  # put pickles at once, in the caller
    worker = ctx.Process(target=_echo_back, args=(inbox, outbox))
    worker.start()
    batch = torch.arange(64, dtype=torch.float32, device="cuda")
    inbox.put(batch)
    worker.join(40)
    sys.exit(worker.exitcode if worker.exitcode is not None else 1)


class _GpuSlices:
    """A dataset that holds its samples on the GPU and returns slices of them."""

    def __init__(self, data):
        self.data = data

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return self.data[i * 4:(i + 1) * 4]


@fault("cuda_fork", batch="d", timeout=45)
def dataloader_forkserver_returns_cuda_slices():
    """DataLoader workers (forkserver) returning slices of a dataset kept on the GPU (batch_size=None)."""
    torch = _torch()
    data = _GpuSlices(torch.randn(16, 8, device="cuda"))
    loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=1, multiprocessing_context="forkserver",
                                         timeout=15)
    for batch in loader:
        print(batch.sum().item())


# cublas_cudnn

def _fp8(rows, cols, dtype):
    torch = _torch()
    return torch.randn(rows, cols, device="cuda").to(dtype)


@fault("cublas_cudnn", batch="d", timeout=25)
def scaled_mm_dims_not_multiple_of_16():
    """torch._scaled_mm (FP8 GEMM through cuBLASLt) with a hidden size of 20, not a multiple of 16."""
    torch = _torch()
    a = _fp8(16, 20, torch.float8_e4m3fn)
    b = _fp8(32, 20, torch.float8_e4m3fn)
    one = torch.tensor(1.0, device="cuda")
    print(torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16).shape)


@fault("cublas_cudnn", batch="d", timeout=25)
def scaled_mm_both_e5m2():
    """torch._scaled_mm with both operands in float8_e5m2 (a gradient format used for the weights too)."""
    torch = _torch()
    a = _fp8(32, 64, torch.float8_e5m2)
    b = _fp8(32, 64, torch.float8_e5m2)
    one = torch.tensor(1.0, device="cuda")
    print(torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16).shape)


@fault("cublas_cudnn", batch="d", timeout=25)
def cupy_cusparse_invalid_value():
    """A cuSPARSE matrix descriptor given an index base that is neither 0 nor 1 (CuPy's cuSPARSE binding)."""
    from cupy_backends.cuda.libs import cusparse
    descr = cusparse.createMatDescr()
    cusparse.setMatIndexBase(descr, 7)
    print(descr)


@fault("cublas_cudnn", batch="d", timeout=25)
def cupy_curand_unknown_generator_type():
    """A cuRAND generator of a type id cuRAND does not have (CuPy's cuRAND binding)."""
    from cupy_backends.cuda.libs import curand
    print(curand.createGenerator(12345))


@fault("cublas_cudnn", batch="d", timeout=25)
def svd_unknown_cusolver_driver():
    """torch.linalg.svd on the GPU with driver='gesvdx' (a cuSOLVER routine torch does not offer)."""
    torch = _torch()
    a = torch.randn(64, 32, device="cuda")
    print(torch.linalg.svd(a, full_matrices=False, driver="gesvdx")[1][:4].tolist())


# deterministic_algorithms

@fault("deterministic_algorithms", batch="d", timeout=25)
def deterministic_debug_mode_unknown_value():
    """torch.set_deterministic_debug_mode('strict') (not one of default, warn, error)."""
    torch = _torch()
    torch.set_deterministic_debug_mode("strict")
    print(torch.zeros(4, device="cuda").sum().item())


@fault("deterministic_algorithms", batch="d", timeout=25)
def use_deterministic_algorithms_given_string():
    """torch.use_deterministic_algorithms('warn') (the debug-mode spelling given to the boolean switch)."""
    torch = _torch()
    torch.use_deterministic_algorithms("warn")
    print(torch.zeros(4, device="cuda").sum().item())


@fault("deterministic_algorithms", batch="d", timeout=60)
def lightning_deterministic_with_benchmark():
    """Trainer(deterministic=True, benchmark=True) and a training step that takes a kthvalue on the GPU."""
    torch = _torch()
    torch.set_float32_matmul_precision("high")

    def step(module, batch):
        x, y = batch
        errors = (module.layer(x) - y).abs().flatten()
        return torch.kthvalue(errors, k=errors.numel() // 2).values

    model, loader = _lightning_module(step)
    _trainer(accelerator="gpu", devices=1, deterministic=True, benchmark=True).fit(model, loader)


# ddp_unused_parameters

@fault("ddp_unused_parameters", batch="d", timeout=90)
def lightning_ddp_unused_parameter():
    """Lightning strategy='ddp' (one GPU) with a layer the training step never uses."""
    torch = _torch()
    torch.set_float32_matmul_precision("high")
    os.environ.setdefault("MASTER_PORT", str(_port()))
    model, loader = _lightning_module()
    _trainer(accelerator="gpu", devices=1, strategy="ddp", max_steps=3).fit(model, loader)


# driver_runtime_mismatch

_NOOP_PTX = ".version %s\n.target %s\n.address_size 64\n\n.visible .entry noop()\n{\n\tret;\n}\n\0"


@fault("driver_runtime_mismatch", batch="d", timeout=25)
def ptx_for_newer_arch_cupy():
    """A kernel shipped as PTX for sm_100 only (built for a Blackwell fleet), loaded on this Hopper GPU."""
    import cupy
    module = cupy.cuda.function.Module()
    module.load((_NOOP_PTX % ("8.8", "sm_100")).encode())
    print(module.get_function("noop"))


@fault("driver_runtime_mismatch", batch="d", timeout=25, env={"CUDA_DISABLE_PTX_JIT": "1"})
def ptx_jit_disabled_cupy():
    """CUDA_DISABLE_PTX_JIT=1 (set for a cubin-only policy) and a kernel that exists only as PTX."""
    import cupy
    module = cupy.cuda.function.Module()
    module.load((_NOOP_PTX % ("8.0", "sm_90")).encode())
    print(module.get_function("noop"))


@fault("driver_runtime_mismatch", batch="d", timeout=25)
def nvrtc_arch_dropped_by_toolkit():
    """NVRTC asked for sm_35 (a build script for an old fleet) by a toolkit that dropped it."""
    from cupy_backends.cuda.libs import nvrtc
    source = 'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }'
    program = nvrtc.createProgram(source, "twice.cu", [], [])
    nvrtc.compileProgram(program, ["-arch=sm_35"])
    print(len(nvrtc.getCUBIN(program)))



# torch_cpu_build

@fault("torch_cpu_build", batch="d", timeout=45, env={"CUDA_VISIBLE_DEVICES": ""})
def lightning_gpu_accelerator_without_cuda():
    """Trainer(accelerator='gpu') in a process where torch sees no CUDA."""
    _trainer(accelerator="gpu", devices=1)


@fault("torch_cpu_build", batch="d", timeout=45, env={"CUDA_VISIBLE_DEVICES": ""})
def triton_kernel_without_cuda():
    """A Triton kernel launched in a process where torch sees no CUDA (no active Triton driver)."""
    import triton
    import triton.language as tl
    torch = _torch()

    @triton.jit
    def double(x, out, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=mask) * 2, mask=mask)

    x = torch.randn(128)
    out = torch.empty_like(x)
    double[(1,)](x, out, 128, BLOCK=128)
    print(out.sum().item())


@fault("torch_cpu_build", batch="d", timeout=25, env={"CUDA_VISIBLE_DEVICES": ""})
def current_accelerator_is_none():
    """device = torch.accelerator.current_accelerator().type in a process where torch sees no accelerator."""
    torch = _torch()
    device = torch.accelerator.current_accelerator().type
    print(torch.zeros(4, device=device).sum().item())


# performance: advisories, the job goes on and exits 0

@fault("performance", batch="d", timeout=25)
def tensor_from_list_of_ndarrays():
    """A collate function building a batch with torch.tensor(list of numpy arrays) before moving it to the GPU."""
    import numpy
    torch = _torch()
    samples = [numpy.random.rand(64).astype("float32") for _ in range(256)]
    batch = torch.tensor(samples).cuda()
    print(batch.shape)


@fault("performance", batch="d", timeout=90)
def dynamo_graph_break_on_item():
    """A torch.compile'd step that calls loss.item() inside the compiled region (a graph break)."""
    torch = _torch()

    @torch.compile
    def step(x, w):
        loss = (x @ w).relu().mean()
        if loss.item() > 1e6:
            loss = loss * 0
        return loss

    print(step(torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")).item())


@fault("performance", batch="d", timeout=60)
def dynamo_recompile_limit_hit():
    """A compiled function called with a different string argument each step: recompiles until dynamo gives up."""
    torch = _torch()
    torch._dynamo.config.recompile_limit = 4

    @torch.compile(backend="eager")  # the limit is dynamo's; the eager backend keeps each recompile short
    def head(x, task):
        return x.sum() if task.startswith("sum") else x.mean()

    x = torch.randn(16, device="cuda")
    for i in range(8):
        print(head(x, "sum-task-%d" % i).item())


@fault("performance", batch="d", timeout=90, env={"TORCH_LOGS": "perf_hints",
                                                  "TORCHINDUCTOR_COMPILE_THREADS": "1"})
def cudagraphs_skipped_mutated_input():
    """torch.compile(mode='reduce-overhead') of a step that updates its input in place: CUDA graphs skipped."""
    torch = _torch()

    @torch.compile(mode="reduce-overhead")
    def ema(avg, x):
        avg.mul_(0.9).add_(x, alpha=0.1)
        return avg.sum()

    avg = torch.zeros(1024, device="cuda")
    for _ in range(3):
        print(ema(avg, torch.randn(1024, device="cuda")).item())


@fault("performance", batch="d", timeout=60)
def lightning_persistent_workers_advice():
    """A Lightning run whose DataLoader starts 8 workers without persistent_workers."""
    torch = _torch()
    torch.set_float32_matmul_precision("high")
    model, _ = _lightning_module()
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=16, num_workers=8)
    _trainer(accelerator="gpu", devices=1).fit(model, loader)


# ---- batch e: written for a fifth blind holdout (holdout-gpu-e), categories set before it ran ----------------
# Like batch d, each fault of batch e aims at a final message no text of batches a-d printed; most go through APIs
# the earlier batches left alone (DeviceMesh, RPC, elastic timers, CUDA graph pools, semi-structured sparsity).

# oom

@fault("oom", batch="e", timeout=30)
def oom_similarity_matrix_over_one_exabyte():
    """A full item-by-item similarity matrix for a catalogue of 2**30 items, allocated on the GPU as one tensor."""
    torch = _torch()
    items = 1 << 30
    scores = torch.empty(items, items, device="cuda")
    print(scores.shape)


@fault("oom", batch="e", timeout=30)
def oom_host_staging_buffer_squared():
    """A host staging buffer sized elements * elements by mistake (2**48 bytes), before the copy to the GPU."""
    torch = _torch()
    elements = 1 << 24
    staging = torch.empty(elements * elements, dtype=torch.uint8)
    print(staging.cuda(non_blocking=True).shape)


@fault("oom", batch="e", serial=True, timeout=90)
def oom_cusolver_handle_on_full_gpu():
    """The first linear-algebra call (a Cholesky factorisation) after the GPU is full: cuSOLVER cannot start."""
    torch = _torch()
    a = torch.randn(64, 64, device="cuda")
    spd = a @ a.T + 64 * torch.eye(64, device="cuda")
    factor = torch.empty_like(spd)
    info = torch.empty((), dtype=torch.int32, device="cuda")
    blocks = _fill_gpu(leave_mib=2)
    for chunk in (4 << 20, 512 << 10):  # the last segments too, so nothing is left for a new library handle
        while True:
            try:
                blocks.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
            except torch.OutOfMemoryError:
                break
    print("held %d blocks" % len(blocks), flush=True)
    torch.linalg.cholesky_ex(spd, out=(factor, info))
    print(factor.diagonal().sum().item(), info.item())


@fault("oom", batch="e", timeout=60)
def oom_beside_cuda_graph_pools():
    """An eager request that no longer fits beside the memory pool of a CUDA graph captured for serving."""
    torch = _torch()
    _memory_budget(6)
    weight = torch.randn(4096, 4096, device="cuda")
    static_in = torch.randn(65536, 4096, device="cuda")
    torch.relu(static_in @ weight) @ weight  # warm-up outside the capture (cuBLAS handle, workspace)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # nothing cached outside the graph's pool: the capture itself fits
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        hidden = torch.relu(static_in @ weight)
        static_out = hidden @ weight
        del hidden
    graph.replay()
    print("captured; output %s" % (tuple(static_out.shape),), flush=True)
    prompt_batch = torch.randn(262144, 4096, device="cuda")
    print(prompt_batch.shape)


# device_mismatch

@fault("device_mismatch", batch="e", timeout=30)
def sdpa_kv_cache_offloaded_to_cpu():
    """Decoding with a KV cache offloaded to pinned host memory, handed to scaled_dot_product_attention as it is."""
    torch = _torch()
    query = torch.randn(1, 8, 1, 64, device="cuda", dtype=torch.bfloat16)
    keys = torch.randn(1, 8, 512, 64, dtype=torch.bfloat16).pin_memory()
    values = torch.randn(1, 8, 512, 64, dtype=torch.bfloat16).pin_memory()
    print(torch.nn.functional.scaled_dot_product_attention(query, keys, values).shape)


@fault("device_mismatch", batch="e", timeout=30)
def cholesky_solve_targets_on_cpu():
    """A Gaussian-process head solving against its kernel matrix on the GPU, the training targets left on the CPU."""
    torch = _torch()
    x = torch.randn(256, 16, device="cuda")
    kernel = torch.exp(-torch.cdist(x, x).pow(2) / 2) + 1e-3 * torch.eye(256, device="cuda")
    factor = torch.linalg.cholesky(kernel)
    targets = torch.randn(256, 1)
    print(torch.cholesky_solve(targets, factor).norm().item())


@fault("device_mismatch", batch="e", timeout=30)
def cdist_memory_bank_on_cpu():
    """Nearest-neighbour retrieval of GPU query embeddings against a memory bank kept on the CPU."""
    torch = _torch()
    queries = torch.randn(16, 128, device="cuda")
    bank = torch.randn(20, 128)
    print(torch.cdist(queries, bank).argmin(dim=1).tolist())


@fault("device_mismatch", batch="e", timeout=30)
def grid_sample_grid_built_on_cpu():
    """A spatial-transformer warp whose sampling grid came from affine_grid of a CPU theta."""
    torch = _torch()
    images = torch.randn(4, 3, 64, 64, device="cuda")
    theta = torch.tensor([[1.0, 0.0, 0.1], [0.0, 1.0, -0.1]]).expand(4, 2, 3)
    grid = torch.nn.functional.affine_grid(theta, list(images.shape), align_corners=False)
    print(torch.nn.functional.grid_sample(images, grid, align_corners=False).shape)


@fault("device_mismatch", batch="e", timeout=30)
def searchsorted_lengths_on_cpu():
    """A length-bucketing sampler: GPU quantile boundaries searched with sequence lengths read on the CPU."""
    torch = _torch()
    boundaries = torch.quantile(torch.rand(1000, device="cuda") * 512, torch.linspace(0, 1, 9, device="cuda"))
    lengths = torch.randint(1, 512, (64,)).float()
    print(torch.searchsorted(boundaries, lengths).bincount().tolist())


@fault("device_mismatch", batch="e", timeout=30)
def index_add_source_on_cpu():
    """A class-prototype update (index_add_ on the GPU) given features from a CPU-side augmentation."""
    torch = _torch()
    prototypes = torch.zeros(10, 32, device="cuda")
    labels = torch.randint(0, 10, (64,), device="cuda")
    features = torch.randn(64, 32)
    prototypes.index_add_(0, labels, features)
    print(prototypes.norm().item())


# amp_numerics

@fault("amp_numerics", batch="e", timeout=30)
def grad_scaler_update_every_micro_batch():
    """Gradient accumulation over 4 micro-batches with scaler.update() every micro-batch, scaler.step() every 4th."""
    torch = _torch()
    model = torch.nn.Linear(64, 64).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda")
    for micro in range(8):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(torch.randn(16, 64, device="cuda")).float().pow(2).mean() / 4
        scaler.scale(loss).backward()
        if (micro + 1) % 4 == 0:
            scaler.step(opt)
            opt.zero_grad()
        scaler.update()


@fault("amp_numerics", batch="e", timeout=30)
def custom_function_backward_outside_autocast():
    """A custom autograd.Function (a hand-fused linear) without custom_fwd/custom_bwd, used inside fp16 autocast."""
    torch = _torch()

    class FusedLinear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight):
            ctx.save_for_backward(x, weight)
            return torch.mm(x, weight.t())

        @staticmethod
        def backward(ctx, grad_out):
            x, weight = ctx.saved_tensors
            return grad_out.mm(weight), grad_out.t().mm(x)

    weight = torch.nn.Parameter(torch.randn(32, 64, device="cuda"))
    x = torch.randn(16, 64, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.float16):
        out = FusedLinear.apply(x, weight)
    out.float().sum().backward()
    print(weight.grad.norm().item())


@fault("amp_numerics", batch="e", timeout=30)
def whitening_covariance_fp16_underflow():
    """Feature whitening from fp16 features: a channel in raw SI units (~1e-9) underflows to 0, the inverse fails."""
    torch = _torch()
    torch.manual_seed(0)
    features = torch.randn(256, 8, device="cuda")
    features[:, 3] *= 1e-9
    half = features.half()
    cov = (half.float().T @ half.float()) / 256
    print(torch.linalg.inv(cov).diagonal().tolist())


@fault("amp_numerics", batch="e", timeout=30)
def eigh_of_bf16_preconditioner():
    """A Shampoo-style preconditioner in a pure-bf16 model: torch.linalg.eigh of a bf16 gradient statistic."""
    torch = _torch()
    layer = torch.nn.Linear(128, 128).cuda().to(torch.bfloat16)
    layer(torch.randn(32, 128, device="cuda", dtype=torch.bfloat16)).float().pow(2).mean().backward()
    grad = layer.weight.grad
    statistic = grad @ grad.T + 1e-3 * torch.eye(128, device="cuda", dtype=torch.bfloat16)
    eigenvalues, _ = torch.linalg.eigh(statistic)
    print(eigenvalues[:4].tolist())


@fault("amp_numerics", batch="e", timeout=30)
def grad_scaler_scale_of_logged_float():
    """scaler.scale() given the loss after it was turned into a Python float for logging (loss.item())."""
    torch = _torch()
    model = torch.nn.Linear(16, 1).cuda()
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(torch.randn(8, 16, device="cuda")).float().mean()
    logged = loss.item()
    scaler.scale(logged).backward()


# illegal_access

@fault("illegal_access", batch="e", timeout=30)
def kv_cache_write_past_cache_length():
    """New keys written into a preallocated KV cache at positions past its length (cache[positions] = keys)."""
    torch = _torch()
    cache = torch.zeros(2048, 8, 64, device="cuda", dtype=torch.bfloat16)
    positions = torch.arange(2040, 2056, device="cuda")
    cache[positions] = torch.randn(16, 8, 64, device="cuda", dtype=torch.bfloat16)
    print(cache.float().sum().item())


@fault("illegal_access", batch="e", timeout=30)
def per_sample_cross_entropy_label_past_classes():
    """A per-sample loss (reduction='none', for hard-example mining) with one label id past the number of classes."""
    torch = _torch()
    logits = torch.randn(64, 10, device="cuda", requires_grad=True)
    labels = torch.randint(0, 10, (64,), device="cuda")
    labels[17] = 10
    losses = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    print(losses.topk(8).values.mean().item())


@fault("illegal_access", batch="e", timeout=60)
def triton_misaligned_record_length_load():
    """A Triton kernel reading a 64-bit record length at an odd byte offset of a packed byte stream."""
    import triton
    import triton.language as tl
    torch = _torch()

    @triton.jit
    def read_length(stream, out, offset):
        field = (stream + offset).to(tl.pointer_type(tl.int64))
        tl.store(out, tl.load(field))

    packed = torch.zeros(4096, dtype=torch.uint8, device="cuda")
    length = torch.empty(1, dtype=torch.int64, device="cuda")
    read_length[(1,)](packed, length, 3)
    print(length.item())


# rendezvous

@fault("rendezvous", batch="e", timeout=30)
def init_method_ipv6_without_brackets():
    """init_method=f"tcp://{MASTER_ADDR}:{port}" built from an IPv6 master address without [brackets]."""
    import torch.distributed as dist
    master_addr = "fd00:0:0:12::7"
    dist.init_process_group("nccl", init_method="tcp://%s:%d" % (master_addr, _port()), rank=0, world_size=1,
                            timeout=timedelta(seconds=10))


@fault("rendezvous", batch="e", launcher="child", timeout=45)
def torchrun_join_timeout_with_unit():
    """torchrun --rdzv-conf=join_timeout=10m (a duration with a unit where whole seconds are expected)."""
    _relay(_torchrun_child(["--nnodes=1:2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                            "--rdzv-endpoint=127.0.0.1:%d" % _port(), "--rdzv-conf=join_timeout=10m", "-m",
                            "json.tool", "--help"], timeout=40))


@fault("rendezvous", batch="e", launcher="child", timeout=60)
def torchrun_joins_closed_rendezvous():
    """A node restarted late joins its job's c10d rendezvous after the other nodes finished and closed it."""
    from torch.distributed import TCPStore
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler
    endpoint = "127.0.0.1:%d" % _port()
    store = TCPStore("127.0.0.1", _port(), is_master=True, timeout=timedelta(seconds=20), multi_tenant=True)
    params = RendezvousParameters(backend="c10d", endpoint=endpoint, run_id="job7", min_nodes=1, max_nodes=2)
    create_handler(store, C10dRendezvousBackend(store, "job7"), params).set_closed()
    _relay(_torchrun_child(["--nnodes=1:2", "--nproc-per-node=1", "--rdzv-backend=c10d", "--rdzv-endpoint=" + endpoint,
                            "--rdzv-id=job7", "-m", "json.tool", "--help"], timeout=50))


@fault("rendezvous", batch="e", launcher="child", timeout=60)
def master_killed_while_worker_joins():
    """The master's process is killed (SIGKILL, as the OOM killer does) after opening the store, while rank 1 joins."""
    code = ("import datetime, os, signal, time, torch.distributed as d\n"
            "rank, port = int(os.environ['RANK']), int(os.environ['MASTER_PORT'])\n"
            "if rank == 0:\n"
            " store = d.TCPStore('127.0.0.1', port, 2, True, timeout=datetime.timedelta(seconds=20))\n"
            " print('master: store up, loading the model', flush=True)\n"
            " time.sleep(3)\n"
            " os.kill(os.getpid(), signal.SIGKILL)\n"
            "else:\n"
            " time.sleep(0.5)\n"
            " d.init_process_group('gloo', init_method='tcp://127.0.0.1:%d' % port, rank=1, world_size=2,\n"
            "                      timeout=datetime.timedelta(seconds=20))\n"
            " print('joined', flush=True)\n")
    _ranks_as_children(code, (2, 2), timeout=40)


@fault("rendezvous", batch="e", timeout=30)
def device_mesh_larger_than_world():
    """init_device_mesh('cuda', (2, 4)) for a 2-way data x 4-way tensor-parallel plan, launched as one process."""
    from torch.distributed.device_mesh import init_device_mesh
    _world("gloo")
    mesh = init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp"))
    print(mesh)


@fault("rendezvous", batch="e", launcher="child", timeout=45)
def torchrun_endpoint_with_scheme():
    """torchrun --rdzv-endpoint=tcp://HOST:PORT (the init_method URL pasted where HOST:PORT is expected)."""
    _relay(_torchrun_child(["--nnodes=1", "--nproc-per-node=1", "--rdzv-backend=c10d",
                            "--rdzv-endpoint=tcp://127.0.0.1:%d" % _port(), "-m", "json.tool", "--help"], timeout=40))


# nccl_timeout

@fault("nccl_timeout", batch="e", launcher="torchrun", nproc=2, timeout=45)
def ddp_ranks_built_different_models():
    """Rank 1 built its model from a stale config (3 blocks, rank 0 has 2): DDP's check at construction."""
    torch = _torch()
    dist = _env_world("gloo", timeout=timedelta(seconds=15))
    depth = 2 if dist.get_rank() == 0 else 3
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(depth)]).cuda()
    torch.nn.parallel.DistributedDataParallel(model)


@fault("nccl_timeout", batch="e", launcher="torchrun", nproc=2, timeout=60)
def rpc_call_to_busy_parameter_server():
    """A trainer's rpc_sync to a parameter server that is busy for longer than the call's 2 s timeout."""
    import time
    import torch.distributed.rpc as rpc
    rank = int(os.environ["RANK"])
    options = rpc.TensorPipeRpcBackendOptions(rpc_timeout=30)  # env://: torchrun's store
    rpc.init_rpc("trainer" if rank == 0 else "ps", rank=rank, world_size=2, rpc_backend_options=options)
    if rank == 0:
        print(rpc.rpc_sync("ps", time.sleep, args=(10,), timeout=2))
    rpc.shutdown()


@fault("nccl_timeout", batch="e", launcher="torchrun", nproc=2, timeout=60,
       env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1", "LOGLEVEL": "INFO"})
def elastic_step_timer_expires():
    """A per-step watchdog (torch.distributed.elastic.timer, 5 s) reaps the job when rank 1 stalls inside a step."""
    import time
    from torch.distributed.elastic import timer
    torch = _torch()
    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
    dist = _env_world("gloo", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    grads = torch.ones(1 << 16, device="cuda")
    for step in range(3):
        with timer.expires(after=5):
            if rank == 1 and step == 1:
                time.sleep(45)  # a stalled read from the data store
            dist.all_reduce(grads)
        print("rank %d step %d" % (rank, step), flush=True)


@fault("nccl_timeout", batch="e", launcher="torchrun", nproc=2, timeout=45)
def gather_list_given_on_every_rank():
    """dist.gather with the gather_list built on every rank, not only on dst: rank 1 never joins the gather."""
    torch = _torch()
    dist = _env_world("gloo", timeout=timedelta(seconds=8))
    metrics = torch.tensor([float(dist.get_rank())])
    gathered = [torch.empty(1) for _ in range(dist.get_world_size())]
    dist.gather(metrics, gather_list=gathered, dst=0)
    print(gathered)


# cublas_cudnn

@fault("cublas_cudnn", batch="e", timeout=30)
def scaled_mm_rowwise_scales_one_dimensional():
    """Row-wise FP8 GEMM (torch._scaled_mm) with per-row scales from amax(dim=1) without keepdim (1-D scales)."""
    torch = _torch()
    x = torch.randn(64, 128, device="cuda")
    w = torch.randn(32, 128, device="cuda")
    x_scale = x.abs().amax(dim=1) / 448.0
    w_scale = w.abs().amax(dim=1) / 448.0
    x8 = (x / x_scale[:, None]).to(torch.float8_e4m3fn)
    w8 = (w / w_scale[:, None]).to(torch.float8_e4m3fn)
    print(torch._scaled_mm(x8, w8.t(), scale_a=x_scale, scale_b=w_scale, out_dtype=torch.bfloat16).shape)


@fault("cublas_cudnn", batch="e", timeout=30)
def lstsq_driver_gelsd_on_gpu():
    """torch.linalg.lstsq(driver='gelsd') (a solver chosen on the CPU) on GPU tensors."""
    torch = _torch()
    design = torch.randn(512, 32, device="cuda")
    targets = torch.randn(512, 4, device="cuda")
    print(torch.linalg.lstsq(design, targets, driver="gelsd").solution.shape)


@fault("cublas_cudnn", batch="e", timeout=60)
def semi_structured_sparsity_weight_shape():
    """2:4 semi-structured sparsity (to_sparse_semi_structured) for a pruned 1000 x 1000 fp16 weight."""
    torch = _torch()
    from torch.sparse import to_sparse_semi_structured
    weight = torch.randn(1000, 1000, device="cuda", dtype=torch.float16)
    mask = torch.tensor([0, 0, 1, 1], device="cuda", dtype=torch.bool).tile(1000, 250)
    sparse = to_sparse_semi_structured(weight * mask)
    print(sparse.shape)


@fault("cublas_cudnn", batch="e", timeout=30)
def spectral_conv_rfft2_in_bf16():
    """A Fourier-neural-operator layer in a bf16 model: torch.fft.rfft2 of a bf16 GPU tensor."""
    torch = _torch()
    field = torch.randn(4, 16, 64, 64, device="cuda", dtype=torch.bfloat16)
    print(torch.fft.rfft2(field).shape)


# device_access

@fault("device_access", batch="e", timeout=30, env={"CUDA_VISIBLE_DEVICES": "", "LOCAL_RANK": "3"})
def local_rank_modulo_visible_gpu_count():
    """device = cuda:(LOCAL_RANK % torch.cuda.device_count()) in a container started without its GPUs."""
    torch = _torch()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    print(torch.zeros(4, device=device))


@fault("device_access", batch="e", launcher="child", timeout=45, env={"CUDA_VISIBLE_DEVICES": ""})
def torchrun_nproc_gpu_without_visible_gpu():
    """torchrun --nproc-per-node=gpu in a container that sees no GPU."""
    _relay(_torchrun_child(["--standalone", "--nproc-per-node=gpu", "-m", "json.tool", "--help"], timeout=40))


@fault("device_access", batch="e", timeout=60, env={"CUDA_VISIBLE_DEVICES": ""})
def lightning_cuda_accelerator_without_visible_gpu():
    """Trainer(accelerator='cuda') in a job whose CUDA_VISIBLE_DEVICES the scheduler emptied."""
    _trainer(accelerator="cuda", devices=1)


@fault("device_access", batch="e", launcher="child", timeout=60)
def process_without_nvidia_uvm_device():
    """A process whose /dev/nvidia-uvm is not the driver's device (a container set up without nvidia-uvm)."""
    import shutil
    import subprocess
    if not os.path.exists("/dev/nvidia-uvm") or shutil.which("unshare") is None:
        return  # nothing to hide here: the run shows nothing and is left out
    private = ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
    probe = subprocess.run(private + ["mount --bind /dev/null /dev/nvidia-uvm"], capture_output=True, timeout=20)
    if probe.returncode != 0:
        return  # no private mount namespace for this process: left out the same way
    code = ("import torch\nprint('cuda available:', torch.cuda.is_available(), flush=True)\n"
            "print(torch.zeros(1, device='cuda'))")
    _relay(subprocess.run(private + ['mount --bind /dev/null /dev/nvidia-uvm && exec "$0" -c "$1"', sys.executable,
                                     code], capture_output=True, text=True, timeout=50))


# checkpoint_device

@fault("checkpoint_device", batch="e", timeout=30)
def load_checkpoint_saved_on_gaudi():
    """torch.load here of a checkpoint written on an Intel Gaudi (HPU) cluster: its storages are tagged hpu:0."""
    torch = _torch()
    path = _saved_state()
    _retarget_locations(path, "cpu", "hpu:0")
    state = torch.load(path, weights_only=True)
    print(state["step"])


@fault("checkpoint_device", batch="e", timeout=30)
def cuda_rng_states_from_eight_gpu_node():
    """Resuming with torch.cuda.set_rng_state_all(ckpt['cuda_rng']) from a checkpoint written on an 8-GPU node."""
    import tempfile
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "resume.pt")
    torch.save({"step": 1200, "cuda_rng": [torch.zeros(16, dtype=torch.uint8) for _ in range(8)]}, path)
    checkpoint = torch.load(path, weights_only=True)
    torch.cuda.set_rng_state_all(checkpoint["cuda_rng"])
    model = torch.nn.Linear(16, 16).cuda()
    print(model.weight.norm().item())


@fault("checkpoint_device", batch="e", timeout=30)
def safetensors_load_device_gpu():
    """safetensors.torch.load_file(path, device='gpu') (the device name of a serving config)."""
    import tempfile
    from safetensors.torch import load_file, save_file
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    save_file(torch.nn.Linear(8, 8).state_dict(), path)
    print(sorted(load_file(path, device="gpu")))


@fault("checkpoint_device", batch="e", timeout=30)
def checkpoint_loaded_into_meta_model():
    """A model built on the meta device (fast init), given load_state_dict without assign=True, then .to("cuda")."""
    import tempfile
    torch = _torch()

    def build():
        return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))

    path = os.path.join(tempfile.mkdtemp(), "model.pt")
    torch.save(build().state_dict(), path)
    with torch.device("meta"):
        model = build()
    model.load_state_dict(torch.load(path, weights_only=True))
    model = model.to("cuda")
    print(model(torch.randn(2, 64, device="cuda")).shape)


# deterministic_algorithms

@fault("deterministic_algorithms", batch="e", timeout=30)
def deterministic_adaptive_avg_pool_backward():
    """A VGG-style head (AdaptiveAvgPool2d((7, 7)) on 14 x 14 maps) trained under deterministic algorithms."""
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.AdaptiveAvgPool2d((7, 7))).cuda()
    net(torch.randn(4, 3, 14, 14, device="cuda")).sum().backward()


@fault("deterministic_algorithms", batch="e", timeout=30)
def deterministic_avg_pool3d_backward():
    """A video model's temporal pooling (AvgPool3d) trained under deterministic algorithms."""
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    net = torch.nn.Sequential(torch.nn.Conv3d(3, 8, 3, padding=1), torch.nn.AvgPool3d(2)).cuda()
    net(torch.randn(2, 3, 8, 32, 32, device="cuda")).mean().backward()


@fault("deterministic_algorithms", batch="e", timeout=30)
def deterministic_embedding_bag_max_backward():
    """A recommender's max-pooled feature bags (EmbeddingBag(mode='max')) trained under deterministic algorithms."""
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    bags = torch.nn.EmbeddingBag(1000, 32, mode="max").cuda()
    ids = torch.randint(0, 1000, (64,), device="cuda")
    offsets = torch.arange(0, 64, 8, device="cuda")
    bags(ids, offsets).sum().backward()


@fault("deterministic_algorithms", batch="e", timeout=30)
def deterministic_weighted_bincount():
    """Class frequencies weighted per sample (torch.bincount with weights) on the GPU under deterministic algorithms."""
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    labels = torch.randint(0, 10, (512,), device="cuda")
    sample_weights = torch.rand(512, device="cuda")
    print(torch.bincount(labels, weights=sample_weights, minlength=10).tolist())


@fault("deterministic_algorithms", batch="e", timeout=30)
def deterministic_max_unpool_decoder():
    """A SegNet-style decoder (max_unpool2d with the encoder's pooling indices) under deterministic algorithms."""
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    features = torch.randn(2, 16, 32, 32, device="cuda")
    pooled, indices = torch.nn.functional.max_pool2d(features, 2, return_indices=True)
    print(torch.nn.functional.max_unpool2d(pooled, indices, 2).shape)


@fault("deterministic_algorithms", batch="e", timeout=30)
def deterministic_adaptive_max_pool_backward():
    """A text CNN's global max pooling (AdaptiveMaxPool2d((1, 1))) trained under deterministic algorithms."""
    torch = _torch()
    torch.use_deterministic_algorithms(True)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.AdaptiveMaxPool2d((1, 1))).cuda()
    net(torch.randn(8, 1, 64, 300, device="cuda")).sum().backward()


# nccl_network

@fault("nccl_network", batch="e", timeout=40)
def rpc_tensorpipe_infiniband_transport_only():
    """torch.distributed.rpc limited to TensorPipe's InfiniBand transport (_transports=['ibv']), no RDMA device here."""
    import torch.distributed.rpc as rpc
    options = rpc.TensorPipeRpcBackendOptions(init_method="tcp://127.0.0.1:%d" % _port(), rpc_timeout=10,
                                              _transports=["ibv"])
    rpc.init_rpc("ps0", rank=0, world_size=1, rpc_backend_options=options)
    rpc.shutdown()


# cuda_fork

_SCRIPT_WITHOUT_MAIN_GUARD = '''
import torch
import torch.multiprocessing as mp

mp.set_start_method("spawn", force=True)  # the workers touch CUDA, so not fork
model = torch.nn.Linear(16, 1).cuda()
data = torch.utils.data.TensorDataset(torch.randn(64, 16))
loader = torch.utils.data.DataLoader(data, batch_size=16, num_workers=2, timeout=30)
for (batch,) in loader:
    print(model(batch.cuda()).sum().item())
'''


@fault("cuda_fork", batch="e", launcher="child", timeout=120)
def spawn_start_method_script_without_main_guard():
    """A training script switched to spawn for CUDA in its workers, its top level not under an `if __name__` guard."""
    import subprocess
    import tempfile
    path = os.path.join(tempfile.mkdtemp(), "train.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(_SCRIPT_WITHOUT_MAIN_GUARD)
    _relay(subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=110))


@fault("cuda_fork", batch="e", timeout=30)
def spawn_start_method_after_library_set_fork():
    """set_start_method('spawn') (for CUDA in workers) after an imported data library already set 'fork'."""
    import multiprocessing
    import torch.multiprocessing as mp
    torch = _torch()
    multiprocessing.set_start_method("fork")  # what the data library does at import
    model = torch.nn.Linear(8, 1).cuda()
    mp.set_start_method("spawn")
    print(model.weight.sum().item())


@fault("cuda_fork", batch="e", launcher="child", timeout=90)
def spawn_worker_defined_in_inline_script():
    """torch.multiprocessing.spawn of a worker function defined in a `python -c` script (spawn cannot import it)."""
    code = ("import torch, torch.multiprocessing as mp\n"
            "def evaluate(rank):\n"
            "    print('rank', rank, torch.ones(1, device='cuda').item(), flush=True)\n"
            "mp.spawn(evaluate, nprocs=2)\n")
    _relay(_child(code, timeout=80))


class _CupyNormalised:
    """A dataset that normalises each sample with CuPy (GPU augmentation in the workers)."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        import cupy
        x = cupy.arange(4096, dtype=cupy.float32) * (i + 1)
        return float(((x - x.mean()) / x.std()).sum())


@fault("cuda_fork", batch="e", timeout=60)
def cupy_dataset_in_forked_workers():
    """DataLoader workers (fork) running a CuPy normalisation after the main process already used CuPy."""
    import cupy
    torch = _torch()
    print("main: CuPy warm-up", float(cupy.arange(10).sum()), flush=True)
    loader = torch.utils.data.DataLoader(_CupyNormalised(), batch_size=4, num_workers=2, timeout=30)
    for batch in loader:
        print(batch)


# ddp_unused_parameters

@fault("ddp_unused_parameters", batch="e", timeout=45)
def ddp_static_graph_head_skipped_on_odd_steps():
    """DDP(static_graph=True) on a model whose auxiliary head runs on even steps only (an every-other-step loss)."""
    torch = _torch()
    _world("gloo")

    class WithAuxiliary(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = torch.nn.Linear(16, 16)
            self.head = torch.nn.Linear(16, 4)
            self.auxiliary = torch.nn.Linear(16, 4)

        def forward(self, x, with_auxiliary):
            h = torch.relu(self.trunk(x))
            return self.head(h).sum() + (self.auxiliary(h).sum() if with_auxiliary else 0)

    model = torch.nn.parallel.DistributedDataParallel(WithAuxiliary().cuda(), static_graph=True)
    for step in range(4):
        model(torch.randn(8, 16, device="cuda"), with_auxiliary=step % 2 == 0).backward()
        print("step %d" % step, flush=True)


# performance: advisories, the job goes on and exits 0

@fault("performance", batch="e", timeout=60)
def transformer_encoder_fast_path_off():
    """nn.TransformerEncoder built from batch_first=False layers: its nested-tensor fast path is turned off."""
    torch = _torch()
    layer = torch.nn.TransformerEncoderLayer(256, 8, 1024)
    encoder = torch.nn.TransformerEncoder(layer, 4).cuda().eval()
    with torch.inference_mode():
        print(encoder(torch.randn(128, 16, 256, device="cuda")).shape)


@fault("performance", batch="e", timeout=120)
def flex_attention_called_eagerly():
    """FlexAttention with a document mask called eagerly, not through torch.compile."""
    torch = _torch()
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    document = torch.arange(1024, device="cuda") // 256

    def same_document(b, h, q_idx, kv_idx):
        return document[q_idx] == document[kv_idx]

    mask = create_block_mask(same_document, 1, 1, 1024, 1024, device="cuda")
    q = torch.randn(1, 8, 1024, 64, device="cuda", dtype=torch.bfloat16)
    print(flex_attention(q, q, q, block_mask=mask).shape)


@fault("performance", batch="e", timeout=150, env={"TORCHINDUCTOR_COMPILE_THREADS": "1"})
def inductor_complex_rotary_embedding():
    """torch.compile of rotary embeddings written with complex multiplication (view_as_complex(x) * freqs_cis)."""
    torch = _torch()

    @torch.compile
    def rotate(x, freqs_cis):
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * freqs_cis).flatten(-2).type_as(x)

    positions = torch.arange(128, device="cuda").float()
    inverse = 1.0 / (10000 ** (torch.arange(0, 64, 2, device="cuda").float() / 64))
    freqs_cis = torch.polar(torch.ones(128, 32, device="cuda"), torch.outer(positions, inverse))
    print(rotate(torch.randn(4, 128, 64, device="cuda", dtype=torch.bfloat16), freqs_cis).shape)


def _list():
    for item in FAULTS.values():
        print(json.dumps({k: v for k, v in item.items() if k != "fn"}))


def main(argv):
    if argv[1:] == ["--list"]:
        _list()
        return
    if len(argv) != 2 or argv[1] not in FAULTS:
        sys.exit("usage: faults.py NAME | --list (%d faults)" % len(FAULTS))
    FAULTS[argv[1]]["fn"]()


if __name__ == "__main__":
    main(sys.argv)
