"""Facts pulled out of an error text (sizes, GPU, rank, op, timeout) and the OOM kinds they point to."""

from cudaweb.common import numbers
from cudaweb.playbooks import linear

UNITS = {"B": 1 / 2**30, "bytes": 1 / 2**30, "KiB": 1 / 2**20, "MiB": 1 / 1024, "GiB": 1.0, "TiB": 1024.0}
SIZE = r"([0-9]{1,12}(?:\.[0-9]{1,6})?) (bytes|B|KiB|MiB|GiB|TiB)"
PATTERNS = {
    "tried_gib": r"Tried to allocate " + SIZE,
    "total_gib": r"total capac(?:i)?ty of " + SIZE + r"|; " + SIZE + r" total capacity",
    "free_gib": r"of which " + SIZE + r" is free|; " + SIZE + r" free;",
    "process_in_use_gib": r"this process has " + SIZE + r" memory in use",
    "allocated_gib": r"Of the allocated memory " + SIZE + r" is allocated by PyTorch|; " + SIZE + r" already allocated",
    "reserved_unallocated_gib": SIZE + r" is reserved by PyTorch but unallocated",
    "reserved_total_gib": SIZE + r" reserved in total by PyTorch",
}
OTHER = {
    "gpu": r"\bGPU (\d+)\b|cuda:(\d+)",
    "rank": r"\[Rank (\d+)\]|\[rank(\d+)\]",
    "op_type": r"OpType=(\w+)",
    "timeout_ms": r"Timeout\(ms\)=(\d+)",
    "ran_for_ms": r"ran for (\d+) milliseconds",
    "seq_num": r"SeqNum=(\d+)",
    "xid": r"Xid \([^)]*\): (\d+)",
    "port": r"port:? (\d{2,5})\b|:(\d{4,5}) \(errno",
    "driver_cuda_found": r"too old \(found version (\d+)\)",
    "capability": r"CUDA capability (sm_\d+)",
    # an allocator setting PyTorch refused (c10/core/AllocatorConfig.cpp, c10/cuda/CUDAAllocatorConfig.cpp)
    "allocator_setting_refused": r"(Unrecognized key '[^'\n]{1,60}' in [\w ]{0,24}allocator config|CachingAllocator "
                                 r"option \w{1,40}|max_split_size_mb too small|Unknown allocator backend"
                                 r"|garbage_collect(?:ion)?_threshold is invalid|Invalid fraction value)",
}
WORDS = frozenset({"op_type", "capability", "allocator_setting_refused"})  # the OTHER facts that are no numbers


COMPILED = {key: linear.compile(pattern, case_sensitive=True) for key, pattern in {**PATTERNS, **OTHER}.items()}


def _gib(match):
    groups = [g.decode("ascii") for g in match.groups() if g is not None]
    return round(numbers.decimal(groups[0]) * UNITS[groups[1]], 3)


def extract(text):
    """Numbers and names the playbooks reason with; only what the text (str or UTF-8 bytes) states."""
    text = linear.utf8(text)
    facts = {}
    for key in PATTERNS:
        match = COMPILED[key].search(text)
        if match:
            facts[key] = _gib(match)
    if "reserved_unallocated_gib" not in facts and {"reserved_total_gib", "allocated_gib"} <= facts.keys():
        facts["reserved_unallocated_gib"] = round(facts["reserved_total_gib"] - facts["allocated_gib"], 3)
    for key in OTHER:
        match = COMPILED[key].search(text)
        if match:
            value = linear.text_of(next(g for g in match.groups() if g is not None))
            number = numbers.integer(value)
            if key in WORDS:
                facts[key] = value
            elif number is not None:  # over numbers.MAX_DIGITS ("GPU 999...", 5000 nines) is no GPU: no fact
                facts[key] = number
    if "driver_cuda_found" in facts:
        found = facts["driver_cuda_found"]
        facts["driver_cuda_version"] = "%d.%d" % (found // 1000, found % 1000 // 10)
    return facts


# Every cause of the OOM playbook (library/oom.yaml, its `fix_for` keys), in the playbook's order: one row each
NOT_SHOWN = {
    "allocator_setting_refused": "the message names no allocator setting",
    "fragmentation": "the message gives no reserved-but-unallocated figure to compare with the size tried",
    "another_process": "the message does not say what the GPU holds beyond this process",
    "outside_pytorch": "the message does not split this process's memory into PyTorch's and the rest",
    "leak_across_steps": "one message cannot show it: log memory_allocated() every step",
    "dataloader_workers": "one message cannot show it: list the GPU's processes (nvidia-smi --query-compute-apps)",
    "weights_loaded_twice": "one message cannot show it: check torch.load's map_location",
    "real_shortage": "the message does not compare the size tried with the GPU's free memory",
}


def oom_kinds(facts, signatures=()):
    """Every OOM cause, one row each ({kind, reason, shown}): those these numbers show first, most likely first,
    each with the reason in numbers; then the others, each saying what would show it."""
    kinds = []
    tried = facts.get("tried_gib")
    total, free = facts.get("total_gib"), facts.get("free_gib")
    spare = facts.get("reserved_unallocated_gib")
    in_use = facts.get("process_in_use_gib")
    allocated = facts.get("allocated_gib")
    if facts.get("allocator_setting_refused"):
        kinds.append(("allocator_setting_refused", "PyTorch refused the setting: %s; the job never allocated" %
                      facts["allocator_setting_refused"]))
    if tried is not None and spare is not None and spare >= tried:
        kinds.append(("fragmentation", "%.2f GiB reserved but unallocated >= the %.2f GiB tried: the cached blocks "
                      "are too fragmented to serve it" % (spare, tried)))
    if total is not None and free is not None and in_use is not None and total - free - in_use > 1.0:
        kinds.append(("another_process", "%.2f GiB in use on the GPU beyond this process's %.2f GiB" % (
            total - free - in_use, in_use)))
    if "gpu_memory_held_by_process" in signatures:
        kinds.append(("another_process", "the agent found other processes holding GPU memory on this node"))
    if in_use is not None and allocated is not None and in_use - allocated - (spare or 0) > 0.75:
        kinds.append(("outside_pytorch", "%.2f GiB of this process's memory is not PyTorch's (context, libraries, "
                      "extensions)" % (in_use - allocated - (spare or 0))))
    if tried is not None and total is not None and tried > total:
        kinds.append(("real_shortage", "%.2f GiB tried is more than the GPU's %.2f GiB" % (tried, total)))
    elif tried is not None and free is not None and tried > free and (spare is None or spare < tried):
        kinds.append(("real_shortage", "%.2f GiB tried, %.2f GiB free and too little cached to reuse" % (tried, free)))
    seen, ranked = set(), []
    for kind, reason in kinds:
        if kind not in seen:
            seen.add(kind)
            ranked.append({"kind": kind, "reason": reason, "shown": True})
    return ranked + [{"kind": kind, "reason": reason, "shown": False}
                     for kind, reason in NOT_SHOWN.items() if kind not in seen]
