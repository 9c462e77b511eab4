"""L1 fabric: NVLink inside the node, NVSwitch / Fabric Manager, InfiniBand / RoCE ports, PCIe AER counters.

Links that are down fail; error counters are judged by their growth since the node's previous validation
(agents.cudaprobe.counters, the dashboard passes --fabric-previous) and go into the metrics, so drift can chart
them. NVML first (agents.cudaprobe.nvml_fabric, in a child under the budget), nvidia-smi as the fallback; sysfs
under CUDAPROBE_SYSFS (agents.cudaprobe.sysfs).
"""

import json
import os
import re

from agents.cudaprobe import counters, fabric_expectations, nvsmi, nvsmi_fabric, proc, sysfs
from agents.cudaprobe.checks.driver import DMESG_TIME, _boot_time, _since, _smi, nvml_child
from agents.cudaprobe.model import failed, passed, skipped, warned
from agents.cudaprobe.registry import IN_WATCH_TOO, check

SXID_LINE = re.compile(r"(nvidia-nvswitch\d*): SXid \(PCI:([^)]*)\): (\d+), (Fatal|Non-fatal)", re.I)
NO_FABRIC = (None, "", "N/A", "Not Supported")
ROCE_MIN_MTU = 4200  # a RoCE path MTU of 4096 fits only in an interface MTU of 4096 + the RoCE headers


def _nvml_fabric(ctx):
    """NVML's NVLink and fabric facts (agents.cudaprobe.nvml_fabric), or {"error": ...}."""
    return nvml_child(ctx, "agents.cudaprobe.nvml_fabric", "nvml_fabric")


def _links_via_smi(ctx):
    """([{"index", "name", "links": [{"link", "active", "speed_gbs", "counters"}]}] from nvidia-smi nvlink -s / -e,
    the raw text, why no counter was read or ""), or (None, the error text, "")."""
    status = _smi(ctx, ["nvlink", "-s"])
    if not status.ok:
        return None, "nvidia-smi nvlink -s: %s" % (nvsmi.failure_signature(status) or status.combined()[:200]), ""
    gpus = nvsmi_fabric.parse_link_status(status.stdout)
    errors = _smi(ctx, ["nvlink", "-e"])
    found = nvsmi_fabric.parse_link_errors(errors.stdout) if errors.ok else {}
    for gpu in gpus:
        for link in gpu["links"]:
            link["counters"] = found.get(gpu["index"], {}).get(link["link"], {})
    unread = "" if found else "nvidia-smi nvlink -e %s" % (
        "listed no counter" if errors.ok else "failed: %s" % (nvsmi.failure_signature(errors)
                                                              or errors.combined()[:200]))
    return gpus, status.stdout + ("\n" + errors.stdout if errors.ok else ""), unread


def _board(ctx, gpus):
    """(fabric_expectations row or None, model name, GPU count): the names nvidia-smi -L gave, else those the link
    listing carries; a host of mixed models has no row."""
    listed = ctx.facts.get("driver_gpus") or gpus or []
    names = sorted({g.get("name") for g in listed if g.get("name")})
    if len(names) != 1:
        return None, " + ".join(names) or "an unknown GPU", len(listed)
    return fabric_expectations.board_for(names[0]), names[0], len(listed)


def _down_links(gpus, topology_nvlink):
    """(gpu, link) pairs that are down: inactive where another GPU of the host has that link active, or every
    link of a GPU inactive while the topology joins the GPUs by NVLink. Link slots no GPU uses are not links."""
    used = {link["link"] for gpu in gpus for link in gpu["links"] if link["active"]}
    down = []
    for gpu in gpus:
        none_active = not any(link["active"] for link in gpu["links"])
        for link in gpu["links"]:
            if not link["active"] and (link["link"] in used or (none_active and topology_nvlink)):
                down.append((gpu["index"], link["link"]))
    return down


def _short_of(gpus, expected, bridged):
    """'GPU n: a of b links active (...)' for each GPU with fewer links listed or active than its SKU has. A bridge
    board's GPU with no link active has no bridge fitted: only some active is short."""
    short = []
    for gpu in gpus:
        active = [link["link"] for link in gpu["links"] if link["active"]]
        if len(active) >= expected or (bridged and not active):
            continue
        inactive = [link["link"] for link in gpu["links"] if not link["active"]]
        short.append("GPU %d: %d of %d links active (%s)" % (gpu["index"], len(active), expected, "; ".join(
            part for part in ("%d listed" % len(gpu["links"]) if len(gpu["links"]) < expected else "",
                              "link %s inactive" % ",".join(map(str, inactive[:18])) if inactive else "") if part)))
    return short


