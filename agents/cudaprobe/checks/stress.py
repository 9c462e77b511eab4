"""L7 stress (burn-in, --mode burnin): sustained load near the power limit, memory patterns over most of each GPU's
free memory, and bitwise-identical results across repetitions and GPUs (silent data corruption).

Everything `full` runs comes first; these run last, on every GPU at once. The functions marked @gpu_task run in a
GPU worker; the judging of the sustained series lives in agents/cudaprobe/burnin.py.
"""

import hashlib
import os
import time

from agents.cudaprobe import activity, burnin, children, lifeline, proc
from agents.cudaprobe.checks.driver import XID_LINE
from agents.cudaprobe.checks.torch import cuda_device_count
from agents.cudaprobe.judge import Findings, all_ok, reference, task_failure
from agents.cudaprobe.model import skipped
from agents.cudaprobe.registry import check, gpu_task

STRESS_MODES = ("burnin",)
DEFAULT_BURNIN_S = 300
STRESS_BASE = ["cuda.context"]


# ---- on the GPU worker

def _own_gpu(torch):
    index = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(index)
    return index


def matmul_size(total_bytes):
    """n of the n x n bf16 matmul that holds a GPU at its power limit: 16384 (1.6 GB of operands) where it fits."""
    return 16384 if total_bytes >= 16 * 2**30 else 8192


@gpu_task
def gpu_sustained(args):
    """bf16 n^3 matmuls for `seconds`, throughput per ~1 s window (CUDA events), NVML sampled once a second."""
    import torch

    from agents.cudaprobe.sampler import Sampler

    seconds = float(args["seconds"])
    index = _own_gpu(torch)
    n = int(args.get("n") or matmul_size(torch.cuda.get_device_properties(index).total_memory))
    generator = torch.Generator(device="cuda:%d" % index).manual_seed(1234 + index)
    a = torch.randn(n, n, device=index, dtype=torch.bfloat16, generator=generator)
    b = torch.randn(n, n, device=index, dtype=torch.bfloat16, generator=generator)
    out = torch.empty(n, n, device=index, dtype=torch.bfloat16)
    flops = 2.0 * n ** 3
    sampler = Sampler(torch, index).start()
    windows = []
    try:
        torch.matmul(a, b, out=out)
        torch.cuda.synchronize(index)
        per_window = 1
        started = sampler.started
        while time.monotonic() - started < seconds:
            lifeline.exit_if_orphaned()  # each ~1 s window: no burn-in runs on for an agent that died
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(per_window):
                torch.matmul(a, b, out=out)
            end.record()
            end.synchronize()
            elapsed = begin.elapsed_time(end) / 1000.0
            windows.append({"t": round(time.monotonic() - started, 2), "tflops": round(
                flops * per_window / elapsed / 1e12, 1)})
            per_window = max(1, min(1000, int(per_window * 1.0 / max(elapsed, 1e-6))))  # ~1 s windows
    finally:
        sampler.stop()
        sampler.close()
    del a, b, out
    return {"gpus": [{"index": index, "n": n, "seconds": seconds, "windows": windows, "sampler": sampler.result()}]}


PATTERNS = ("walking_ones", "random", "address", "address_inverted")
COVERAGE_MIN = 0.5  # of the GPU's memory: a healthy idle H200's test covers 122 of 139.8 GiB
RESERVE_BYTES = 2 * 2**30  # left free beside the tested chunks for the compare's temporaries (a bool per word)


def _fill(torch, chunk, pattern, base, seed, bit=0):
    """Write `pattern` into the int32 `chunk` whose first word is word number `base` of the test's memory."""
    if pattern == "walking_ones":
        chunk.fill_(1 << bit if bit < 31 else -2 ** 31)
    elif pattern == "random":
        generator = torch.Generator(device=chunk.device).manual_seed(seed + base)
        chunk.random_(-2 ** 31, 2 ** 31 - 1, generator=generator)
    else:  # each word holds its own index (modulo 2^30, so the int32 never overflows)
        torch.arange(0, chunk.numel(), dtype=torch.int32, device=chunk.device, out=chunk)
        chunk.add_(base % 2 ** 30)
        if pattern == "address_inverted":
            chunk.bitwise_not_()


