"""Batch e: each fault aimed at a final message no text of a to d printed, for a fifth blind holdout
(holdout-gpu-e).
Registered in FAULTS by importing this module (bench/faults/faults.py does); run through faults.py."""

import os
import sys
from datetime import timedelta

from faults_shared import (_child, _env_world, _fill_gpu, _memory_budget, _port, _ranks_as_children, _relay,
                           _retarget_locations, _saved_state, _torch, _torchrun_child, _trainer, _world, fault)


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
