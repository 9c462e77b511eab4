"""L1: driver and hardware, as nvidia-smi, /proc/modules, /dev and dmesg see them."""

import json
import os
import re
import sys
from datetime import datetime

from agents.cudaprobe import children, expectations, gpu_identity, nvsmi, proc, strays
from agents.cudaprobe.judge import reference as judge_reference
from agents.cudaprobe.model import failed, passed, skipped, warned
from agents.cudaprobe.registry import IN_WATCH_TOO, check

# Xid codes that mean the hardware or its memory needs attention (NVIDIA's Xid catalogue).
CRITICAL_XIDS = {
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapper failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    154: "the driver changed the GPU's recovery action (a reset or a reboot is needed)",
}
# Raised by faulting applications; worth a look, not a reason to pull the node.
APPLICATION_XIDS = {13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
                    45: "preemptive cleanup"}
# clocks_event_reasons bits (nvml.h nvmlClocksEventReason*): idle and app clocks are benign.
THROTTLE_BITS = {0x4: "SW power cap", 0x8: "HW slowdown", 0x20: "SW thermal slowdown",
                 0x40: "HW thermal slowdown", 0x80: "HW power brake slowdown"}


def _driver_query_limit(ctx, timeout=None):
    """Budget of one nvidia-smi or NVML query. CUDAPROBE_NVSMI_TIMEOUT shortens the wait for a hung driver
    (fault-injection tests, impatient operators)."""
    return float(ctx.environ.get("CUDAPROBE_NVSMI_TIMEOUT", 0)) or timeout or min(ctx.budget_s, 20)


def _smi(ctx, args, timeout=None):
    return nvsmi.nvidia_smi(args, _driver_query_limit(ctx, timeout), env=ctx.environ)


def _smi_failure(result, what):
    signature = nvsmi.failure_signature(result)
    if signature == "nvidia_smi_missing":
        return failed("nvidia-smi is not on PATH: no NVIDIA driver user space installed",
                      signatures=["nvidia_smi_missing", "driver_unreachable"])
    if signature == "nvidia_smi_hang":
        return failed("nvidia-smi %s did not answer within %.0f s: the driver is hung or a GPU is stuck" %
                      (what, result.duration_s), evidence=result.combined(), signatures=["nvidia_smi_hang"])
    return failed("nvidia-smi %s failed (exit %s): %s" % (what, result.returncode, result.combined()[:200]),
                  evidence=result.combined(), signatures=[signature])


@check("driver.nvidia_smi", "L1", "nvidia-smi lists the GPUs", budget_s=15, modes=IN_WATCH_TOO)
def driver_nvidia_smi(ctx):
    result = _smi(ctx, ["-L"])
    if not result.ok:
        return _smi_failure(result, "-L")
    gpus = nvsmi.parse_list(result.stdout)
    ctx.facts["driver_gpus"] = gpus
    if not gpus:
        return failed("nvidia-smi -L listed no GPUs", evidence=result.combined(), signatures=["no_gpus_found"])
    names = sorted({g["name"] for g in gpus})
    inv = ctx.inventory()
    inv["gpu_count"] = len(gpus)
    inv["gpu_model"] = ", ".join(names)
    return passed("%d GPU(s): %s" % (len(gpus), ", ".join(names)), metrics={"gpu_count": len(gpus)},
                  evidence=result.stdout)


