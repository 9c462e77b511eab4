"""Batch d, first half (oom to amp_numerics): each fault aimed at a final message no text of a, b or c printed, for a
fourth blind holdout (holdout-gpu-d).
Registered in FAULTS by importing this module (bench/faults/faults.py does); run through faults.py."""

from faults_shared import _torch, fault


# ---- batch d: written for a fourth blind holdout (holdout-gpu-d), categories set before it ran ----------------
# Each fault of batch d aims at a final message that no text of batches a, b, c printed (not only a new mechanism).


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
