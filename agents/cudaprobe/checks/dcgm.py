"""DCGM's own diagnostic, where the node has it: `--with-dcgm r1|r2|r3` runs `dcgmi diag -r N -j` once, within a
budget, and each DCGM test becomes a check of ours, `dcgm.<test>`, with DCGM's error codes and messages as evidence.

Without --with-dcgm none of these checks is in the report (cli.py leaves the group out). dcgm.diag is the run of
dcgmi itself (missing: a skip with the reason; hung, refused, or an answer that is not its JSON: a failure); the
tests' checks judge what it said and skip when dcgmi did not run or did not run that test at this level.

Both output shapes are read: DCGM 3.x ("DCGM GPU Diagnostic", results per `gpu_id`/`gpu_ids`, statuses in any case,
display names such as "GPU Memory" and one test per Deployment item) and 4.x ("DCGM Diagnostic", results per
`entity_id`, `test_summary`, plugin names such as "memory"; NVIDIA/DCGM#296). Both name sets map onto one set of
ids (agents/cudaprobe/dcgmi.py); the 3.x Deployment items are one check, dcgm.software, as 4.x reports them.

A test DCGM calls a pass while it logged an error for it (NVIDIA/DCGM#284: DCGM_FR_MEMORY_ALLOC under a memory
PASS) is not a pass here: it fails with the signature dcgm_error_despite_pass."""

from agents.cudaprobe import proc
from agents.cudaprobe.checks import driver  # noqa: F401  declares L1's driver checks first: they lead the layer
from agents.cudaprobe.dcgmi import BUDGET_S, LEVELS, parse
from agents.cudaprobe.model import failed, passed, skipped, warned
from agents.cudaprobe.registry import check

# Our ids for DCGM's tests, in the order the report lists them, with their titles.
TESTS = (
    ("software", "DCGM deployment checks (driver, libraries, persistence, page retirement, processes)"),
    ("pcie", "DCGM PCIe bandwidth and latency"),
    ("memory", "DCGM GPU memory test"),
    ("diagnostic", "DCGM diagnostic (GEMM load, compares results)"),
    ("memtest", "DCGM memtest"),
    ("memory_bandwidth", "DCGM memory bandwidth"),
    ("sm_stress", "DCGM SM stress"),
    ("targeted_stress", "DCGM targeted stress"),
    ("targeted_power", "DCGM targeted power"),
    ("pulse_test", "DCGM pulse test"),
    ("nvbandwidth", "DCGM NVLink / copy-engine bandwidth (nvbandwidth)"),
    ("eud", "DCGM extended utility diagnostics (EUD)"),
)


def _gpu_list(gpus):
    return ", ".join(sorted(gpus, key=lambda g: (len(g), g)))


def judge(ident, entry):
    """The Outcome of one DCGM test."""
    errors = entry["errors"]
    lines = ["DCGM %s: %s" % (entry["name"], entry["status"].upper())]
    lines += ["GPU %s: %s" % (gpu, status.upper()) for gpu, status in sorted(entry["gpus"].items())]
    lines += ["GPU %s: DCGM error %s (%s): %s" % (gpu or "-", error_id if error_id is not None else "-", status,
                                                  message) for gpu, error_id, message, status in errors]
    lines += entry["info"][:20]
    evidence = "\n".join(lines)
    codes = sorted({int(e) for _, e, _, _ in errors if isinstance(e, int) or str(e).isdigit()})
    signatures = ["dcgm_error_%d" % code for code in codes[:10]]
    first = errors[0][2] if errors else ""
    metrics = {"dcgm_error_count": len(errors)}
    if entry["status"] == "fail":
        where = [gpu for gpu, status in entry["gpus"].items() if status == "fail"]
        return failed("DCGM %s failed%s%s" % (entry["name"], " on GPU %s" % _gpu_list(where) if where else "",
                                              ": %s" % first if first else ""),
                      evidence=evidence, metrics=metrics, signatures=["dcgm_%s_failed" % ident] + signatures)
    despite = [error for error in errors if error[3] == "pass"]  # an error under a result DCGM called a pass
    if entry["status"] == "pass" and despite:
        where = sorted({gpu for gpu, _, _, _ in despite if gpu})
        return failed("DCGM called %s a pass but logged an error%s: %s" % (
            entry["name"], " on GPU %s" % ", ".join(where) if where else "", despite[0][2]),
            evidence=evidence, metrics=metrics, signatures=["dcgm_error_despite_pass"] + signatures)
    if entry["status"] == "warn":
        return warned("DCGM %s warned%s" % (entry["name"], ": %s" % first if first else ""), evidence=evidence,
                      metrics=metrics, signatures=["dcgm_%s_warned" % ident] + signatures)
    if entry["status"] == "skip":
        return skipped("DCGM skipped %s%s" % (entry["name"], ": %s" % first if first else ""), evidence=evidence)
    ran = [gpu for gpu, status in entry["gpus"].items() if status == "pass"]
    left = [gpu for gpu, status in entry["gpus"].items() if status == "skip"]
    return passed("DCGM %s passed on GPU %s%s" % (entry["name"], _gpu_list(ran) or "-", "; skipped on GPU %s%s" % (
        _gpu_list(left), ": %s" % first if first else "") if left else ""), evidence=evidence, metrics=metrics)


