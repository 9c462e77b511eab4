"""Command line: python -m agents.cudaprobe [--mode quick|standard|full|burnin|watch] [--json] [--only ...]
[--skip ...], and python -m agents.cudaprobe health [...] (agents.cudaprobe.health: the node-local health check for
Slurm and node-problem-detector)."""

import argparse
import json
import os
import sys
import threading

from agents.cudaprobe import AGENT_VERSION, children, gpu_identity, proc, readahead
from agents.cudaprobe.engine import Context, record_of, run_checks, select
from agents.cudaprobe.model import LAYERS, SKIP
from agents.cudaprobe.registry import ALL_MODES, WATCH, load_all
from agents.cudaprobe.render import render_table


EXIT_ORPHANED = 3


def _csv(value):
    return [item.strip() for item in value.split(",") if item.strip()]


def _json_object(value):
    try:
        found = json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError("not JSON: %s" % exc)
    if not isinstance(found, dict):
        raise argparse.ArgumentTypeError("not a JSON object")
    return found


def build_parser():
    parser = argparse.ArgumentParser(prog="cudaprobe", description="Layered validation of a GPU node.")
    parser.add_argument("--mode", choices=ALL_MODES, default="quick",
                        help="quick: L0-L4 without benchmarks; standard: everything, short benchmarks; full: longer; "
                        "burnin: full, then L7 stress (sustained load, memory patterns, silent-corruption checks); "
                        "watch: the light look between validations (L0-L1 and the fabric, no torch, about a second)")
    parser.add_argument("--burnin-seconds", type=int, default=300, metavar="N",
                        help="burnin: seconds of sustained load (L7 stress.sustained); default 300")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (progress goes to stderr)")
    parser.add_argument("--only", type=_csv, default=[], help="layers or check ids, comma separated (L1,cuda.matmul)")
    parser.add_argument("--skip", type=_csv, default=[], help="layers or check ids to leave out")
    parser.add_argument("--master-port", type=int, help="port for local rendezvous (default: a free one)")
    parser.add_argument("--peer-role", choices=("rank0", "rank1"), help="run the cross-node pair test as this rank")
    parser.add_argument("--master", help="ADDR:PORT of rank 0 for the cross-node pair")
    parser.add_argument("--world", type=int, default=2, help="ranks in the cross-node collective (2: a pair)")
    parser.add_argument("--rank", type=int, help="this node's rank in a cross-node collective of --world ranks "
                        "(rank 0 listens at --master); --peer-role rank0 / rank1 is --rank 0 / 1 of 2")
    parser.add_argument("--peer-timeout", type=float, default=60.0, help="seconds to wait for the peer")
    parser.add_argument("--since", metavar="ISO_TIME", help="the node's previous validation: kernel-log Xid "
                        "errors older than this are history, not a failure")
    parser.add_argument("--fabric-previous", metavar="JSON", type=_json_object, help="the node's previous "
                        "validation's fabric counters, {check id: {metric: value}} (zeros left out): growth warns")
    parser.add_argument("--ib-rate", metavar="GBPS", type=float, help="the InfiniBand rate this node's ports "
                        "should run at (Gb/s); a slower port fails")
    parser.add_argument("--record", metavar="FILE", help="also write the GPU tasks' raw outcomes and the run's facts "
                        "to FILE (JSON), for replaying the judging on real figures")
    parser.add_argument("--exit-with-stdin", action="store_true", help="stop (workers included) when standard "
                        "input closes: the dashboard's worker holds it open, so the agent ends when that worker dies")
    parser.add_argument("--with-dcgm", choices=("r1", "r2", "r3"), help="also run DCGM's diagnostic at this level "
                        "(dcgmi diag -r N -j) and report each of its tests as a check dcgm.<test>")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument("--version", action="version", version=AGENT_VERSION)
    return parser


def add_not_selected(report, specs, chosen, mode, only):
    """--only: the mode's other checks are in the report too, skipped with the reason (a second attempt of a few
    checks still says what it left out)."""
    ran = {spec.id for spec in chosen}
    reason = "not run: --only %s (and what it needs)" % ",".join(only)
    left_out = [spec for spec in select(specs, mode) if spec.id not in ran]
    report["checks"].extend({"id": spec.id, "layer": spec.layer, "title": spec.title, "status": SKIP, "duration_s": 0,
                             "summary": reason, "metrics": {}, "evidence": "", "signatures": [], "blocked_by": None}
                            for spec in left_out)
    order = {spec.id: (LAYERS.index(spec.layer), spec.order) for spec in specs}
    report["checks"].sort(key=lambda c: order.get(c["id"], (len(LAYERS), 0)))