@check("fabric.nvlink", "L1", "NVLink state, speed and error counters", requires=["driver.topology"],
       modes=IN_WATCH_TOO)
def fabric_nvlink(ctx):
    topology = (ctx.facts.get("topology") or {}).get("links") or {}
    topology_nvlink = any(kind.startswith("NV") for kind in topology.values())
    nvml = _nvml_fabric(ctx)
    if "error" not in nvml:
        gpus, via, raw, unread = nvml["gpus"], "NVML", "", ""
        if not any(link.get("counters") for gpu in gpus for link in gpu["links"]):
            unread = "NVML returned no error counter"
    else:
        gpus, raw, unread = _links_via_smi(ctx)
        via = "nvidia-smi nvlink (NVML not used: %s)" % nvml.get("error")
    board, model, count = _board(ctx, gpus)
    expected = fabric_expectations.links_per_gpu(board, model) if board and board["domain"] != "none" else 0
    # An SXM board's links must all be up: HGX ones where the host holds more than one of its GPUs (a single GPU
    # of an HGX board lent to a VM has no peer here), an NVL72 tray's always (they go to the switch trays).
    sxm = bool(expected) and (board["domain"] == "nvl72" or (board["domain"] == "hgx" and count > 1))
    if gpus is None:
        if topology_nvlink or sxm:
            return warned("NVLinks not read (%s)%s: not judged" % (raw, (
                "; this %s has %d per GPU" % (board["key"], expected)) if sxm else
                "; the topology joins the GPUs by NVLink"), evidence=raw, signatures=["nvlink_unreadable"])
        return passed("no NVLink to read (%s)" % raw, metrics={"nvlink_active_links": 0})
    active = sum(1 for gpu in gpus for link in gpu["links"] if link["active"])
    listed = sum(len(gpu["links"]) for gpu in gpus)
    evidence_raw = raw or json.dumps(gpus)[:2000]
    if sxm and not listed:
        why = "%s listed %d GPU(s) but no link" % (via, len(gpus))
        if topology_nvlink:
            return warned("NVLinks not read: %s, while the topology joins the GPUs by NVLink (%s); this %s has %d "
                          "per GPU: not judged" % (why, ", ".join(sorted(set(topology.values()))), board["key"],
                                                   expected), evidence=evidence_raw,
                          metrics={"nvlink_active_links": 0, "nvlink_links_expected_per_gpu": expected},
                          signatures=["nvlink_unreadable"])
        return failed("no NVLink on this %s, whose GPUs have %d each: %s and the topology shows none: the links "
                      "are down, the fabric is not trained or NVLink is disabled" % (board["key"], expected, why),
                      evidence=evidence_raw, metrics={"nvlink_active_links": 0,
                                                      "nvlink_links_expected_per_gpu": expected},
                      signatures=["nvlink_link_down"])
    if not active and not topology_nvlink and not sxm:
        if expected and board["domain"] == "hgx":
            return passed("no NVLink in use: one %s GPU on this host, whose NVLinks join it to no other GPU here "
                          "(%d listed, none active; read through %s)" % (model, listed, via),
                          metrics={"nvlink_active_links": 0}, evidence=evidence_raw)
        return passed("no NVLink on this host (%d GPU(s), no active link; read through %s)%s" % (
            len(gpus), via, "; no NVLink bridge in use on this %s (if it should have bridges, they are missing or "
            "not seated)" % board["key"] if board and board["domain"] == "bridge" else ""),
            metrics={"nvlink_active_links": 0}, evidence=evidence_raw)
    down = _down_links(gpus, topology_nvlink)
    short = _short_of(gpus, expected, board["domain"] == "bridge") if expected and (
        sxm or board["domain"] == "bridge") else []
    current, lines = {}, []
    speeds = [link.get("speed_gbs") or (link.get("speed_mbps") or 0) / 1000.0 or None
              for gpu in gpus for link in gpu["links"] if link["active"]]
    speeds = [s for s in speeds if s]
    for gpu in gpus:
        totals = {}
        for link in gpu["links"]:
            for name, value in (link.get("counters") or {}).items():
                totals[name] = totals.get(name, 0) + value
        for name, value in totals.items():
            current["nvlink_%s.gpu%d" % (name, gpu["index"])] = value
        on = [link["link"] for link in gpu["links"] if link["active"]]
        noisy = ["link %d %s" % (link["link"], ",".join("%s=%d" % kv for kv in sorted(link["counters"].items())
                                                        if kv[1]))
                 for link in gpu["links"] if any((link.get("counters") or {}).values())]
        lines.append("GPU %d: %d of %d links active; counters %s%s" % (
            gpu["index"], len(on), len(gpu["links"]), ", ".join("%s=%d" % kv for kv in sorted(totals.items()))
            or "none read", ("; " + "; ".join(noisy)) if noisy else ""))
    metrics = dict(current, nvlink_active_links=active, nvlink_links_down=len(down),
                   nvlink_errors_total=sum(current.values()))
    if expected:
        metrics["nvlink_links_expected_per_gpu"] = expected
    if speeds:
        metrics["nvlink_speed_min_gbs"] = round(min(speeds), 3)
    evidence = "\n".join(["read through %s" % via] + (["expected: %d NVLinks per GPU (%s)" % (
        expected, board["key"])] if expected else []) + (["counters not read: %s" % unread] if unread else [])
        + lines + ([raw[:2000]] if raw else []))
    if down:
        return failed("NVLink down: %s (%s): a link, its cable tray or an NVSwitch is faulty, or the fabric is "
                      "not trained" % (", ".join("GPU %d link %d" % pair for pair in down[:12]), (
                          "the topology joins these GPUs by NVLink" if topology_nvlink else
                          "the same link is up on another GPU here") + (
                          "; this %s has %d per GPU" % (board["key"], expected) if short else "")),
                      evidence=evidence, metrics=metrics, signatures=["nvlink_link_down"])
    if short:
        return failed("NVLinks short of this %s's %d per GPU: %s: a link, its cable tray, bridge or NVSwitch is "
                      "faulty, or the fabric is not trained" % (board["key"], expected, "; ".join(short[:8])),
                      evidence=evidence, metrics=metrics, signatures=["nvlink_link_down"])
    grown, since_reset, baseline = counters.growth("fabric.nvlink", current, ctx.options.get("fabric_previous"))
    if grown or since_reset:
        return warned("NVLink error counters %s" % counters.describe(grown, since_reset, baseline),
                      evidence=evidence, metrics=metrics,
                      signatures=["nvlink_errors_growing" if grown else "nvlink_errors_since_reset"])
    # "no error counted" only of the GPUs whose counters were read
    unread_gpus = [gpu["index"] for gpu in gpus if any(link["active"] for link in gpu["links"])
                   and not any(link.get("counters") for link in gpu["links"])]
    if unread:  # no counter read at all
        counted = ", error counters not read (%s)" % unread
    elif unread_gpus:
        counted = ", no error counted on the GPUs whose counters were read (GPU %s: not read)%s" % (
            ",".join(map(str, unread_gpus)), " since the previous validation" if baseline else "")
    else:
        counted = ", no error counted%s" % (" since the previous validation" if baseline else "")
    return passed("%d NVLink(s) active over %d GPU(s)%s%s%s" % (
        active, len(gpus), " at %.1f GB/s" % min(speeds) if speeds else "",
        " (%d per GPU, as this %s has)" % (expected, board["key"]) if short == [] and sxm else "", counted),
        evidence=evidence, metrics=metrics)