def pattern_passes(torch, chunks, passes, seed, scratch=None, mismatches=None):
    """Write then read back every pattern over `chunks` (int32 tensors), `passes` times; the mismatches, each
    {"pass", "pattern", "chunk", "word", "count", "found", "expected"} (at most 20 kept), appended to `mismatches`
    as they are found (so that an error later in the pass does not lose them)."""
    mismatches = [] if mismatches is None else mismatches
    for number in range(passes):
        for pattern in PATTERNS:
            bits = range(32) if pattern == "walking_ones" else (0,)
            for bit in bits:
                lifeline.exit_if_orphaned()  # between patterns: a pass over 120 GiB takes a minute
                base = 0
                for chunk in chunks:
                    _fill(torch, chunk, pattern, base, seed + number, bit)
                    base += chunk.numel()
                base = 0
                for position, chunk in enumerate(chunks):
                    if pattern == "walking_ones":  # a constant: compared without a second buffer
                        expected = torch.full((1,), 1 << bit if bit < 31 else -2 ** 31, dtype=chunk.dtype,
                                              device=chunk.device).expand(chunk.numel())
                    else:
                        expected = scratch[:chunk.numel()] if scratch is not None else torch.empty_like(chunk)
                        _fill(torch, expected, pattern, base, seed + number, bit)
                    wrong = chunk != expected
                    # any() reduces the bools as they are; sum() would first widen them to int64 (8 x the chunk)
                    count = int(wrong.count_nonzero()) if bool(wrong.any()) else 0
                    if count and len(mismatches) < 20:
                        # first and last wrong word by argmax (the first maximum) on the flags and their reverse:
                        # nonzero() would list every wrong word, 8 bytes each, and a chunk gone bad would not fit
                        flags = wrong.view(torch.uint8)
                        word = int(torch.argmax(flags))
                        last = chunk.numel() - 1 - int(torch.argmax(flags.flip(0)))
                        mismatches.append({"pass": number, "pattern": pattern if pattern != "walking_ones" else
                                           "walking_ones bit %d" % bit, "chunk": position, "word": base + word,
                                           "last_word": base + last, "count": count,
                                           "found": int(chunk[word]), "expected": int(expected[word])})
                    base += chunk.numel()
    return mismatches


