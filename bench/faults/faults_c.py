"""Batch c: mechanisms and API paths of neither a nor b, for a third blind holdout (holdout-gpu-c).
Registered in FAULTS by importing this module (bench/faults/faults.py does); run through faults.py."""

import os
import sys
from datetime import timedelta

from faults_shared import (_Branchy, _ddp_steps, _env_world, _memory_budget, _nccl_one_rank, _port,
                           _ranks_as_children, _relay, _retarget_locations, _torch, _torchrun_child, _world, fault)


# ---- batch c: written for a third blind holdout (holdout-gpu-c), categories set before it ran -----------------


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