def _fabric_states(ctx):
    """[{"bus_id", "state", "status", "clique_id", "cluster_uuid"}] per GPU: NVML's fabric info first, else
    nvidia-smi -q's Fabric section."""
    nvml = _nvml_fabric(ctx)
    if "error" not in nvml and all(gpu.get("fabric") for gpu in nvml["gpus"]):
        return [dict(gpu["fabric"], bus_id=gpu["bus_id"]) for gpu in nvml["gpus"]], "NVML"
    result = _smi(ctx, ["-q"], timeout=min(ctx.budget_s, 30))
    if not result.ok:
        return [], "nvidia-smi -q failed (%s)" % nvsmi.failure_signature(result)
    return nvsmi_fabric.parse_fabric(result.stdout), "nvidia-smi -q"


def _sxid_lines(ctx):
    """(new, old) SXid lines of the kernel log (old: before --since), or None where dmesg is unreadable."""
    result = proc.run(["dmesg"], 10, env=ctx.environ)
    if result.missing or not result.ok:
        return None
    boot, since = _boot_time(ctx), _since(ctx)
    new, old = [], []
    for line in result.stdout.splitlines():
        if not SXID_LINE.search(line):
            continue
        stamp = DMESG_TIME.match(line)
        when = boot + float(stamp.group(1)) if boot is not None and stamp else None
        (old if since is not None and when is not None and when < since else new).append(line)
    return new, old