@gpu_task
def gpu_memory_test(args):
    """Patterns over most of this GPU's free memory, re-allocated each pass (another process taking memory
    between passes shows as less coverage); ECC counters and the GPU's processes before and after."""
    import torch

    from agents.cudaprobe import sampler as nvml_sampler

    index = _own_gpu(torch)
    torch.cuda.empty_cache()  # what earlier checks left cached in this worker would count as used, and go untested
    chunk_words = int(args.get("chunk_mib", 1024)) * 2**20 // 4
    fraction = float(args.get("fraction", 0.9))
    passes = int(args.get("passes", 2))
    seed = int(args.get("seed", 20))
    nv = handle = None
    ecc_unread = None  # why ECC could not be read, said in the report rather than "unchanged"
    try:
        import pynvml as nv
        nv.nvmlInit()
        handle = nvml_sampler.gpu_handle(nv, torch, index)
    except Exception as exc:
        nv, ecc_unread = None, "NVML unavailable in the worker (%s: %s)" % (type(exc).__name__, str(exc)[:200])
    ecc_before = nvml_sampler.ecc_counts(nv, handle) if nv else (None, None)
    scratch = torch.empty(chunk_words, dtype=torch.int32, device=index)
    entry = {"index": index, "passes": [], "mismatches": [], "activity": {"before": activity.snapshot(torch, index)}}
    free_start, total = torch.cuda.mem_get_info(index)
    entry.update(free_gib_start=free_start / 2**30, total_gib=total / 2**30)
    target = int(free_start * fraction) // (chunk_words * 4)
    started = time.perf_counter()
    for number in range(passes):
        chunks, oom = [], None
        free_before = torch.cuda.mem_get_info(index)[0]
        for _ in range(target):
            if torch.cuda.mem_get_info(index)[0] < RESERVE_BYTES:  # the compare's temporaries need room
                oom = "less than %d GiB left free: another process holds memory" % (RESERVE_BYTES // 2**30)
                break
            try:
                chunks.append(torch.empty(chunk_words, dtype=torch.int32, device=index))
            except torch.cuda.OutOfMemoryError as exc:
                oom = str(exc).splitlines()[0][:300]
                break
        pass_started = time.perf_counter()
        found = []  # the mismatches seen before an out-of-memory stay found
        try:
            pattern_passes(torch, chunks, 1, seed + number, scratch, found)
        except torch.cuda.OutOfMemoryError as exc:  # memory taken while the pass ran: said, not a crash
            oom = "out of memory during the pass: " + str(exc).splitlines()[0][:400]
            entry["aborted"] = oom
        for m in found:
            m["pass"] = number
            m["byte_offset"] = m["word"] * 4
            m["byte_end"] = m["last_word"] * 4 + 4
        entry["mismatches"].extend(found[:20 - len(entry["mismatches"])])
        snap = activity.snapshot(torch, index)
        entry["passes"].append({"pass": number, "chunks": len(chunks), "target_chunks": target,
                                "gib": len(chunks) * chunk_words * 4 / 2**30, "free_gib_before": free_before / 2**30,
                                "oom": oom, "seconds": time.perf_counter() - pass_started, "activity": snap,
                                "used_mib_nvml": nvml_sampler._used_mib(nv, handle) if nv else None})
        del chunks
        torch.cuda.empty_cache()
        if entry.get("aborted"):
            break
    entry["seconds"] = time.perf_counter() - started
    entry["activity"]["after"] = activity.snapshot(torch, index)
    ecc_after = nvml_sampler.ecc_counts(nv, handle) if nv else (None, None)
    entry["ecc"] = {"before": list(ecc_before), "after": list(ecc_after)}
    if None in ecc_before + ecc_after:
        entry["ecc"]["unread"] = ecc_unread or "NVML gave no volatile ECC count (ECC disabled, or not supported)"
    if nv:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass
    return {"gpus": [entry]}


def digest(torch, tensor):
    """A 64-bit fingerprint of a tensor's bits, computed on its GPU (no copy of the whole result to the host):
    the words' sum and their position-weighted sum, wrapping in int64. Equal bits give equal digests; a flipped
    bit changes both sums."""
    flat = tensor.detach().contiguous().view(-1)
    words = flat.view(torch.int16 if flat.element_size() == 2 else torch.int32).to(torch.int64)
    weights = torch.arange(words.numel(), dtype=torch.int64, device=words.device) * 2654435761 + 97
    sums = torch.stack([words.sum(), (words * weights).sum()]).cpu().tolist()
    return hashlib.sha256(repr(sums).encode()).hexdigest()[:24]


def _training_step(torch, device, seed):
    """Three SGD steps of a small conv + linear net from a seeded start, with deterministic algorithms."""
    generator = torch.Generator().manual_seed(seed)
    conv = torch.nn.Conv2d(3, 16, 3, padding=1)
    head = torch.nn.Linear(16 * 16 * 16, 10)
    for p in list(conv.parameters()) + list(head.parameters()):
        with torch.no_grad():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
    model = torch.nn.Sequential(conv, torch.nn.ReLU(), torch.nn.Flatten(), head).to(device)
    data = torch.randn(64, 3, 16, 16, generator=generator).to(device)
    labels = torch.randint(0, 10, (64,), generator=generator).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(data), labels)
        loss.backward()
        optimizer.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


# Integer operands in [-KNOWN_RANGE, KNOWN_RANGE]: each product is at most 225 and a sum of KNOWN_K of them stays
# below 2^19, so every partial sum is an integer an fp32 accumulator holds exactly (to 2^24), in whatever order the
# kernel adds (split-K included); TF32 holds the operands exactly too (integers to 2^11). The GPU's answer must then
# equal, bit for bit, the same product computed in int64 on the CPU: a known answer, which a one-GPU host (nothing
# to compare with) and a fault that repeats itself (the same wrong bits every time) both need.
KNOWN_RANGE = 15
KNOWN_N, KNOWN_K = 2048, 2048  # 2048 x 2048 outputs: 256 tiles of 128 x 128, more than an H200's 132 SMs


