"""Batch a (the first corpus): collectives (mismatches, timeouts, desyncs), rendezvous, NCCL and transport errors,
device mismatches, checkpoints onto a missing GPU.
Registered in FAULTS by importing this module (bench/faults/faults.py does); run through faults.py."""

import os
import sys
from datetime import timedelta

from faults_shared import _checkpoint_on, _env_world, _port, _sync, _torch, _world, fault


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