def _process_running(ctx, prefix):
    """Whether a process whose name (/proc/<pid>/comm, 15 characters at most) starts with `prefix` runs: what
    `pgrep` reads, without depending on systemd (a container or a non-systemd host runs them too)."""
    proc_dir = ctx.path("PROC_DIR", "/proc")
    for pid in os.listdir(proc_dir) if os.path.isdir(proc_dir) else []:
        comm = sysfs.read(os.path.join(proc_dir, pid, "comm")) if pid.isdigit() else None
        if comm and comm.startswith(prefix):
            return True
    return False


def _fabric_manager_running(ctx):
    return _process_running(ctx, "nv-fabricmanag")  # nv-fabricmanager, cut to 15 characters


def _imex_running(ctx):
    return _process_running(ctx, "nvidia-imex")


NO_CLUSTER = (None, "", "N/A", "00000000-0000-0000-0000-000000000000")
NO_CLIQUE = ("None", "", "N/A", "0")


def _nvl72_fabric(ctx, board, states, evidence, metrics):
    """An NVL72 compute tray: its GPUs registered with the NVLink domain the switch trays set up (state Completed,
    status Success, one clique, a cluster UUID), and IMEX running here. No Fabric Manager on the tray."""
    sources = board["sources"]
    where = "the NVLink domain is set up by the NVLink switch trays (NMX), not on this tray: see %s" % (
        sources["fabric_manager"])
    unregistered = [s for s in states if s["state"] not in ("Completed", "In Progress")]
    if not states or unregistered:
        return failed("GPU %s not registered with the NVLink domain (fabric state %s): %s" % (
            ", ".join(s["bus_id"] for s in unregistered) or "(none listed)",
            ", ".join(sorted({str(s["state"]) for s in unregistered})) or "not reported", where),
            evidence=evidence, metrics=metrics, signatures=["fabric_not_registered"])
    bad_status = [s for s in states if s["state"] == "Completed" and s["status"] not in ("Success", None)]
    if bad_status:
        return failed("GPU %s fabric registration failed: %s (%s)" % (
            ", ".join(s["bus_id"] for s in bad_status), ", ".join(sorted({s["status"] for s in bad_status})), where),
            evidence=evidence, metrics=metrics, signatures=["fabric_registration_failed"])
    training = [s for s in states if s["state"] == "In Progress"]
    if training:
        return warned("GPU %s registration with the NVLink domain still in progress: re-validate in a minute" %
                      ", ".join(s["bus_id"] for s in training), evidence=evidence, metrics=metrics,
                      signatures=["fabric_in_progress"])
    no_cluster = [s for s in states if s.get("cluster_uuid") in NO_CLUSTER or str(s.get("clique_id")) in NO_CLIQUE]
    if no_cluster:
        return failed("GPU %s registered but in no NVLink domain (ClusterUUID %s, CliqueId %s): multi-node NVLink "
                      "cannot be used (%s)" % (", ".join(s["bus_id"] for s in no_cluster),
                                               no_cluster[0].get("cluster_uuid") or "not reported",
                                               no_cluster[0].get("clique_id"), sources["fabric_state"]),
                      evidence=evidence, metrics=metrics, signatures=["fabric_no_cluster"])
    domains = sorted({(str(s.get("cluster_uuid")), str(s.get("clique_id"))) for s in states})
    if len(domains) > 1:
        return failed("the GPUs of this tray are in different NVLink partitions: %s" % "; ".join(
            "cluster %s clique %s: %s" % (cluster, clique, ", ".join(
                s["bus_id"] for s in states if (str(s.get("cluster_uuid")), str(s.get("clique_id"))) ==
                (cluster, clique))) for cluster, clique in domains), evidence=evidence, metrics=metrics,
            signatures=["fabric_clique_split"])
    cluster, clique = domains[0]
    # IMEX is not judged: a Slurm domain runs it as a service, Kubernetes (the DRA driver's ComputeDomains) starts
    # it per job, so a healthy tray may show none; what it runs is stated.
    imex = "nvidia-imex running" if _imex_running(ctx) else (
        "nvidia-imex not running here (needed for memory shared across trays; under Kubernetes started per job: %s)"
        % sources["imex"])
    return passed("%d GPU(s) in NVLink domain %s (clique %s; state Completed, status Success); %s; no Fabric Manager "
                  "needed on this %s" % (len(states), cluster, clique, imex, board["key"]),
                  evidence=evidence, metrics=metrics)


