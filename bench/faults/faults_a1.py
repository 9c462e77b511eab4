"""Batch a (the first corpus): out-of-range indices and device-side asserts, invalid ordinals and hidden devices,
allocator settings refused, out of memory of each kind, NaN and inf.
Registered in FAULTS by importing this module (bench/faults/faults.py does); run through faults.py."""

import os
import sys

from faults_shared import _env_world, _fill_gpu, _sync, _torch, _world, fault


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
        "import sys; sys.path.insert(0, %r); import faults_shared; b = faults_shared._fill_gpu(leave_mib=1); "
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