def nvml_child(ctx, module, key):
    """The facts NVML gives through `module` (run as a child, `python -m module`, under the driver query's budget,
    so that a hung driver call is killed like any other), kept in ctx.facts[key]; or a dict with "error" saying
    why not. CUDAPROBE_NVML=0 turns NVML off (nvidia-smi only)."""
    if key not in ctx.facts:
        if ctx.environ.get("CUDAPROBE_NVML") == "0":
            ctx.facts[key] = {"error": "nvml_disabled", "message": "CUDAPROBE_NVML=0"}
        else:
            result = proc.run([sys.executable, "-m", module], _driver_query_limit(ctx), env=children.child_env(ctx))
            try:
                facts = json.loads(result.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                facts = {"error": "nvml_hang" if result.timed_out else "nvml_unreadable",
                         "message": result.combined()[:500]}
            ctx.facts[key] = facts
    return ctx.facts[key]


def _nvml(ctx):
    """NVML's L1 facts (agents.cudaprobe.nvml), or a dict with "error" saying why not."""
    return nvml_child(ctx, "agents.cudaprobe.nvml", "nvml")


@check("driver.version", "L1", "Driver version and the CUDA version it supports", requires=["driver.nvidia_smi"],
       modes=IN_WATCH_TOO)
def driver_version(ctx):
    nvml = _nvml(ctx)
    if nvml.get("error") == "nvml_hang":
        return failed("NVML did not answer within its budget: the driver is hung or a GPU is stuck",
                      evidence=nvml.get("message", ""), signatures=["nvml_hang"])
    if "error" not in nvml:
        facts = {"driver_version": nvml["driver_version"], "cuda_version": nvml["cuda_version"],
                 "gpus": nvml["gpus"]}
        ctx.facts["smi_rows"] = nvml["rows"]
        via, source, raw = "NVML", "NVML %s (pynvml)" % nvml.get("nvml_version"), json.dumps(nvml["rows"][:1])
    else:
        result = _smi(ctx, ["-q"], timeout=min(ctx.budget_s, 30))
        if not result.ok:
            return _smi_failure(result, "-q")
        facts = nvsmi.parse_query_text(result.stdout)
        query = _smi(ctx, ["--query-gpu=" + nvsmi.QUERY_FIELDS, "--format=csv"])
        if not query.ok:
            return _smi_failure(query, "--query-gpu")
        ctx.facts["smi_rows"] = nvsmi.parse_csv(query.stdout)
        via, source, raw = "nvidia-smi", "nvidia-smi (NVML not used: %s)" % nvml.get("error"), result.stdout[:2000]
    ctx.facts["smi_q"] = facts
    driver, cuda = facts.get("driver_version"), facts.get("cuda_version")
    if not driver or not cuda:
        return failed("%s did not report the driver or CUDA version" % source, evidence=raw,
                      signatures=["nvidia_smi_unparsed"])
    inv = ctx.inventory()
    inv["l1_source"] = via
    inv["driver_version"] = driver
    inv["cuda_driver_version"] = cuda
    vbios = sorted({g.get("vbios") for g in facts["gpus"] if g.get("vbios")})
    if vbios:
        inv["vbios"] = ", ".join(vbios)
    return passed("driver %s, supports CUDA up to %s (read through %s)" % (driver, cuda, via),
                  evidence="Driver Version: %s\nCUDA Version: %s\nsource: %s" % (driver, cuda, source))


@check("driver.kernel_modules", "L1", "Kernel modules nvidia and nvidia_uvm loaded", modes=IN_WATCH_TOO)
def driver_kernel_modules(ctx):
    path = ctx.path("PROC_MODULES", "/proc/modules")
    try:
        with open(path) as fh:
            loaded = {line.split()[0] for line in fh if line.strip()}
    except OSError as exc:
        return skipped("cannot read %s: %s" % (path, exc))
    present = [m for m in ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem") if m in loaded]
    evidence = "loaded: " + (", ".join(present) or "no nvidia module")
    if "nvidia" not in loaded:
        return failed("kernel module nvidia is not loaded", evidence=evidence,
                      signatures=["nvidia_module_missing", "driver_unreachable"])
    if "nvidia_uvm" not in loaded:
        return failed("nvidia_uvm is not loaded: CUDA cannot create a context (cudaErrorUnknown / error 999)",
                      evidence=evidence, signatures=["nvidia_uvm_missing"])
    return passed("loaded: %s" % ", ".join(present), evidence=evidence)


@check("driver.device_nodes", "L1", "/dev/nvidia* present and accessible", modes=IN_WATCH_TOO)
def driver_device_nodes(ctx):
    dev = ctx.path("DEV_DIR", "/dev")
    try:
        names = sorted(n for n in os.listdir(dev) if n.startswith("nvidia"))
    except OSError as exc:
        return failed("cannot list %s: %s" % (dev, exc), signatures=["dev_nodes_missing"])
    gpu_nodes = [n for n in names if re.fullmatch(r"nvidia\d+", n)]
    missing = [n for n in ("nvidiactl", "nvidia-uvm") if n not in names]
    evidence = "%s: %s" % (dev, " ".join(names) or "(none)")
    if not gpu_nodes or missing:
        what = ", ".join(missing + ([] if gpu_nodes else ["nvidiaN"]))
        return failed("missing device nodes in %s: %s" % (dev, what), evidence=evidence,
                      signatures=["dev_nodes_missing"])
    denied = [n for n in gpu_nodes + ["nvidiactl", "nvidia-uvm"]
              if not os.access(os.path.join(dev, n), os.R_OK | os.W_OK)]
    if denied:
        return failed("no read/write access for this user to %s" % ", ".join(denied), evidence=evidence,
                      signatures=["dev_nodes_inaccessible"])
    return passed("%d GPU node(s), nvidiactl and nvidia-uvm accessible" % len(gpu_nodes), evidence=evidence,
                  metrics={"gpu_nodes": len(gpu_nodes)})


def _rows(ctx):
    return ctx.facts.get("smi_rows") or []


def _row_line(row, keys):
    return "GPU %s: " % row.get("index") + ", ".join("%s=%s" % (k, row.get(k)) for k in keys)


@check("driver.gpu_state", "L1", "Persistence and compute mode", requires=["driver.version"], modes=IN_WATCH_TOO)
def driver_gpu_state(ctx):
    rows = _rows(ctx)
    keys = ("name", "compute_mode", "persistence_mode", "memory.total")
    evidence = "\n".join(_row_line(r, keys) for r in rows)
    prohibited = [r["index"] for r in rows if r.get("compute_mode", "").lower() == "prohibited"]
    exclusive = [r["index"] for r in rows if "exclusive" in r.get("compute_mode", "").lower()]
    ctx.facts["exclusive_gpus"] = exclusive
    no_persistence = [r["index"] for r in rows if r.get("persistence_mode", "").lower() == "disabled"]
    mig = [str(i) for i, g in enumerate((ctx.facts.get("smi_q") or {}).get("gpus", []))
           if g.get("mig_mode", "").lower() == "enabled"]
    ctx.facts["mig_gpus"] = mig
    metrics = {"gpu_count": len(rows)}
    if mig:
        evidence += "\nMIG mode enabled on GPU %s" % ",".join(mig)
    def on(gpus, status, signature, what):
        return [gpu_identity.finding(gpu_identity.by_index(ctx, int(i)), status, [signature], what) for i in gpus]

    if prohibited:
        return failed("compute mode PROHIBITED on GPU %s: no process may create a context" % ",".join(prohibited),
                      evidence=evidence, metrics=metrics, signatures=["compute_mode_prohibited"],
                      gpus=on(prohibited, "fail", "compute_mode_prohibited", "compute mode PROHIBITED"))
    if mig:
        return warned("MIG is enabled on GPU %s: this agent validates whole GPUs, so L4-L6 are skipped; validate "
                      "the MIG instances with a workload pinned to each, or disable MIG (nvidia-smi -i N -mig 0, "
                      "then reset the GPU) to validate the GPU" % ",".join(mig), evidence=evidence, metrics=metrics,
                      signatures=["mig_enabled"], gpus=on(mig, "warn", "mig_enabled", "MIG enabled"))
    if exclusive:
        return warned("compute mode EXCLUSIVE_PROCESS on GPU %s: a second process on the same GPU fails with "
                      "'busy or unavailable'" % ",".join(exclusive), evidence=evidence, metrics=metrics,
                      signatures=["compute_mode_exclusive"],
                      gpus=on(exclusive, "warn", "compute_mode_exclusive", "compute mode EXCLUSIVE_PROCESS"))
    if no_persistence:
        return warned("persistence mode off on GPU %s: every first CUDA call pays driver initialisation"
                      % ",".join(no_persistence), evidence=evidence, metrics=metrics,
                      signatures=["persistence_mode_off"],
                      gpus=on(no_persistence, "warn", "persistence_mode_off", "persistence mode off"))
    return passed("%d GPU(s) in Default compute mode, persistence on" % len(rows), evidence=evidence,
                  metrics=metrics)


@check("driver.gpu_health", "L1", "ECC errors and remapped rows", requires=["driver.version"], modes=IN_WATCH_TOO)
def driver_gpu_health(ctx):
    rows = _rows(ctx)
    smi_gpus = (ctx.facts.get("smi_q") or {}).get("gpus", [])
    lines, fails, warns, signatures, per_gpu = [], [], [], [], []
    total_uncorrected = 0

    def found(gpu, status, problem, signature, messages):
        messages.append(problem)
        signatures.append(signature)
        per_gpu.append(gpu_identity.finding(gpu, status, [signature], problem))

    for row in rows:
        uncorrected = nvsmi.numeric(row, "ecc.errors.uncorrected.volatile.total") or 0
        total_uncorrected += uncorrected
        gpu = gpu_identity.by_index(ctx, int(row["index"])) if str(row.get("index", "")).isdigit() else {}
        lines.append(_row_line(row, ("ecc.mode.current", "ecc.errors.uncorrected.volatile.total",
                                     "retired_pages.pending")))
        if uncorrected:
            found(gpu, "fail", "GPU %s: %d uncorrected ECC errors since boot" % (row["index"], uncorrected),
                  "ecc_uncorrected", fails)
        if row.get("retired_pages.pending", "").lower() == "yes":
            found(gpu, "fail", "GPU %s: page retirement pending (reset the GPU)" % row["index"],
                  "retired_pages_pending", fails)
    for index, q in enumerate(smi_gpus):
        # -q lists the GPUs by bus id in index order; the bus id names the GPU where the rows have it
        gpu = gpu_identity.by_bus(ctx, q.get("bus_id"))
        if gpu.get("index") is None:
            gpu = dict(gpu_identity.by_index(ctx, index), bus_id=q.get("bus_id"))
        lines.append("GPU %s remapped rows: correctable=%s uncorrectable=%s pending=%s failure=%s" % (
            q.get("bus_id"), q.get("remap_correctable"), q.get("remap_uncorrectable"),
            q.get("remap_pending"), q.get("remap_failure")))
        if q.get("remap_failure", "").lower() == "yes":
            found(gpu, "fail", "GPU %d: row remapping failed (memory cannot be repaired)" % index,
                  "row_remap_failure", fails)
        if q.get("remap_pending", "").lower() == "yes":
            found(gpu, "fail", "GPU %d: row remap pending, needs a GPU reset" % index, "row_remap_pending", fails)
        uncorrectable = nvsmi._number(q.get("remap_uncorrectable", "") or "") or 0
        if uncorrectable:
            found(gpu, "warn", "GPU %d: %d rows remapped for uncorrectable errors" % (index, uncorrectable),
                  "row_remap_uncorrectable", warns)
    metrics = {"ecc_uncorrected_volatile": total_uncorrected}
    evidence = "\n".join(lines)
    gpus = gpu_identity.merge(per_gpu)
    if fails:
        return failed("; ".join(fails + warns), evidence=evidence, metrics=metrics, signatures=signatures, gpus=gpus)
    if warns:
        return warned("; ".join(warns), evidence=evidence, metrics=metrics, signatures=signatures, gpus=gpus)
    return passed("no uncorrected ECC errors, no pending or failed row remaps", evidence=evidence, metrics=metrics)


# What the driver says a faulted GPU needs (nvmlDeviceGpuRecoveryAction_t, as nvidia-smi -q prints it): NVIDIA's
# "Error Recovery and Response Flags" (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt). None: usable as it is.
RECOVERY_SIGNATURES = {"reset": "gpu_recovery_reset", "drain and reset": "gpu_recovery_reset",
                       "bus reset": "gpu_recovery_reset", "reboot": "gpu_recovery_reboot",
                       "system reboot": "gpu_recovery_reboot", "drain p2p": "gpu_recovery_drain_p2p",
                       "recover imex domain": "gpu_recovery_imex"}
NO_RECOVERY_READ = ("", "[n/a]", "n/a", "not supported")


@check("driver.recovery_action", "L1", "The driver's recovery action for each GPU (reset, reboot)",
       requires=["driver.version"], modes=IN_WATCH_TOO)
def driver_recovery_action(ctx):
    smi_gpus = (ctx.facts.get("smi_q") or {}).get("gpus", [])
    read = [(index, q) for index, q in enumerate(smi_gpus)
            if (q.get("recovery_action") or "").strip().lower() not in NO_RECOVERY_READ]
    if not read:
        return passed("this driver does not report a recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, drivers "
                      "R570 and later): nothing to read")
    lines, problems, signatures, per_gpu = [], [], [], []
    for index, q in read:
        action = q["recovery_action"].strip()
        lines.append("GPU %d (%s): recovery action %s" % (index, q.get("bus_id"), action))
        if action.lower() == "none":
            continue
        gpu = gpu_identity.by_bus(ctx, q.get("bus_id"))
        if gpu.get("index") is None:
            gpu = dict(gpu_identity.by_index(ctx, index), bus_id=q.get("bus_id"))
        signature = RECOVERY_SIGNATURES.get(action.lower(), "gpu_recovery_other")
        problem = "GPU %d: the driver asks for %s before the GPU is used again" % (index, action)
        problems.append(problem)
        signatures.append(signature)
        per_gpu.append(gpu_identity.finding(gpu, "fail", [signature], problem))
    evidence = "\n".join(lines)
    if problems:
        return failed("; ".join(problems), evidence=evidence, signatures=sorted(set(signatures)), gpus=per_gpu)
    return passed("%d GPU(s): recovery action None" % len(read), evidence=evidence)


@check("driver.pcie_link", "L1", "PCIe link generation and width", requires=["driver.version"], modes=IN_WATCH_TOO)
def driver_pcie_link(ctx):
    rows = _rows(ctx)
    keys = ("pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max")
    degraded_width, degraded_gen = [], []
    for row in rows:
        gen, gen_max, width, width_max = (nvsmi.numeric(row, k) for k in keys)
        if width and width_max and width < width_max:
            degraded_width.append("GPU %s x%d of x%d" % (row["index"], width, width_max))
        if gen and gen_max and gen < gen_max:
            degraded_gen.append("GPU %s gen%d of gen%d" % (row["index"], gen, gen_max))
    metrics = {}
    if rows:
        first = rows[0]
        gen, width = nvsmi.numeric(first, keys[1]), nvsmi.numeric(first, keys[3])
        if expectations.pcie_gbs(gen, width):
            metrics["pcie_max_gbs_per_direction"] = expectations.pcie_gbs(gen, width)
            ctx.facts["pcie_link"] = (gen, width)
    evidence = "\n".join(_row_line(r, keys) for r in rows)
    if degraded_width:
        return warned("PCIe link narrower than its maximum: %s (reseat or check the riser)" %
                      "; ".join(degraded_width), evidence=evidence, metrics=metrics, signatures=["pcie_link_degraded"])
    if degraded_gen:
        return warned("PCIe link below its maximum generation: %s (idle GPUs may down-train; recheck under load)"
                      % "; ".join(degraded_gen), evidence=evidence, metrics=metrics, signatures=["pcie_link_degraded"])
    return passed("every link at its maximum generation and width", evidence=evidence, metrics=metrics)


@check("driver.clocks_thermal", "L1", "Temperature, power and throttle reasons", requires=["driver.version"],
       modes=IN_WATCH_TOO)
def driver_clocks_thermal(ctx):
    rows = _rows(ctx)
    keys = ("temperature.gpu", "power.draw", "power.limit", "clocks.current.sm", "clocks.max.sm",
            "clocks_event_reasons.active")
    throttled, per_gpu = [], []
    for row in rows:
        try:
            mask = int(row.get("clocks_event_reasons.active", "0"), 16)
        except ValueError:
            continue
        reasons = [name for bit, name in THROTTLE_BITS.items() if mask & bit]
        if reasons:
            throttled.append("GPU %s: %s" % (row["index"], ", ".join(reasons)))
            gpu = gpu_identity.by_index(ctx, int(row["index"])) if str(row.get("index", "")).isdigit() else {}
            per_gpu.append(gpu_identity.finding(gpu, "warn", ["gpu_throttling"], "clocks held back: %s" % ", ".join(
                reasons), metrics={"clocks_event_reasons": mask}))
    temps = [nvsmi.numeric(r, "temperature.gpu") for r in rows]
    temps = [t for t in temps if t is not None]
    metrics = {"max_temperature_c": max(temps)} if temps else {}
    for row in rows:  # each GPU's own, for the dashboard's per-GPU series (dcgm-exporter's shape)
        for name, key in (("temperature_c", "temperature.gpu"), ("power_w", "power.draw")):
            value = nvsmi.numeric(row, key)
            if value is not None:
                metrics["%s.gpu%s" % (name, row.get("index"))] = value
    evidence = "\n".join(_row_line(r, keys) for r in rows)
    if throttled:
        return warned("clocks held back: %s" % "; ".join(throttled), evidence=evidence, metrics=metrics,
                      signatures=["gpu_throttling"], gpus=per_gpu)
    return passed("no thermal or power throttling; hottest GPU %s C" % metrics.get("max_temperature_c", "?"),
                  evidence=evidence, metrics=metrics)


@check("driver.processes", "L1", "Other processes holding GPU memory", requires=["driver.version"], modes=IN_WATCH_TOO)
def driver_processes(ctx):
    outcome = _gpu_processes(ctx)
    found = strays.stray_workers(ctx.path("PROC_DIR", "/proc"))
    if found and outcome.status in ("pass", "warn"):
        # named, never ended: whose process it is and whether it may go is the operator's call
        summary = "GPU worker(s) of an earlier cudaprobe agent still running, their agent gone: %s; they compute " \
                  "and hold GPU memory with no one to read them (end them, e.g. kill %s, then validate again)" % (
                      strays.describe(found), " ".join(str(s["pid"]) for s in found))
        outcome.status = "warn"
        outcome.summary = summary if outcome.summary.startswith("no compute process") else (
            summary + "; " + outcome.summary)
        outcome.signatures = ["stray_agent_worker"] + list(outcome.signatures)
        outcome.metrics["stray_agent_workers"] = len(found)
    return outcome


def _gpu_processes(ctx):
    nvml = _nvml(ctx)
    if "error" not in nvml:
        apps = nvml["apps"]
        listing_text = "\n".join("%(pid)s %(process_name)s %(used_gpu_memory)s" % a for a in apps) or "(none)"
    else:
        result = _smi(ctx, ["--query-compute-apps=" + nvsmi.APPS_FIELDS, "--format=csv"])
        if not result.ok:
            return _smi_failure(result, "--query-compute-apps")
        apps = nvsmi.parse_csv(result.stdout)
        listing_text = result.stdout
    # This run's own GPU workers start at once and make their contexts while L0-L1 run: they are not another
    # process (seen on a lent H200: the measuring worker, 14 MiB into its context, listed as one; issue 33).
    ours = children.our_pids(ctx)
    own = [a for a in apps if _pid(a) in ours]
    apps = [a for a in apps if _pid(a) not in ours]
    if own:
        listing_text += "\n(this run's own GPU workers, not counted: %s)" % ", ".join(str(_pid(a)) for a in own)
    used = sum(nvsmi.numeric(r, "memory.used") or 0 for r in _rows(ctx))
    metrics = {"gpu_memory_used_mib": used, "compute_processes": len(apps)}
    if apps:
        listing = ", ".join("%s (pid %s, %s)" % (a.get("process_name"), a.get("pid"), a.get("used_gpu_memory"))
                            for a in apps)
        return warned("%d process(es) hold GPU memory: %s" % (len(apps), listing), evidence=listing_text,
                      metrics=metrics, signatures=["gpu_memory_held_by_process"], gpus=_processes_per_gpu(ctx, apps))
    if used > 1024:
        return warned("%d MiB of GPU memory in use by processes not visible here (another container?)" % used,
                      evidence=listing_text, metrics=metrics, signatures=["gpu_memory_held_by_process"])
    return passed("no compute process holds GPU memory", evidence=listing_text, metrics=metrics)


def _pid(app):
    try:
        return int(str(app.get("pid")).strip())
    except ValueError:
        return None


def _processes_per_gpu(ctx, apps):
    """One finding per GPU that holds processes, where the listing says which GPU (NVML's, and nvidia-smi's
    gpu_uuid column)."""
    by_uuid = {gpu["uuid"]: gpu for gpu in gpu_identity.known(ctx) if gpu["uuid"]}
    held = {}
    for app in apps:
        uuid = app.get("gpu_uuid")
        if uuid and not uuid.startswith("["):
            held.setdefault(uuid, []).append(app)
    return [gpu_identity.finding(by_uuid.get(uuid, {"index": None, "uuid": uuid}), "warn",
                                 ["gpu_memory_held_by_process"], "%d process(es): %s" % (len(found), ", ".join(
                                     "pid %s (%s)" % (a.get("pid"), a.get("used_gpu_memory")) for a in found)),
                                 metrics={"compute_processes": len(found)})
            for uuid, found in sorted(held.items(), key=lambda kv: by_uuid.get(kv[0], {}).get("index") or 0)]


@check("driver.topology", "L1", "How the GPUs are linked (NVLink, PCIe, across sockets)",
       requires=["driver.nvidia_smi"], modes=IN_WATCH_TOO)
def driver_topology(ctx):
    gpus = ctx.facts.get("driver_gpus") or []
    if len(gpus) < 2:
        return passed("one GPU: no links between GPUs to read")
    result = _smi(ctx, ["topo", "-m"])
    if not result.ok:
        return skipped("nvidia-smi topo -m did not answer (%s): links judged without the topology" %
                       (nvsmi.failure_signature(result) or "no output"))
    topology = nvsmi.parse_topology(result.stdout)
    if not topology or not topology["links"]:
        return warned("nvidia-smi topo -m printed no GPU matrix: links judged without the topology",
                      evidence=result.stdout[:2000], signatures=["topology_unparsed"])
    ctx.facts["topology"] = topology
    links = topology["links"]
    summary = ", ".join("GPU %s %s" % (pair, kind) for pair, kind in sorted(links.items())[:8])
    metrics = {}
    nvlinks = [int(kind[2:]) for kind in links.values() if kind.startswith("NV")]
    if nvlinks:
        metrics["nvlinks_min"] = min(nvlinks)
    sku, _ = judge_reference(ctx)
    # SXM boards join every pair of GPUs by NVLink (directly or through NVSwitch); bridged PCIe cards may not.
    if sku and sku["nvlink_links"] and not sku.get("nvlink_bridge"):
        missing = sorted(pair for pair, kind in links.items() if not kind.startswith("NV"))
        if missing:
            return failed("GPU pair(s) %s of this %s board are not joined by NVLink (%s): a link or NVSwitch is down, "
                          "or the fabric manager is not running" % (", ".join(missing), sku["key"],
                          ", ".join(links[p] for p in missing)), evidence=result.stdout, metrics=metrics,
                          signatures=["nvlink_missing"])
        # The pairs of such a board are bonded alike (NV18 through NVSwitch, NV4 or NV6 in a direct mesh).
        usual = max(set(nvlinks), key=nvlinks.count)
        fewer = sorted(pair for pair, kind in links.items() if int(kind[2:]) < usual)
        if fewer:
            return warned("GPU pair(s) %s have fewer NVLinks than the other pairs (NV%d): %s" % (
                ", ".join(fewer), usual, ", ".join(links[p] for p in fewer)), evidence=result.stdout,
                metrics=metrics, signatures=["nvlink_degraded"])
    return passed(summary, evidence=result.stdout, metrics=metrics)


XID_LINE = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")
DMESG_TIME = re.compile(r"^\[\s*(\d+\.\d+)\]")


def _boot_time(ctx):
    """Seconds since the epoch at which the kernel booted (/proc/stat btime), or None."""
    try:
        with open(ctx.path("PROC_STAT", "/proc/stat")) as fh:
            for line in fh:
                if line.startswith("btime "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _since(ctx):
    """The node's previous validation (--since, ISO 8601) as epoch seconds, or None."""
    value = ctx.options.get("since")
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@check("driver.xid", "L1", "Xid errors in the kernel log", budget_s=10, modes=IN_WATCH_TOO)
def driver_xid(ctx):
    result = proc.run(["dmesg"], 10, env=ctx.environ)
    if result.missing or not result.ok:
        return skipped("kernel log not readable here (%s); run as root or set kernel.dmesg_restrict=0" %
                       ("no dmesg" if result.missing else result.combined()[:120] or "exit %s" % result.returncode))
    lines = [line for line in result.stdout.splitlines() if XID_LINE.search(line)]
    boot, since = _boot_time(ctx), _since(ctx)
    old, new = [], []
    for line in lines:
        stamp = DMESG_TIME.match(line)
        when = boot + float(stamp.group(1)) if boot is not None and stamp else None
        (old if since is not None and when is not None and when < since else new).append(line)
    codes = [int(XID_LINE.search(line).group(2)) for line in new]
    critical = sorted({c for c in codes if c in CRITICAL_XIDS})
    application = sorted({c for c in codes if c in APPLICATION_XIDS})
    other = sorted({c for c in codes if c not in CRITICAL_XIDS and c not in APPLICATION_XIDS})
    metrics = {"xid_count": len(codes), "xid_count_before_previous_validation": len(old)}
    metrics.update(("xid_%d_count" % code, codes.count(code)) for code in sorted(set(codes)))
    history = ("; %d Xid line(s) from before the previous validation (%s) kept as history" % (
        len(old), ctx.options["since"]) if old else "")
    evidence = "\n".join((["before the previous validation:"] + old[-10:] + ["since:"] if old else []) + new[-40:])
    gpus = _xid_per_gpu(ctx, new)
    window = "since the previous validation" if since else "since boot"
    signatures = [XID_CLASSES[kind] for kind, found in (("critical", critical), ("application", application),
                                                        ("other", other)) if found]
    if 79 in critical:
        signatures.insert(1, "gpu_fallen_off_bus")
    notes = []
    if application:
        notes.append("Xid %s, usually raised by a faulting application (%s)" % (
            ", ".join(map(str, application)), "; ".join(APPLICATION_XIDS[c] for c in application)))
    if other:
        notes.append("Xid %s, not classed here (see NVIDIA's Xid catalogue)" % ", ".join(map(str, other)))
    if critical:
        return failed("Xid %s in the kernel log %s: %s%s%s" % (
            ", ".join(map(str, critical)), window, "; ".join(CRITICAL_XIDS[c] for c in critical),
            "; also " + "; ".join(notes) if notes else "", history),
            evidence=evidence, metrics=metrics, signatures=signatures, gpus=gpus)
    if codes:
        return warned("%s %s%s" % ("; ".join(notes), window, history), evidence=evidence, metrics=metrics,
                      signatures=signatures, gpus=gpus)
    if old:
        return passed("no Xid since the previous validation%s" % history, evidence=evidence, metrics=metrics,
                      signatures=["xid_history"])
    return passed("no Xid lines in the kernel log", metrics=metrics)


# The signature of each class of Xid: the dashboard makes an application's Xid an event of its own class, which
# never quarantines a node by itself (issue 30).
XID_CLASSES = {"critical": "xid_critical", "application": "xid_application", "other": "xid_other"}


def _xid_class(code):
    return "critical" if code in CRITICAL_XIDS else "application" if code in APPLICATION_XIDS else "other"


def _xid_per_gpu(ctx, lines):
    """One finding per GPU named by the Xid lines (the kernel prints the GPU's PCI address), the latest line of
    each class as its summary, a count per Xid code as its metrics."""
    per_gpu = {}
    for line in lines:
        match = XID_LINE.search(line)
        per_gpu.setdefault(match.group(1), []).append((int(match.group(2)), line[match.start():].strip()))
    findings = []
    for address, seen in per_gpu.items():
        gpu = gpu_identity.by_bus(ctx, address)
        codes = [code for code, _ in seen]
        for kind in ("critical", "application", "other"):
            mine = [(code, text) for code, text in seen if _xid_class(code) == kind]
            if not mine:
                continue
            signatures = [XID_CLASSES[kind]] + (["gpu_fallen_off_bus"] if any(c == 79 for c, _ in mine) else [])
            findings.append(gpu_identity.finding(
                gpu, "fail" if kind == "critical" else "warn", signatures, mine[-1][1],
                metrics={"xid_%d_count" % code: codes.count(code) for code, _ in mine}))
    # a GPU with Xids of two classes has an entry per class: each class is an event of its own
    return sorted(findings, key=lambda e: (e["index"] is None, e["index"] or 0, e.get("bus_id") or "", e["status"]))