@check("fabric.nvswitch", "L1", "NVSwitch fabric: Fabric Manager, GPU fabric state, SXid",
       requires=["driver.nvidia_smi"], modes=IN_WATCH_TOO)
def fabric_nvswitch(ctx):
    states, via = _fabric_states(ctx)
    board, model, count = _board(ctx, None)
    dev = ctx.path("DEV_DIR", "/dev")
    switches = sorted(n for n in (os.listdir(dev) if os.path.isdir(dev) else []) if n.startswith("nvidia-nvswitch"))
    sxid = _sxid_lines(ctx)
    new, old = sxid if sxid is not None else ([], [])
    lines = ["GPU %s: fabric state %s, status %s, clique %s, cluster %s" % (
        s["bus_id"], s["state"], s["status"], s.get("clique_id"), s.get("cluster_uuid")) for s in states]
    lines += ["NVSwitch devices: %s" % (" ".join(switches) or "none in %s" % dev), "read through %s" % via]
    if board:
        lines.append("board: %s (%s); rules from %s" % (board["key"], board["domain"], "; ".join(
            "%s: %s" % kv for kv in sorted(board["sources"].items()))))
    if sxid is None:
        lines.append("kernel log not readable: SXid not checked")
    lines += (["SXid before the previous validation:"] + old[-10:] if old else []) + (
        ["SXid:"] + new[-30:] if new else [])
    evidence = "\n".join(lines)
    metrics = {"sxid_count": len(new), "sxid_count_before_previous_validation": len(old),
               "nvswitch_devices": len(switches)}
    if board and board["domain"] in ("none", "bridge"):
        return passed("no NVSwitch fabric on a %s: %s, nothing for a Fabric Manager to set up (fabric state %s)" % (
            board["key"], "NVLink through bridges" if board["domain"] == "bridge" else "no NVLink",
            ", ".join(sorted({str(s["state"]) for s in states})) or "not reported"), evidence=evidence,
            metrics=metrics)
    if board and board["domain"] == "nvl72":
        return _nvl72_fabric(ctx, board, states, evidence, metrics)
    hgx = bool(board) and count > 1  # one GPU of an HGX board lent to a VM: its fabric is not this host's to run
    reported = any(s["state"] not in NO_FABRIC for s in states)
    if hgx and not board["fabric_state"] and switches and not _fabric_manager_running(ctx):
        # HGX A100: the driver reports no fabric state; without the Fabric Manager the NVSwitches route nothing (a VM
        # given GPUs but not the NVSwitches has its fabric run by the host's service VM: nothing to ask for here)
        return failed("the Fabric Manager (nvidia-fabricmanager) is not running on this %s: its NVSwitches carry "
                      "no NVLink traffic until it configures them (%s)" % (
                          board["key"], board["sources"]["fabric_manager"]), evidence=evidence, metrics=metrics,
                      signatures=["fabric_manager_not_running"])
    if hgx and board["fabric_state"] and not reported:
        return warned("fabric state not reported for the %d GPU(s) of this %s (%s): the registration with the "
                      "Fabric Manager was not read, so not judged" % (count, board["key"], via), evidence=evidence,
                      metrics=metrics, signatures=["fabric_state_unread"])
    board_seen = reported or switches or new or old
    if not board_seen:
        return passed("no NVSwitch fabric on this board: nothing to check (fabric state %s)" % (", ".join(
            sorted({str(s["state"]) for s in states})) or "not reported"), evidence=evidence, metrics=metrics)
    fatal = [line for line in new if SXID_LINE.search(line).group(4).lower() == "fatal"]
    not_started = [s for s in states if s["state"] == "Not Started"]
    training = [s for s in states if s["state"] == "In Progress"]
    bad_status = [s for s in states if s["state"] == "Completed" and s["status"] not in ("Success", None)]
    history = "; %d SXid line(s) from before the previous validation kept as history" % len(old) if old else ""
    if not_started:
        running = _fabric_manager_running(ctx)
        return failed("GPU %s not registered with the fabric (state Not Started): %s" % (
            ", ".join(s["bus_id"] for s in not_started),
            "the Fabric Manager runs, see its log" if running else "the Fabric Manager (nvidia-fabricmanager) is "
            "not running here"), evidence=evidence, metrics=metrics, signatures=["fabric_manager_not_running"])
    if bad_status:
        return failed("GPU %s fabric registration failed: %s" % (
            ", ".join(s["bus_id"] for s in bad_status), ", ".join(sorted({s["status"] for s in bad_status}))),
            evidence=evidence, metrics=metrics, signatures=["fabric_registration_failed"])
    if fatal:
        codes = sorted({SXID_LINE.search(line).group(3) for line in fatal})
        return failed("fatal SXid %s from the NVSwitch(es)%s: the NVSwitch or its links need a reset (reboot) "
                      "and, if it repeats, the vendor" % (", ".join(codes), history), evidence=evidence,
                      metrics=metrics, signatures=["sxid_fatal"])
    if training and hgx and not _fabric_manager_running(ctx):
        # HGX B200 and later: without the Fabric Manager (and its NVLSM) the GPUs stay In Progress for good
        return failed("GPU %s fabric registration in progress with no Fabric Manager (nvidia-fabricmanager) "
                      "running on this %s: it never completes without it (%s)" % (
                          ", ".join(s["bus_id"] for s in training), board["key"], board["sources"]["fabric_manager"]),
                      evidence=evidence, metrics=metrics, signatures=["fabric_manager_not_running"])
    if training:
        return warned("GPU %s fabric training still in progress: re-validate in a minute" % ", ".join(
            s["bus_id"] for s in training), evidence=evidence, metrics=metrics, signatures=["fabric_in_progress"])
    if new:
        codes = sorted({SXID_LINE.search(line).group(3) for line in new})
        return warned("non-fatal SXid %s from the NVSwitch(es)%s" % (", ".join(codes), history), evidence=evidence,
                      metrics=metrics, signatures=["sxid_nonfatal"])
    if reported:
        return passed("%d GPU(s) in the fabric (state Completed, status Success), no SXid%s" % (
            len(states), history), evidence=evidence, metrics=metrics,
            signatures=["sxid_history"] if old else [])
    return passed("%d NVSwitch device(s)%s, no SXid%s (this board reports no GPU fabric state)" % (
        len(switches), ", the Fabric Manager running" if hgx else "", history), evidence=evidence, metrics=metrics,
                  signatures=["sxid_history"] if old else [])


