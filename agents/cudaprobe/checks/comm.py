"""L5: communication: gloo and NCCL all-reduce across local processes, and a cross-node pair.

gpu_allreduce runs in one worker per rank (worker.py); the checks judge what the ranks return.
"""

import inspect
import os
import re
import time

from agents.cudaprobe import activity, children, sysfs
from agents.cudaprobe.checks.torch import cuda_device_count, torch_info, torch_too_old
from agents.cudaprobe import expectations
from agents.cudaprobe.checks.advice import nccl_settings
from agents.cudaprobe.judge import Findings, all_ok, busy_gpus, judge_per_gpu, mark_busy, reference, task_failure
from agents.cudaprobe.model import failed, passed, skipped
from agents.cudaprobe.registry import check, gpu_task

TRANSPORT = re.compile(r"via (P2P/[A-Za-z/]+|SHM(?:/[A-Za-z]+)?|NET/[A-Za-z]+(?:/\d+)?|COLLNET\S*)")
LATENCY_MIB = 1 / 256  # 4 KiB
MIN_TORCH = (2, 2)  # the oldest torch these NCCL and training checks are made for
NCCL_SIZES = {"standard": [1, 64, 1024], "full": [1, 8, 64, 256, 1024, 4096]}



# ---- on the GPU workers, one per rank

def init_group(torch, backend, args):
    """Join the process group of this rank (RANK, LOCAL_RANK from the pool) at args["master"]."""
    import datetime

    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(args["world"])
    addr, port = args["master"]
    kwargs = {"backend": backend, "rank": rank, "world_size": world, "init_method": "tcp://%s:%s" % (addr, port),
              "timeout": datetime.timedelta(seconds=args.get("timeout_s", 60))}
    if backend == "nccl":
        # The device is chosen before the group exists, so NCCL binds each rank to its own GPU.
        local = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local)
        if "device_id" in inspect.signature(dist.init_process_group).parameters:  # torch 2.3 and newer
            kwargs["device_id"] = torch.device("cuda", local)
    started = time.perf_counter()
    if rank != 0:
        _await_master(addr, int(port), started + args.get("timeout_s", 60))
    dist.init_process_group(**kwargs)
    return dist, rank, world, time.perf_counter() - started


def _await_master(addr, port, deadline):
    """Wait until rank 0's store listens. Every rank gets its task at the same moment, and a rank that reaches the
    store before it listens is refused and retries only after torch's connect backoff (our reading of the 0.7-1.8 s
    gloo_init_s of some H200 runs, where others took 0.03 s): waiting here in 5 ms steps joins as soon as the store
    is up. Past the deadline init_process_group is left to fail in its own words."""
    import socket

    while time.perf_counter() < deadline:
        try:
            socket.create_connection((addr, port), timeout=1.0).close()
            return
        except OSError:
            time.sleep(0.005)


