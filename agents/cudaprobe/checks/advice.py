"""Advisories: settings that cost performance or hide problems, from the environment, NCCL's conf files and the
host's own figures.

NCCL reads its variables from the environment, then from $NCCL_CONF_FILE (or ~/.nccl.conf when that is unset),
then from /etc/nccl.conf; a value already set is never overridden (setenv(name, value, 0)). Integer variables are
read with strtoll(value, NULL, 0): "1", " 1" and "0x1" are 1, "010" is 8, and "true" or "yes" are 0. Which value
disables a transport differs: NCCL_P2P_DISABLE and NCCL_SHM_DISABLE need exactly 1, NCCL_IB_DISABLE any non-zero.
NCCL_P2P_LEVEL takes a level name, matched exactly (LOC, NVL, PIX, PXB, PHB, SYS...), or an old number
(0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and up SYS). (NVIDIA/nccl src/misc/param.cc, src/graph/paths.cc.)
"""

import os
import re

from agents.cudaprobe import cudaenv
from agents.cudaprobe.model import passed, warned
from agents.cudaprobe.registry import check

LEVELS = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
OLD_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")

# name: (how NCCL reads it, what a setting does)
NCCL_LIMITS = {
    "NCCL_P2P_DISABLE": ("eq1", "forces NCCL off NVLink/PCIe peer copies (falls back to SHM or the network)"),
    "NCCL_SHM_DISABLE": ("eq1", "forces NCCL off shared memory between GPUs of one host"),
    "NCCL_IB_DISABLE": ("nonzero", "forces NCCL off InfiniBand/RoCE (sockets instead); NCCL already falls back to "
                                   "sockets when no IB device exists, so this only slows multi-node jobs that have IB"),
    "NCCL_NET_DISABLE_INTRA": ("nonzero", "keeps NCCL off the network between GPUs of one host"),
    "NCCL_P2P_LEVEL": ("level", "caps how far apart two GPUs may be for NCCL to use P2P between them"),
    "NCCL_NET_GDR_LEVEL": ("level", "caps GPUDirect RDMA by GPU-NIC distance (LOC turns it off)"),
    "NCCL_NET_GDR_READ": ("eq0", "turns GPUDirect RDMA off for sends"),
    "NCCL_NVLS_ENABLE": ("eq0", "turns NVLink SHARP (NVLS) off: on NVSwitch systems all-reduce loses the NVLS "
                                "algorithm (this agent's expectations are measured without it)"),
    "NCCL_CUMEM_ENABLE": ("eq0", "turns cuMem off: legacy CUDA IPC (P2P/IPC) instead of P2P/CUMEM"),
    "NCCL_MIN_NCHANNELS": ("any", "sets NCCL's minimum number of channels"),
    "NCCL_MAX_NCHANNELS": ("any", "caps NCCL's channels, and with them its bandwidth"),
    "NCCL_MIN_CTAS": ("any", "sets NCCL's minimum number of CTAs"),
    "NCCL_MAX_CTAS": ("any", "caps NCCL's CTAs, and with them its bandwidth"),
    "NCCL_MIN_P2P_NCHANNELS": ("any", "sets the channels of send/recv"),
    "NCCL_MAX_P2P_NCHANNELS": ("any", "caps the channels of send/recv"),
    "NCCL_NTHREADS": ("any", "sets the threads per CTA"),
    "NCCL_ALGO": ("any", "restricts the collective algorithms NCCL may choose"),
    "NCCL_PROTO": ("any", "restricts the protocols (LL, LL128, Simple) NCCL may choose"),
    "NCCL_BUFFSIZE": ("any", "changes the buffer of every channel and peer"),
    "NCCL_LL_BUFFSIZE": ("any", "changes the LL protocol's buffers"),
    "NCCL_LL128_BUFFSIZE": ("any", "changes the LL128 protocol's buffers"),
    "NCCL_P2P_NET_CHUNKSIZE": ("any", "changes the chunk of send/recv over the network"),
    "NCCL_P2P_NVL_CHUNKSIZE": ("any", "changes the chunk of send/recv over NVLink"),
    "NCCL_NET": ("any", "forces one network (IB, Socket...) instead of the best found"),
    "NCCL_SOCKET_NTHREADS": ("any", "sets the socket transport's threads"),
    "NCCL_NSOCKS_PERTHREAD": ("any", "sets the socket transport's sockets per thread"),
    "NCCL_CROSS_NIC": ("any", "changes whether rings may cross NICs (rails)"),
    "NCCL_PXN_DISABLE": ("nonzero", "turns PXN off (more connections across nodes)"),
}
# Optional features a site may turn off on purpose (multicast, for one, can take shared GPUs out of service):
# named in the summary, not a warning.
NOTED_ONLY = ("NCCL_NVLS_ENABLE", "NCCL_CUMEM_ENABLE", "NCCL_NET_GDR_READ", "NCCL_PXN_DISABLE", "NCCL_CROSS_NIC")
OTHER_PITFALLS = {  # name: (value that bites, why)
    "CUDA_LAUNCH_BLOCKING": ("1", "serialises every kernel launch: a debugging aid that slows training"),
    "NCCL_BLOCKING_WAIT": ("1", "makes every collective wait on the host"),
    "TORCH_NCCL_BLOCKING_WAIT": ("1", "makes every collective wait on the host"),
    "CUDA_DEVICE_MAX_CONNECTIONS": ("1", "one hardware queue per GPU: communication cannot overlap computation"),
    "PYTORCH_NO_CUDA_MEMORY_CACHING": ("1", "turns PyTorch's caching allocator off: every allocation goes to the "
                                            "driver"),
}