def watch_stdin(ctx):
    """Whoever started us holds our stdin open; when it closes (that process died, the SSH session dropped), end
    the GPU workers and exit, so no orphan keeps a GPU busy."""

    def watch():
        # The file descriptor, not sys.stdin: a daemon thread blocked in sys.stdin's read holds its buffer's lock,
        # and at exit the interpreter waits 1 s for that lock, then aborts (exit status 134, not the verdict's):
        # a second on every run through the dashboard, which always passes --exit-with-stdin (issue 33).
        while os.read(sys.stdin.fileno(), 65536):
            pass
        try:
            proc.kill_all(for_good=True)  # a command in flight (nvidia-smi that hangs, say)
            ctx.close()  # the GPU workers
        finally:
            os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, daemon=True, name="stdin-watch").start()


def prestart_workers(ctx, chosen):
    """Start the first GPU workers now, so that they import torch while L0-L2 run (torch.import waits for them
    anyway): rank 0, and rank 1 where gloo needs two ranks even on a one-GPU host; when the run trains, GPU 0's
    training worker too, which then preloads torch._dynamo while L3-L5 run. The other GPUs' workers start once L1
    has counted the GPUs (checks.torch.torch_info)."""
    ids = {spec.id for spec in chosen}
    if "torch.import" not in ids:
        return
    children.local_pool(ctx).start([0] if ctx.mode == "quick" else [0, 1])
    if "train.resnet18" in ids:
        children.train_pool(ctx).start([0])


def start_watch(ctx):
    """A watch imports no torch and starts no GPU worker: the workers' bytecode cache and its compile ahead are
    not for it; its driver reads start side by side (readahead.py)."""
    ctx.bytecode = {"off": "a watch starts no torch"}
    readahead.start(ctx)


def run_report(chosen, ctx, events=None):
    """The report of the chosen checks (what main and the health command share)."""
    if ctx.report_mode == WATCH:
        start_watch(ctx)
    try:
        report = run_checks(chosen, ctx, events=events)
    finally:
        if ctx.report_mode == WATCH:
            readahead.stop()
    if ctx.report_mode == WATCH:
        gpu_identity.attribute(report, ctx)  # every finding of a watch is an event keyed by GPU where it names one
    return report


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["health"]:
        from agents.cudaprobe import health  # only the health command needs it
        return health.main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    specs = load_all()
    if args.list:
        for spec in sorted(specs, key=lambda s: (LAYERS.index(s.layer), s.order)):
            print("%-9s %-26s %-22s %s" % (spec.layer, spec.id, ",".join(spec.modes), spec.title))
        return 0
    if args.burnin_seconds < 10:
        parser.error("--burnin-seconds must be 10 or more")
    options = {"master_port": args.master_port, "peer_timeout": args.peer_timeout, "since": args.since,
               "burnin_seconds": args.burnin_seconds, "fabric_previous": args.fabric_previous,
               "ib_rate_gbps": args.ib_rate, "with_dcgm": args.with_dcgm}
    skip = list(args.skip)
    if not args.with_dcgm:  # DCGM's diagnostic only where asked for (checks/dcgm.py): not even listed as left out
        specs = [spec for spec in specs if not spec.id.startswith("dcgm.")]
    if args.peer_role and args.rank is not None:
        parser.error("give --peer-role or --rank, not both")
    if args.peer_role:
        if not args.master or ":" not in args.master or args.world != 2:
            parser.error("--peer-role needs --master ADDR:PORT and --world 2")
        address, _, port = args.master.rpartition(":")
        options.update(peer_role=args.peer_role, master=(address, int(port)))
    elif args.rank is not None:
        if not args.master or ":" not in args.master or args.world < 2 or not 0 <= args.rank < args.world:
            parser.error("--rank K needs --master ADDR:PORT and --world N with 0 <= K < N, N >= 2")
        address, _, port = args.master.rpartition(":")
        options.update(peer_role="rank%d" % args.rank, peer_rank=args.rank, peer_world=args.world,
                       master=(address, int(port)))
    else:
        skip.append("comm.peer")
    chosen = select(specs, args.mode, args.only, skip)
    ctx = Context(args.mode, options)
    if args.exit_with_stdin:
        watch_stdin(ctx)
    if args.record:
        ctx.records = []
    prestart_workers(ctx, chosen)
    report = run_report(chosen, ctx, events=sys.stderr if args.json else None)
    if args.only:
        add_not_selected(report, specs, chosen, args.mode, args.only)
    if args.record:
        with open(args.record, "w") as fh:
            json.dump(record_of(ctx, report), fh, indent=1, sort_keys=True, default=str)
    if args.json:
        sys.stdout.write(json.dumps(report, indent=1, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_table(report))
    return {"pass": 0, "warn": 0}.get(report["verdict"], 1)