@gpu_task
def gpu_allreduce(args):
    """All-reduce correctness and bandwidth; busbw = algbw * 2(n-1)/n as nccl-tests defines it."""
    import torch

    task_started = time.perf_counter()
    backend = args.get("backend", "nccl")
    dist, rank, world, init_s = init_group(torch, backend, args)
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    before = activity.snapshot(torch, device.index) if backend == "nccl" else None
    expected = world * (world + 1) / 2
    results = []
    correct = True
    try:
        for mib in args.get("sizes_mib", [4]):
            count = int(mib * 2**20 // 4)
            tensor = torch.full((count,), float(rank + 1), device=device)
            dist.all_reduce(tensor)
            correct = correct and bool((tensor[:1024] == expected).all()) and bool((tensor[-1024:] == expected).all())
            iters = max(3, min(40, int(2 * 2**30 / (mib * 2**20))))
            if backend != "nccl":
                iters = min(iters, 10)
            for _ in range(2):
                dist.all_reduce(tensor)
            dist.barrier()
            if backend == "nccl":
                torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(tensor)
            if backend == "nccl":
                torch.cuda.synchronize()
            seconds = (time.perf_counter() - started) / iters
            algbw = mib * 2**20 / seconds / 1e9
            results.append({"MiB": mib, "time_us": seconds * 1e6, "algbw_gbs": algbw,
                            "busbw_gbs": algbw * 2 * (world - 1) / world})
            del tensor
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return {"rank": rank, "world": world, "backend": backend, "init_s": init_s, "correct": correct,
            "sizes": results, "index": device.index,
            "activity": {"before": before, "after": activity.snapshot(torch, device.index) if before else None},
            "timing": {"setup_s": init_s, "measured_s": time.perf_counter() - task_started - init_s}}


# ---- in the agent
def transports_in(log):
    """Transports NCCL chose, from its NCCL_DEBUG=INFO channel lines (P2P/CUMEM, SHM, NET/Socket, NET/IB...)."""
    return sorted({"/".join(match.group(1).split("/")[:2]) for match in TRANSPORT.finditer(log or "")})


def _master(ctx):
    port = ctx.options.get("master_port")
    return ("127.0.0.1", int(port)) if port else None


@check("comm.gloo", "L5", "gloo all-reduce between two local processes", requires=["torch.import"],
       modes=("standard", "full"), budget_s=60)
def comm_gloo(ctx):
    outcomes = children.run_ranks(ctx, gpu_allreduce, 2, {"backend": "gloo", "sizes_mib": [4], "timeout_s": 30},
                                  master=_master(ctx))
    if not all_ok(outcomes):
        return task_failure(outcomes, "gloo all-reduce", "gloo_failed", "gloo_hang")
    result = outcomes[0].result
    size = result["sizes"][0]
    metrics = {"gloo_4mib_ms": round(size["time_us"] / 1000, 3), "gloo_init_s": round(result["init_s"], 3)}
    if not all(o.result["correct"] for o in outcomes):
        return failed("gloo all-reduce returned a wrong sum", metrics=metrics, signatures=["allreduce_wrong_result"])
    return passed("gloo all-reduce of 4 MiB correct, %.2f ms" % metrics["gloo_4mib_ms"], metrics=metrics)


@check("comm.nccl", "L5", "NCCL all-reduce across all local GPUs", requires=["cuda.context"],
       modes=("standard", "full"), budget_s=180)
def comm_nccl(ctx):
    world = cuda_device_count(ctx)
    if world < 2:
        return skipped("one GPU: NCCL all-reduce needs two local ranks (use a cross-node pair)")
    too_old = torch_too_old(ctx, MIN_TORCH)
    if too_old:
        return too_old
    sizes = NCCL_SIZES[ctx.mode]
    outcomes = children.run_ranks(ctx, gpu_allreduce, world, {"backend": "nccl", "sizes_mib": sizes, "timeout_s": 60},
                                  master=_master(ctx))
    log = "\n".join(o.log for o in outcomes)
    transports = transports_in(log)
    if not all_ok(outcomes):
        return task_failure(outcomes, "NCCL all-reduce over %d GPUs" % world, "nccl_failed", "nccl_hang")
    result = outcomes[0].result
    metrics = {"nccl_init_s": round(result["init_s"], 3), "nccl_world": world}
    lines = []
    for size in result["sizes"]:
        metrics["nccl_busbw_gbs.%dmib" % size["MiB"]] = round(size["busbw_gbs"], 1)
        lines.append("%6d MiB  %10.1f us  algbw %7.1f GB/s  busbw %7.1f GB/s" % (
            size["MiB"], size["time_us"], size["algbw_gbs"], size["busbw_gbs"]))
    largest = result["sizes"][-1]
    metrics["nccl_busbw_gbs"] = round(max(s["busbw_gbs"] for s in result["sizes"]), 1)
    channel_lines = [line for line in log.splitlines() if " via " in line][:8]
    evidence = "\n".join(lines + ["transports: %s" % (", ".join(transports) or "not reported")] + channel_lines)
    ctx.facts["nccl_transports"] = transports
    if not all(o.result["correct"] for o in outcomes):
        return failed("NCCL all-reduce returned a wrong sum", evidence=evidence, metrics=metrics,
                      signatures=["allreduce_wrong_result"])
    findings = Findings()
    links = gpu_links(ctx, world)
    joined = sorted(set(links.values()))
    if links and all(kind.startswith("NV") for kind in joined) and transports \
            and not any(t.startswith("P2P") for t in transports):
        findings.add("fail", "the GPUs are joined by NVLink (%s) but NCCL went via %s: peer-to-peer is off (%s)" % (
            ", ".join(joined), ", ".join(transports), p2p_off_causes(ctx)), "nccl_p2p_not_used")
    elif transports and all(t.startswith("NET") for t in transports):
        findings.add("warn", "GPUs of one host talk over the network stack (P2P and SHM unavailable or disabled)",
                     "nccl_transport_network")
    sku, model = reference(ctx)
    at_1gib = next((s["busbw_gbs"] for s in result["sizes"] if s["MiB"] == 1024), None)
    busy = busy_gpus(ctx, [o.result for o in outcomes], involved=range(world))
    mark_busy(findings, ctx, busy, "NCCL measurement")
    if busy:
        pass  # the busbw of a ring through a busy GPU says nothing about the links
    elif at_1gib is not None and sku is not None and links:
        expected = expectations.expected_busbw(sku, list(links.values()))
        judge_per_gpu(findings, ctx, "busbw at 1 GiB", {"0-%d" % (world - 1): at_1gib}, expected, "GB/s",
                      "nccl_busbw_low")
    elif sku is None:
        findings.add("pass", "no reference for %s: busbw not judged" % model, "no_reference_for_model")
    summary = "busbw %.0f GB/s at %d MiB over %d GPUs via %s" % (
        largest["busbw_gbs"], largest["MiB"], world, ", ".join(transports) or "an unreported transport")
    return findings.outcome(summary, evidence, metrics)


def gpu_links(ctx, world):
    """{"i-j": kind} between the first `world` GPUs torch uses, from driver.topology (empty when unknown).
    CUDA_VISIBLE_DEVICES with indices maps torch's GPUs to the driver's; with UUIDs the map is unknown."""
    links = (ctx.facts.get("topology") or {}).get("links") or {}
    visible = ctx.facts.get("visible_devices")
    if visible is None:
        driver_index = list(range(world))
    elif all(v.isdigit() for v in visible):
        driver_index = [int(v) for v in visible][:world]
    else:
        return {}
    found = {}
    for a in range(len(driver_index)):
        for b in range(a + 1, len(driver_index)):
            pair = "%d-%d" % tuple(sorted((driver_index[a], driver_index[b])))
            if pair in links:
                found[pair] = links[pair]
    return found


def p2p_off_causes(ctx):
    """Why NCCL may not use P2P here: the settings found in the environment and NCCL's conf files first."""
    found = [s for s in nccl_settings(ctx) if s["name"] in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL") and s["effect"]]
    named = ["%s=%s from %s" % (s["name"], s["value"], s["source"]) for s in found]
    return "; ".join(named + ["else: ACS or the IOMMU blocking peer access, or a container without IPC "
                              "(--ipc=host) / a shared PID namespace"])


@check("comm.peer", "L5", "All-reduce with a peer node (cross-node pair)", requires=["torch.import"], budget_s=120)
def comm_peer(ctx):
    role = ctx.options.get("peer_role")
    addr, port = ctx.options["master"]
    rank = ctx.options.get("peer_rank", 0 if role == "rank0" else 1)
    world = ctx.options.get("peer_world", 2)  # --world N --rank k: one collective over N nodes
    timeout = float(ctx.options.get("peer_timeout", 60))
    backends = ["gloo"] + (["nccl"] if torch_info(ctx).result.get("is_available") else [])
    metrics, lines = {}, []
    for offset, backend in enumerate(backends):
        outcomes = children.run_ranks(
            ctx, gpu_allreduce, world, {"backend": backend, "timeout_s": timeout,
                                  "sizes_mib": [LATENCY_MIB, 4, 256] if backend == "nccl" else [LATENCY_MIB, 4]},
            timeout=timeout + 15, master=(addr, int(port) + offset), ranks=[rank], env={"LOCAL_RANK": "0"})
        if any(o.timed_out for o in outcomes) or any(
                o.error and ("timeout" in o.result.get("message", "").lower()
                           or "timed out" in o.result.get("message", "").lower()) for o in outcomes):
            return failed("no answer from the peer at %s:%s within %.0f s (%s)" % (addr, int(port) + offset,
                          timeout, backend), evidence="\n".join(o.evidence() for o in outcomes),
                          signatures=["peer_timeout", "rendezvous_timeout"])
        if not all_ok(outcomes):
            return task_failure(outcomes, "%s all-reduce with the peer" % backend,
                                "nccl_network" if backend == "nccl" else "gloo_failed", "peer_timeout")
        if not all(o.result.get("correct", True) for o in outcomes):
            return failed("%s all-reduce over %d nodes returned a wrong sum" % (backend, world),
                          evidence="\n".join(lines), metrics=metrics, signatures=["allreduce_wrong_result"])
        for size in outcomes[0].result["sizes"]:
            if size["MiB"] == LATENCY_MIB:  # 4 KiB: the round trip, not the bandwidth
                metrics["peer_%s_latency_us" % backend] = round(size["time_us"], 1)
                lines.append("%s 4 KiB: %.1f us" % (backend, size["time_us"]))
                continue
            metrics["peer_%s_busbw_gbs.%dmib" % (backend, size["MiB"])] = round(size["busbw_gbs"], 2)
            lines.append("%s %d MiB: %.1f us, busbw %.2f GB/s" % (backend, size["MiB"], size["time_us"],
                                                                 size["busbw_gbs"]))
        if backend == "nccl":
            lines.append("transports: %s" % ", ".join(transports_in(outcomes[0].log)))
    metrics["peer_world"] = world
    interface = ctx.environ.get("GLOO_SOCKET_IFNAME")
    speed = sysfs.netdev(sysfs.root(ctx.environ), interface)["speed_mbps"] if interface else None
    if speed:  # what the link allows: the dashboard judges the collective's busbw against the slowest
        metrics["peer_link_speed_mbps"] = speed
    return passed("all-reduce with the peer%s at %s correct over %s" % (
        "s (rank %d of %d)" % (rank, world) if world > 2 else "", addr, ", ".join(backends)),
        evidence="\n".join(lines), metrics=metrics)
