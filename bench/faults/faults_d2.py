"""Batch d, second half (rendezvous to the performance advisories), for the fourth blind holdout (holdout-gpu-d).
Registered in FAULTS by importing this module (bench/faults/faults.py does); run through faults.py."""

import os
import sys
from datetime import timedelta

from faults_shared import (_child, _env_world, _lightning_module, _nccl_one_rank, _port, _relay, _retarget_locations,
                           _saved_state, _torch, _torchrun_child, _trainer, fault)


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