def _port_name(port):
    return "%s/%s" % (port["hca"], port["port"])


@check("fabric.infiniband", "L1", "InfiniBand / RoCE ports: state, rate, counters", modes=IN_WATCH_TOO)
def fabric_infiniband(ctx):
    base = sysfs.root(ctx.environ)
    expected = ctx.options.get("ib_rate_gbps")
    ports = sysfs.ib_ports(base)
    if not ports:
        where = os.path.join(base, "class", "infiniband")
        if expected:
            return failed("this node should have InfiniBand at %g Gb/s but there is no HCA under %s" % (
                expected, where), signatures=["ib_port_missing"])
        return passed("no InfiniBand or RoCE HCA under %s: nothing to check" % where, metrics={"ib_ports": 0})
    if expected and not any((port["link_layer"] or "").lower() == "infiniband" for port in ports):
        # RoCE ports are Ethernet: a node that should be on the InfiniBand fabric is not, however well they run
        return failed("this node should have InfiniBand at %g Gb/s but its HCA ports are RoCE only (link layer %s): "
                      "%s" % (expected, "/".join(sorted({str(p["link_layer"]) for p in ports})), ", ".join(
                          "%s %s" % (_port_name(p), p["rate"]) for p in ports)),
                      evidence="\n".join("%s (%s, PCI %s): %s" % (_port_name(p), p["link_layer"], p["bdf"], p["rate"])
                                         for p in ports), metrics={"ib_ports": len(ports), "ib_ports_infiniband": 0},
                      signatures=["ib_port_missing"])
    fails, warns, signatures, lines, current = [], [], [], [], {}
    fastest = {}  # per link layer: a RoCE port is not compared with the InfiniBand ones
    for port in ports:
        fastest[port["link_layer"]] = max(fastest.get(port["link_layer"], 0), port["rate_gbps"] or 0)
    for port in ports:
        name = _port_name(port)
        state, phys = sysfs.state_name(port["state"]), sysfs.state_name(port["phys_state"])
        line = "%s (%s, PCI %s): %s / %s, %s" % (name, port["link_layer"], port["bdf"], state, phys, port["rate"])
        if state != "ACTIVE" or phys != "LinkUp":
            fails.append("%s is %s / %s" % (name, state or "?", phys or "?"))
            signatures.append("ib_port_down")
        rate = port["rate_gbps"]
        infiniband = (port["link_layer"] or "").lower() == "infiniband"
        if expected and infiniband and rate is not None and rate < expected and state == "ACTIVE":
            fails.append("%s runs at %g Gb/s, below the %g Gb/s this node should have" % (name, rate, expected))
            signatures.append("ib_rate_low")
        elif not (expected and infiniband) and rate is not None and rate < fastest[port["link_layer"]] \
                and state == "ACTIVE":
            warns.append("%s runs at %g Gb/s while another %s port runs at %g Gb/s" % (
                name, rate, port["link_layer"], fastest[port["link_layer"]]))
            signatures.append("ib_rate_low")
        netdev = port.get("netdev")
        if (port["link_layer"] or "").lower() == "ethernet":
            if not netdev:
                warns.append("%s is RoCE but names no netdev" % name)
                signatures.append("roce_netdev_unknown")
            else:
                line += "; netdev %s %s, %s Mb/s, MTU %s" % (netdev["name"], netdev["operstate"],
                                                             netdev["speed_mbps"], netdev["mtu"])
                if netdev["operstate"] != "up":
                    fails.append("%s: its netdev %s is %s" % (name, netdev["name"], netdev["operstate"]))
                    signatures.append("roce_netdev_down")
                elif netdev["mtu"] is not None and netdev["mtu"] < ROCE_MIN_MTU:
                    warns.append("%s: netdev %s MTU %d (RoCE wants %d or more for a 4096-byte path MTU)" % (
                        name, netdev["name"], netdev["mtu"], ROCE_MIN_MTU))
                    signatures.append("roce_mtu_small")
        for counter, value in port["counters"].items():
            current["ib_%s.%s_%s" % (counter, port["hca"], port["port"])] = value
        line += "; " + ", ".join("%s=%d" % kv for kv in sorted(port["counters"].items()))
        lines.append(line)
    rates = [p["rate_gbps"] for p in ports if p["rate_gbps"]]
    metrics = dict(current, ib_ports=len(ports), ib_errors_total=sum(current.values()),
                   ib_ports_active=sum(1 for p in ports if sysfs.state_name(p["state"]) == "ACTIVE"))
    if rates:
        metrics["ib_rate_min_gbps"] = min(rates)
    grown, since_reset, baseline = counters.growth("fabric.infiniband", current, ctx.options.get("fabric_previous"))
    if grown or since_reset:
        warns.append("port error counters %s" % counters.describe(grown, since_reset, baseline))
        signatures.append("ib_errors_growing" if grown else "ib_errors_since_reset")
        if any(key.startswith("ib_link_downed.") for key, _, _ in grown):
            signatures.append("ib_link_flaps")
    evidence = "\n".join(lines + (["expected rate: %g Gb/s" % expected] if expected else []))
    if fails:
        return failed("; ".join(fails + warns), evidence=evidence, metrics=metrics, signatures=signatures)
    if warns:
        return warned("; ".join(warns), evidence=evidence, metrics=metrics, signatures=signatures)
    return passed("%d port(s) ACTIVE / LinkUp at %s Gb/s%s, no error counted%s" % (
        len(ports), "/".join("%g" % r for r in sorted(set(rates))) or "?",
        " (expected %g)" % expected if expected else "", " since the previous validation" if baseline else ""),
        evidence=evidence, metrics=metrics)


