"""The fault registry every batch writes into (FAULTS, @fault) and the bodies the batches share: torch and a
process group made lazily, the GPU filled, children run and relayed, the small models and trainers several
faults train. Imports nothing of the batches."""

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


def _memory_budget(gib):
    """This process's memory fraction set so that it may hold about `gib` GiB (the GPU's other users unaffected)."""
    torch = _torch()
    _, total = torch.cuda.mem_get_info()
    torch.cuda.set_per_process_memory_fraction(gib * (1 << 30) / total)


def _nccl_one_rank():
    torch = _torch()
    torch.cuda.set_device(0)
    dist = _world("nccl", timeout=timedelta(seconds=15), device_id=torch.device("cuda", 0))
    x = torch.ones(4, device="cuda")
    dist.all_reduce(x)
    _sync()
    print(x.sum().item())


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


def _saved_state():
    import tempfile
    torch = _torch()
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    torch.save({"model": torch.nn.Linear(4, 4).state_dict(), "step": 10}, path)
    return path