def c_integer(text):
    """What strtoll(text, NULL, 0) returns: leading blanks and a sign, then 0x.. hex, 0.. octal or decimal, up to
    the first character that does not fit; 0 when nothing does."""
    match = re.match(r"[ \t\n\v\f\r]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text or "")
    if not match:
        return 0
    sign, digits = match.groups()
    value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits, 8) if digits.startswith("0") \
        else int(digits)
    return -value if sign == "-" else value


def level_of(text):
    """NCCL_P2P_LEVEL as NCCL reads it: an exact level name, or an old number; None when NCCL ignores it."""
    if text in LEVELS:
        return text
    if text[:1].isdigit():
        return OLD_LEVELS[min(c_integer(text), len(OLD_LEVELS) - 1)]
    return None


def conf_files(ctx):
    """The NCCL conf files NCCL would read, in its order of precedence."""
    first = ctx.environ.get("NCCL_CONF_FILE")
    if not first:
        home = ctx.environ.get("HOME")
        first = os.path.join(home, ".nccl.conf") if home else None
    return [path for path in (first, ctx.path("NCCL_SYSTEM_CONF", "/etc/nccl.conf")) if path]


def read_conf(path):
    """NAME=value lines as NCCL reads them: split at the first '=', nothing trimmed, '#' lines skipped."""
    try:
        with open(path) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return {}
    values = {}
    for line in lines:
        line = line.rstrip("\r")
        if line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        values.setdefault(name, value)
    return values


def _effect(name, value, how, why):
    """(what the setting does as NCCL reads it, or None when it does nothing; a note on the spelling or None)."""
    number = c_integer(value)
    note = None
    if how in ("eq1", "nonzero", "eq0") and value.strip().lower() in ("true", "yes", "on", "false", "no", "off"):
        note = "NCCL reads %r as %d: write 1 or 0" % (value, number)
    if how == "eq1":
        return (why if number == 1 else None), note
    if how == "nonzero":
        return (why if number != 0 else None), note
    if how == "eq0":
        return (why if value.strip() and number == 0 else None), note
    if how == "level":
        level = level_of(value)
        if level is None:
            return None, "NCCL ignores %r: a level is one of %s, spelled exactly, or a number" % (
                value, ", ".join(LEVELS))
        return "%s (read as %s)" % (why, level), None
    return why, None


def nccl_settings(ctx):
    """Every NCCL setting that disables a transport or limits channels, algorithms, protocols or buffers, where it
    comes from, and what it does as NCCL reads it: [{"name", "value", "source", "effect", "note"}]. Read once per
    run (a fact, so a recorded run keeps what the host's files said)."""
    if "nccl_settings" not in ctx.facts:
        ctx.facts["nccl_settings"] = _read_nccl_settings(ctx)
    return ctx.facts["nccl_settings"]


