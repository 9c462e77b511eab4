"""Batch a (the first corpus): CUDA in a forked DataLoader worker, DDP and unused parameters, cuBLAS / cuDNN /
cuFFT status errors, deterministic algorithms, performance advice the stack prints.
Registered in FAULTS by importing this module (bench/faults/faults.py does); run through faults.py."""

import os

from faults_shared import _Branchy, _ddp_steps, _env_world, _torch, fault


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