def known_answer(torch, device, n, k, repeats, seed):
    """{"matmul_int_fp32": [run, ...], "matmul_int_tf32": [...]}: each run {"wrong": elements that differ from the
    exact answer} and, where some do, the first of them ({"row", "col", "found", "expected"})."""
    generator = torch.Generator().manual_seed(seed)
    a = torch.randint(-KNOWN_RANGE, KNOWN_RANGE + 1, (n, k), generator=generator, dtype=torch.int64)
    b = torch.randint(-KNOWN_RANGE, KNOWN_RANGE + 1, (k, n), generator=generator, dtype=torch.int64)
    expected = torch.matmul(a, b)  # int64 on the CPU: exact
    expected_bits = expected.to(torch.float32).view(torch.int32)  # exact too: every value is below 2^24
    found_runs = {}
    for name, tf32 in (("matmul_int_fp32", False), ("matmul_int_tf32", True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        gpu_a, gpu_b = a.to(device, torch.float32), b.to(device, torch.float32)
        runs = []
        for _ in range(repeats):
            found = torch.matmul(gpu_a, gpu_b).cpu() + 0.0  # + 0.0: a sum of -0.0 products is zero, as int64's
            wrong = (found.view(torch.int32) != expected_bits).view(-1)
            run = {"wrong": int(wrong.sum())}
            if run["wrong"]:
                first = int(torch.argmax(wrong.to(torch.uint8)))
                run["first"] = {"row": first // n, "col": first % n, "found": float(found.view(-1)[first]),
                                "expected": int(expected.view(-1)[first])}
            runs.append(run)
        found_runs[name] = runs
        del gpu_a, gpu_b
    torch.backends.cuda.matmul.allow_tf32 = False
    return found_runs


@gpu_task
def gpu_consistency(args):
    """The same seeded matmuls (bf16, fp16, TF32, fp32) and training steps, `repeats` times: a digest of each; and
    integer matmuls whose exact answer is known, each compared with it (known_answer)."""
    import torch

    index = _own_gpu(torch)
    n, repeats = int(args.get("n", 4096)), int(args.get("repeats", 5))
    torch.use_deterministic_algorithms(True, warn_only=True)  # an op without a deterministic kernel warns
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    generator = torch.Generator().manual_seed(int(args.get("seed", 7)))
    a_cpu = torch.randn(n, n, generator=generator)
    b_cpu = torch.randn(n, n, generator=generator)
    entry = {"index": index, "digests": {}, "name": torch.cuda.get_device_name(index),
             "sm_count": torch.cuda.get_device_properties(index).multi_processor_count}
    for name, dtype, tf32 in (("bf16", torch.bfloat16, False), ("fp16", torch.float16, False),
                              ("tf32", torch.float32, True), ("fp32", torch.float32, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a, b = a_cpu.to(index, dtype), b_cpu.to(index, dtype)
        entry["digests"]["matmul_" + name] = [digest(torch, a @ b) for _ in range(repeats)]
        del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    entry["digests"]["training_step"] = [digest(torch, _training_step(torch, index, 11))
                                         for _ in range(max(2, repeats // 2))]
    entry["known_answer"] = known_answer(torch, index, int(args.get("known_n", KNOWN_N)),
                                         int(args.get("known_k", KNOWN_K)), max(2, repeats // 2),
                                         int(args.get("seed", 7)))
    return {"gpus": [entry]}


# ---- in the agent

def burnin_seconds(ctx):
    return int(ctx.options.get("burnin_seconds") or DEFAULT_BURNIN_S)


def _ranks(ctx):
    return list(range(cuda_device_count(ctx)))


def _merged(outcomes):
    return sorted((entry for o in outcomes for entry in o.result["gpus"]), key=lambda g: g["index"])


def _no_gpu(ctx):
    if not _ranks(ctx):
        return skipped("torch sees no GPU: the burn-in needs one")
    return None


def kernel_xids(ctx):
    """The kernel log's Xid lines now, or None where the log cannot be read (why: ctx.facts["kernel_log_unread"])."""
    result = proc.run(["dmesg"], 10, env=ctx.environ)
    if result.missing or not result.ok:
        ctx.facts["kernel_log_unread"] = "dmesg not found" if result.missing else "dmesg %s: %s" % (
            "timed out" if result.timed_out else "exit %s" % result.returncode, result.combined()[:160] or "no output")
        return None
    return [line for line in result.stdout.splitlines() if XID_LINE.search(line)]


def new_lines(before, after):
    """The lines of `after` that `before` did not hold (each line counted as often as it occurs)."""
    if before is None or after is None:
        return []
    left = {}
    for line in before:
        left[line] = left.get(line, 0) + 1
    fresh = []
    for line in after:
        if left.get(line):
            left[line] -= 1
        else:
            fresh.append(line)
    return fresh


@check("stress.sustained", "L7", "Sustained load near the power limit, NVML sampled each second",
       requires=STRESS_BASE, modes=STRESS_MODES, budget_s=DEFAULT_BURNIN_S + 120)
def stress_sustained(ctx):
    absent = _no_gpu(ctx)
    if absent:
        return absent
    children.end_trainers(ctx)  # training is over: its workers' contexts and cached memory must not be on the GPUs
    seconds = burnin_seconds(ctx)
    before = kernel_xids(ctx)  # driver.xid read the log before the load: an Xid under it shows only here or in NVML
    outcomes = children.run_each(ctx, gpu_sustained, _ranks(ctx), {"seconds": seconds}, timeout=seconds + 120)
    after = kernel_xids(ctx) if before is not None else None
    if not all_ok(outcomes):
        failure = task_failure(outcomes, "sustained load", "stress_failed")
        fresh = new_lines(before, after)
        if fresh:  # what the driver said while the load died
            failure.summary += "; Xid in the kernel log during the load: %s" % fresh[0].strip()[:300]
            failure.signatures = list(failure.signatures) + ["xid_under_load"]
        return failure
    gpus = _merged(outcomes)
    sku, model = reference(ctx)
    findings, metrics = burnin.judge_sustained(gpus, sku, children.our_pids(ctx))
    if not any(g["sampler"].get("xids") for g in gpus):  # NVML delivered none (or no events here): the kernel log
        for line in new_lines(before, after)[:10]:
            findings.add("fail", "Xid in the kernel log during the burn-in: %s" % line.strip()[:300], "xid_under_load")
    log_unread = None if before is not None and after is not None else (
        ctx.facts.get("kernel_log_unread") or "dmesg gave no log")
    burnin.judge_xid_watch(findings, gpus, log_unread)
    metrics["burnin_seconds"] = seconds
    if sku is None:
        findings.add("pass", "no reference for %s: judged on its own series and its siblings" % model,
                     "no_reference_for_model")
    for g in gpus:
        info = g["sampler"].get("info") or {}
        findings.note("GPU %s: %dx%d bf16, %d windows, %d NVML samples; power limit %s W, max SM clock %s MHz" % (
            g["index"], g["n"], g["n"], len(g["windows"]), len(g["sampler"]["samples"]),
            info.get("power_limit_w"), info.get("max_sm_mhz")))
    summary = "%d GPU(s) %d s under bf16 load: %.0f TFLOP/s sustained (worst GPU)" % (
        len(gpus), seconds, metrics["sustained_bf16_tflops"])
    # each NVML reading only where the GPU gives it (some report clocks but no power or temperature)
    for key, text in (("sm_mhz_median", "SM %d MHz"), ("power_w_median", "%.0f W"), ("temp_gpu_max_c", "up to %d C")):
        if key in metrics:
            summary += ", " + text % metrics[key]
    outcome = findings.outcome(summary, metrics=metrics)
    outcome.details = {"series": {"gpus": {str(g["index"]): burnin.downsample(g) for g in gpus}}}
    return outcome


@check("stress.memory_test", "L7", "Write/verify patterns over most of each GPU's free memory",
       requires=STRESS_BASE, modes=STRESS_MODES, budget_s=600)
def stress_memory_test(ctx):
    absent = _no_gpu(ctx)
    if absent:
        return absent
    children.end_trainers(ctx)  # training is over: its workers' contexts and cached memory must not be on the GPUs
    passes = int(ctx.environ.get("CUDAPROBE_MEMTEST_PASSES") or 2)
    outcomes = children.run_each(ctx, gpu_memory_test, _ranks(ctx), {"passes": passes, "fraction": 0.9})
    if not all_ok(outcomes):
        return task_failure(outcomes, "memory test", "memory_test_failed")
    return judge_memory_test(ctx, _merged(outcomes))


def judge_memory_test(ctx, gpus):
    findings, metrics = Findings(), {}
    ours = children.our_pids(ctx)
    for g in gpus:
        label = "GPU %s" % g["index"]
        tested = [p["gib"] for p in g["passes"]]
        metrics["tested_gib.gpu%s" % g["index"]] = round(min(tested), 2)
        metrics["seconds.gpu%s" % g["index"]] = round(g["seconds"], 2)
        findings.note("%s: %d pass(es) of %s over %s GiB of %.1f GiB free (%.1f total), %.1f s" % (
            label, len(g["passes"]), "/".join(PATTERNS), "/".join("%.1f" % t for t in tested),
            g["free_gib_start"], g["total_gib"], g["seconds"]))
        for m in g["mismatches"]:
            findings.add("fail", "%s: %d word(s) read back wrong in pass %d, %s, bytes 0x%x-0x%x of the tested "
                         "memory (first 0x%08x, expected 0x%08x)" % (
                             label, m["count"], m["pass"], m["pattern"], m["byte_offset"], m["byte_end"],
                             m["found"] & 0xFFFFFFFF, m["expected"] & 0xFFFFFFFF), "memory_test_mismatch")
        before, after = g["ecc"]["before"], g["ecc"]["after"]
        for position, (what, status, signature) in enumerate((
                ("correctable", "warn", "ecc_corrected_under_load"),
                ("uncorrectable", "fail", "ecc_uncorrected_under_load"))):
            if before[position] is not None and after[position] is not None and after[position] > before[position]:
                findings.add(status, "%s: %d new %s ECC errors during the memory test" % (
                    label, after[position] - before[position], what), signature)
        snaps = [g["activity"].get("before"), g["activity"].get("after")] + [p.get("activity") for p in g["passes"]]
        others = set()
        for snap in snaps:
            if snap and snap.get("pids"):
                pids = set(snap["pids"])
                mine = ours | {snap.get("self")}
                others |= (pids - mine) if pids & mine else (pids if len(pids) > 1 else set())
        shrunk = [p for p in g["passes"] if p["chunks"] < 0.9 * p["target_chunks"] or
                  (p.get("oom") or "").startswith("out of memory during the pass")]
        if others or shrunk:
            detail = []
            if others:
                detail.append("process %s on it" % ", ".join(map(str, sorted(others))))
            if shrunk:
                detail.append("pass %s covered %s of the %.1f GiB planned (%s)" % (
                    ",".join(str(p["pass"]) for p in shrunk), "/".join("%.1f GiB" % p["gib"] for p in shrunk),
                    g["passes"][0]["target_chunks"] * 1.0, shrunk[0]["oom"] or "free memory fell"))
            findings.add("warn", "%s: memory was taken by another process during the memory test (%s): the memory "
                         "it held was not tested, re-run when idle" % (label, "; ".join(detail)),
                         "memory_taken_during_test")
        elif min(tested) < COVERAGE_MIN * g["total_gib"]:  # held from the start by something NVML does not show
            findings.add("warn", "%s: the memory test covered %.1f of the GPU's %.1f GiB (%.1f GiB were free when it "
                         "began, no other process seen): the rest was not tested" % (
                             label, min(tested), g["total_gib"], g["free_gib_start"]), "memory_test_coverage_low")
    metrics["tested_gib"] = min(v for k, v in metrics.items() if k.startswith("tested_gib."))
    return findings.outcome("%d GPU(s): no mismatch over %.1f GiB each (worst GPU), %s" % (
        len(gpus), metrics["tested_gib"], _ecc_said(gpus)), metrics=metrics)


def _ecc_said(gpus):
    """"ECC unchanged" only where both ECC counts were read before and after the test; elsewhere not read, and why."""
    unread = {}
    for g in gpus:
        if None in g["ecc"]["before"] + g["ecc"]["after"]:
            unread.setdefault(g["ecc"].get("unread") or "no ECC count recorded", []).append(str(g["index"]))
    if not unread:
        return "ECC unchanged"
    said = "; ".join("ECC not read on GPU %s: %s" % (", ".join(indices), why) for why, indices in unread.items())
    read = [str(g["index"]) for g in gpus if None not in g["ecc"]["before"] + g["ecc"]["after"]]
    return ("ECC unchanged on GPU %s; " % ", ".join(read) if read else "") + said


@check("stress.consistency", "L7", "Bitwise-identical results across repetitions and GPUs (silent data corruption)",
       requires=STRESS_BASE, modes=STRESS_MODES, budget_s=180)
def stress_consistency(ctx):
    absent = _no_gpu(ctx)
    if absent:
        return absent
    children.end_trainers(ctx)  # training is over: its workers' contexts and cached memory must not be on the GPUs
    # deterministic cuBLAS needs its workspace fixed before the first cuBLAS call: workers of their own
    env = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    pool = children._own_pool(ctx, env)
    try:
        outcomes = pool.call(gpu_consistency, {"n": 4096, "repeats": 5}, _ranks(ctx), ctx.budget_s)
    finally:
        pool.remove()
    if not all_ok(outcomes):
        return task_failure(outcomes, "consistency test", "consistency_failed")
    return judge_consistency(_merged(outcomes))


def judge_consistency(gpus):
    """Every repetition on one GPU equal, and each computation equal across GPUs of the same model and size."""
    findings, metrics = Findings(), {"gpus": len(gpus)}
    for g in gpus:
        for name, digests in sorted(g["digests"].items()):
            if len(set(digests)) > 1:
                findings.add("fail", "GPU %s: %s gave %d different results over %d identical repetitions" % (
                    g["index"], name, len(set(digests)), len(digests)), "silent_data_corruption")
    for g in gpus:
        for name, runs in sorted((g.get("known_answer") or {}).items()):
            wrong = [r for r in runs if r["wrong"]]
            if wrong:
                first = wrong[0]["first"]
                findings.add("fail", "GPU %s: %s gave a wrong answer in %d of %d runs (%d element(s) differ from the "
                             "exact integer product computed on the CPU; first at [%d, %d]: %s, expected %d)" % (
                                 g["index"], name, len(wrong), len(runs), wrong[0]["wrong"], first["row"],
                                 first["col"], _number(first["found"]), first["expected"]), "silent_data_corruption")
    groups = {}
    for g in gpus:
        groups.setdefault((g["name"], g["sm_count"]), []).append(g)
    for (model, _), members in sorted(groups.items()):
        if len(members) < 2:
            continue
        for name in sorted(members[0]["digests"]):
            votes = {}
            for g in members:
                votes.setdefault(g["digests"][name][0], []).append(g["index"])
            if len(votes) > 1:
                majority = max(votes.values(), key=len)
                odd = sorted(i for group in votes.values() if group is not majority for i in group)
                who = odd if len(majority) > len(members) / 2 else sorted(g["index"] for g in members)
                findings.add("fail", "GPU %s: %s differs bitwise from the other %s GPUs' result" % (
                    who, name, model), "silent_data_corruption")
    computations = sorted(gpus[0]["digests"]) if gpus else []
    for g in gpus:
        findings.note("GPU %s (%s): %s" % (g["index"], g["name"], ", ".join(
            "%s %s" % (name, g["digests"][name][0][:12]) for name in computations)))
    metrics["computations"] = len(computations)
    known = min((len(g.get("known_answer") or {}) for g in gpus), default=0)
    metrics["known_answers"] = known
    summary = "%d GPU(s): %d computations bitwise identical across repetitions%s" % (
        len(gpus), len(computations), " and GPUs" if len(gpus) > 1 else "")
    without = [str(g["index"]) for g in gpus if not g.get("known_answer")]
    if without:  # a result from before the known answer (a replayed record): said, never implied
        summary += "; no known-answer computation on GPU %s" % ", ".join(without)
    else:
        summary += "; %d integer matmuls equal to their exact answer, bit for bit" % known
    return findings.outcome(summary, metrics=metrics)


def _number(value):
    return "%d" % value if float(value).is_integer() else repr(value)