def _level(ctx):
    return LEVELS.get(str(ctx.options.get("with_dcgm") or ""))


def _diag(ctx):
    """Run dcgmi once per agent run: ctx.facts["dcgm"] = {"level", "result", "parsed" or "error"}."""
    if "dcgm" not in ctx.facts:
        level = _level(ctx)
        budget = float(ctx.environ.get("CUDAPROBE_DCGM_TIMEOUT", 0)) or BUDGET_S[level]
        result = proc.run(["dcgmi", "diag", "-r", str(level), "-j"], budget, env=ctx.environ)
        fact = {"level": level, "result": result, "budget_s": budget}
        if not result.missing and not result.timed_out:
            try:
                fact["parsed"] = parse(result.stdout)
            except ValueError as exc:  # json.JSONDecodeError is one
                fact["error"] = str(exc)[:300]
        ctx.facts["dcgm"] = fact
    return ctx.facts["dcgm"]


@check("dcgm.diag", "L1", "DCGM diagnostic run (dcgmi diag -r N -j)", requires=["driver.nvidia_smi"], budget_s=2700)
def dcgm_diag(ctx):
    fact = _diag(ctx)
    result = fact["result"]
    if result.missing:
        return skipped("dcgmi is not installed on this node (DCGM's datacenter-gpu-manager package): no DCGM "
                       "diagnostic was run")
    if result.timed_out:
        return failed("dcgmi diag -r %d did not finish within %.0f s" % (fact["level"], fact["budget_s"]),
                      evidence=result.combined()[-2000:], signatures=["dcgm_diag_timeout"])
    if "parsed" not in fact:
        # dcgmi prints its own error text (e.g. "Error: unable to establish a connection to the specified host")
        return failed("dcgmi diag -r %d gave no diagnostic (exit %s): %s" % (
            fact["level"], result.returncode, " ".join(result.combined().split())[:200] or fact.get("error", "")),
            evidence=result.combined()[-2000:], signatures=["dcgm_diag_unavailable"])
    parsed = fact["parsed"]
    known = {ident for ident, _ in TESTS}
    lines = ["DCGM %s, level %d, dcgmi exit %s" % (parsed["version"] or "(version not stated)", fact["level"],
                                                   result.returncode)]
    lines += ["%s (%s): %s" % (ident, entry["name"], entry["status"]) for ident, entry in parsed["tests"].items()]
    if parsed["runtime_error"]:
        return failed("DCGM's diagnostic stopped: %s" % parsed["runtime_error"][:200], evidence="\n".join(lines),
                      signatures=["dcgm_runtime_error"])
    unknown = {ident: entry for ident, entry in parsed["tests"].items() if ident not in known}
    bad = [ident for ident, entry in unknown.items() if entry["status"] == "fail" or (
        entry["status"] == "pass" and entry["errors"])]
    if bad:  # a test this agent has no check for yet still counts
        return failed("DCGM test(s) without a check of their own failed: %s" % ", ".join(sorted(bad)),
                      evidence="\n".join(lines), signatures=["dcgm_other_test_failed"])
    return passed("DCGM %s ran %d test(s) at level %d" % (parsed["version"] or "", len(parsed["tests"]),
                                                          fact["level"]), evidence="\n".join(lines),
                  metrics={"dcgm_level": fact["level"], "dcgm_tests": len(parsed["tests"])})


def _test_check(ident):
    def run(ctx):
        fact = _diag(ctx)
        if "parsed" not in fact:
            return skipped("no DCGM result: see dcgm.diag")
        entry = fact["parsed"]["tests"].get(ident)
        if entry is None:
            return skipped("dcgmi diag -r %d did not run this test" % fact["level"])
        return judge(ident, entry)
    run.__name__ = "dcgm_%s" % ident
    return run


for _ident, _title in TESTS:
    # Not requires=["dcgm.diag"]: a failed run of dcgmi would turn its tests into "blocked" skips; they read the
    # one run (_diag) and say themselves why they have no result. Declared after dcgm.diag, they run after it.
    check("dcgm.%s" % _ident, "L1", _title, requires=["driver.nvidia_smi"], budget_s=30)(_test_check(_ident))
