"""Batch b: written after the first blind measurement, run once for a second blind holdout (holdout-gpu-b).
Registered in FAULTS by importing this module (bench/faults/faults.py does); run through faults.py."""

import os
from datetime import timedelta

from faults_shared import _Branchy, _checkpoint_on, _ddp_steps, _sync, _torch, _world, fault


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