def _aer_functions(base):
    """[(bdf, what)]: the GPUs and HCAs, then each PCIe port above them (switch and root ports, where the errors
    of a bad riser, retimer or cable show), each port once, named after the first device below it."""
    functions = sysfs.gpu_and_hca_functions(base)
    seen = {bdf for bdf, _ in functions}
    ports = []
    for bdf, what in functions:
        for port in sysfs.upstream_ports(base, bdf):
            if port not in seen:
                seen.add(port)
                ports.append((port, "port above %s %s" % (what, bdf)))
    return functions, ports


@check("fabric.pcie_aer", "L1", "PCIe AER error counters of the GPUs and HCAs and the ports above them",
       modes=IN_WATCH_TOO)
def fabric_pcie_aer(ctx):
    base = sysfs.root(ctx.environ)
    functions, ports = _aer_functions(base)
    readings = [(bdf, what, sysfs.aer(base, bdf)) for bdf, what in functions + ports]
    readings = [r for r in readings if r[2] is not None]
    if not readings:
        return skipped("no AER counters for %s under %s (no AER capability, or a VM that hides it)" % (
            ", ".join("%s %s" % (what, bdf) for bdf, what in functions) or "any GPU or HCA",
            os.path.join(base, "bus", "pci", "devices")))
    current, lines, uncorrectable = {}, [], []
    for bdf, what, found in readings:
        for kind in ("correctable", "nonfatal", "fatal"):
            if kind in found:
                current["pcie_aer_%s.%s" % (kind, bdf)] = found[kind]
        detail = "; ".join("%s: %s" % (kind, ", ".join("%s=%d" % kv for kv in sorted(counts.items())))
                           for kind, counts in found["lines"].items() if counts)
        lines.append("%s %s: correctable=%s nonfatal=%s fatal=%s%s" % (
            what, bdf, found.get("correctable"), found.get("nonfatal"), found.get("fatal"),
            " (%s)" % detail if detail else ""))
        for kind in ("fatal", "nonfatal"):
            if found.get(kind):
                uncorrectable.append((kind, bdf, what, found[kind], ", ".join(
                    "%s=%d" % kv for kv in sorted(found["lines"].get(kind, {}).items()))))
    metrics = dict(current, pcie_aer_errors_total=sum(current.values()), pcie_aer_functions=len(readings),
                   pcie_aer_ports_read=sum(1 for bdf, *_ in readings if bdf in dict(ports)))
    evidence = "\n".join(lines + (["ports above the devices: none found (bus/pci/devices/<bdf> not a link into "
                                   "devices/)"] if not ports else []))
    grown, since_reset, baseline = counters.growth("fabric.pcie_aer", current, ctx.options.get("fabric_previous"))
    if uncorrectable:
        # Uncorrectable errors fail whenever counted, first validation or not: a count carried over from a previous
        # run would otherwise become the baseline and pass. The kernel counts them since boot (or the device's
        # reset), so one that is fixed and rebooted reads 0 again.
        fatal = any(kind == "fatal" for kind, *_ in uncorrectable)
        return failed("uncorrectable PCIe errors (AER) %s: %s: the link (riser, retimer, cable) or the device is "
                      "failing%s" % (
                          "since the previous validation" if baseline else "since boot", "; ".join(
                              "%s %s=%d on %s %s%s" % (kind, "TOTAL_ERR_" + kind.upper(), count, what, bdf,
                                                       " (%s)" % names if names else "")
                              for kind, bdf, what, count, names in uncorrectable[:8]),
                          "; counted before the previous validation too: they count until a reboot" if baseline and
                          not any(key.split(".")[0] in ("pcie_aer_fatal", "pcie_aer_nonfatal")
                                  for key, *_ in grown + since_reset) else ""),
                      evidence=evidence, metrics=metrics,
                      signatures=["pcie_aer_fatal" if fatal else "pcie_aer_nonfatal"])
    phrase = counters.describe(grown, since_reset, baseline)
    if grown or since_reset:
        return warned("PCIe AER correctable counters %s" % phrase, evidence=evidence, metrics=metrics,
                      signatures=["pcie_aer_errors_growing" if grown else "pcie_aer_errors_since_reset"])
    return passed("no PCIe AER error on %d function(s) (%d port(s) above the devices)%s" % (
        len(readings), metrics["pcie_aer_ports_read"], " since the previous validation" if baseline else ""),
        evidence=evidence, metrics=metrics)