def _read_nccl_settings(ctx):
    sources = [("environment", ctx.environ)] + [(path, read_conf(path)) for path in conf_files(ctx)]
    found = []
    for name, (how, why) in NCCL_LIMITS.items():
        for source, values in sources:
            if values.get(name, "") != "":
                effect, note = _effect(name, values[name], how, why)
                found.append({"name": name, "value": values[name], "source": source, "effect": effect,
                              "note": note})
                break  # the first source wins, as in NCCL
    return found


@check("advice.environment", "advisory", "NCCL and CUDA settings that slow or mask problems")
def advice_environment(ctx):
    lines, noted, signatures = [], [], []
    for setting in nccl_settings(ctx):
        where = "" if setting["source"] == "environment" else " (from %s)" % setting["source"]
        text = "%s=%s%s" % (setting["name"], setting["value"], where)
        if setting["note"]:
            lines.append("%s: %s" % (text, setting["note"]))
            signatures.append("advice_env_misspelled")
        elif setting["effect"] and setting["name"] in NOTED_ONLY:
            noted.append("%s: %s" % (text, setting["effect"]))
        elif setting["effect"]:
            lines.append("%s: %s" % (text, setting["effect"]))
            signatures.append("advice_env_override")
    for name, (value, why) in OTHER_PITFALLS.items():
        if ctx.environ.get(name, "").strip() == value:
            lines.append("%s=%s: %s" % (name, ctx.environ[name], why))
            signatures.append("advice_env_override")
    for item in cudaenv.settings(ctx.environ):  # CUDA, cuBLAS, cuDNN and PyTorch settings
        if item["name"] in OTHER_PITFALLS and not item["refused"]:
            continue  # named above
        if item["refused"]:
            lines.append(cudaenv.describe(item))
            signatures.append("advice_env_refused")
        elif item["name"] in cudaenv.NOTED_ONLY:
            noted.append(cudaenv.describe(item))
        else:
            lines.append(cudaenv.describe(item))
            signatures.append("advice_env_override")
    signatures = sorted(set(signatures))
    evidence = "\n".join(lines + noted)
    if lines:
        return warned("%d setting(s) worth a second look: %s" % (len(lines), "; ".join(
            line.split(":")[0] for line in lines)), evidence=evidence, signatures=signatures)
    if noted:
        return passed("noted: %s" % "; ".join(line.split(":")[0] for line in noted), evidence=evidence,
                      signatures=["advice_env_noted"])
    return passed("no NCCL or CUDA setting that disables a transport or limits NCCL, here or in %s" %
                  " or ".join(conf_files(ctx)))


@check("advice.performance", "advisory", "What this host's own figures say about defaults",
       modes=("standard", "full"))
def advice_performance(ctx):
    notes, signatures = [], []
    copies = ctx.facts.get("copy_bandwidth") or []
    if copies:
        ratio = min(g["h2d_pinned_gbs"] / max(g["h2d_pageable_gbs"], 1e-9) for g in copies)
        if ratio > 1.5:
            notes.append("pinned host memory copies %.1fx faster than pageable here: use pin_memory=True in "
                         "DataLoader and non_blocking=True copies" % ratio)
            signatures.append("advice_pinned_memory")
    matmul = ctx.facts.get("matmul") or []
    if matmul:
        ratio = min(g["tf32_tflops"] / max(g["fp32_tflops"], 1e-9) for g in matmul)
        if ratio > 1.5:
            notes.append("TF32 matmul runs %.1fx faster than strict fp32 here; PyTorch leaves it off for matmul "
                         "(torch.backends.cuda.matmul.allow_tf32 / torch.set_float32_matmul_precision('high'))"
                         % ratio)
            signatures.append("advice_tf32")
    notes.append("torch.backends.cudnn.benchmark is off by default; for fixed input shapes turning it on lets "
                 "cuDNN pick the fastest convolution algorithms")
    signatures.append("advice_cudnn_benchmark")
    return passed("; ".join(notes[:1]) if notes else "nothing to advise", evidence="\n".join(notes),
                  signatures=signatures)
