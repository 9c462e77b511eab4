"""What a healthy GPU of a given model should reach, kept as data in the agent, and the rule that judges a figure.

Each SKU row holds the vendor's peak dense figures (datasheets print sparse figures too: those are halved here),
its memory and host link, and its NVLink. A healthy node reaches a fraction of each peak; HEALTHY_FRACTION holds
that fraction, calibrated on the real H200 runs kept in tests/fixtures/real/ (bench/calibrate_expectations.py
prints it again from those reports). For other SKUs the same fraction is assumed and the evidence says so.

The rule for every benchmark figure (judge): below half of what its model and topology should reach is a failure,
below 85 % a warning; the evidence shows measured / expected. An unknown model has no reference: its figures are
judged against their sibling GPUs only, and the check says "no reference for <model>".
"""

FAIL_BELOW = 0.5
WARN_BELOW = 0.85

# Median measured / peak on the real H200 runs: matmul on the 1 x H200 runs of 2026-12-01 that time it once the
# GPU holds its power limit (issue 22; the figures of the first ~0.1 s from idle, timed before, were 15-19 % higher:
# bf16 0.796, fp16 0.744, tf32 0.703 of peak), the rest on the 2 x H200 and 1 x H200 runs of 2026-11-30 and since.
# bench/calibrate_expectations.py recomputes them from every healthy report kept; tests/agent/test_judging.py holds
# the table within 0.02 of that.
HEALTHY_FRACTION = {
    "matmul_bf16_tflops": 0.689,   # 681.9 of 989.5, held at the 700 W limit
    "matmul_fp16_tflops": 0.658,   # 651.4 of 989.5
    "matmul_tf32_tflops": 0.727,   # 359.3 of 494.5
    "matmul_fp32_tflops": 0.748,   # 50.1 of 67 (fp32 stays under the limit: the same before and after)
    "h2d_pinned_gbs": 0.878,       # 55.35 of 63.0 (PCIe gen5 x16, per direction)
    "d2h_pinned_gbs": 0.877,       # 55.26 of 63.0
    "p2p_copy_gbs": 0.876,         # 394.0 of 450 (18 NVLink 4 links x 25 GB/s per direction)
    "nccl_busbw_gbs": 0.711,       # 319.9 of 450 at 1 GiB, 2 GPUs over NVLink
}
CALIBRATED_ON = "H200"
# Figures with no peak to scale from: measured directly per SKU (median of the same runs).
MEASURED = {
    "H200": {"resnet18_amp_bf16_img_s": 12794.0},
}

# Per-lane throughput of one PCIe direction after encoding (GB/s): 8b/10b for gen 1-2, 128b/130b for gen 3-5,
# FLIT for gen 6.
PCIE_GEN_GBS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}

# key, nvidia-smi names (as NVML reports them), bf16 / fp16 / tf32 / fp32 dense TFLOP/s (sparse datasheet figures
# halved), memory (HBM / GDDR) GB/s, boost clock MHz (the maximum SM clock NVML reports; H200's 1980 read on the
# real one) and board power limit W (the datasheet's maximum TDP; 700 W read on the real H200; the other SKUs'
# clocks and limits are from the sources listed, not read on hardware here), PCIe (gen, width), NVLink links per
# GPU and GB/s per link per direction (0: none; bridged
# PCIe cards: links = bridge GB/s bidirectional / 50), sources. H100 PCIe's NVLink bridge was not confirmed by a
# source we read, so it is listed without NVLink. Where NVLink exists, the links between two GPUs are read from
# `nvidia-smi topo -m` (NV<n>), so the table's link count only says what a full board has.
SKUS = (
    {"key": "H200", "names": ("NVIDIA H200",), "bf16": 989.5, "fp16": 989.5, "tf32": 494.5, "fp32": 67.0,
     "memory_gbs": 4800, "boost_mhz": 1980, "power_w": 700, "pcie": (5, 16), "nvlink_links": 18, "nvlink_link_gbs": 25,
     "sources": ("https://www.nvidia.com/en-us/data-center/h200/",
                 "https://github.com/stas00/ml-engineering/blob/744d01e18b79512572f64a6bbd8b5f4a725203a7/compute/accelerator/README.md")},
    {"key": "H200 NVL", "names": ("NVIDIA H200 NVL",), "bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0,
     "memory_gbs": 4800, "pcie": (5, 16), "nvlink_links": 18, "nvlink_link_gbs": 25, "nvlink_bridge": True,
     "boost_mhz": 1785, "power_w": 600,
     "sources": ("https://www.nvidia.com/en-us/data-center/h200/",
                 "https://github.com/NVIDIA/DCGM/blob/72fa3feaa67d716a75323a8f47c34ff3ee73f824/nvvs/diag-skus.yaml.in")},
    {"key": "H100 SXM", "names": ("NVIDIA H100 80GB HBM3",), "bf16": 989.5, "fp16": 989.5, "tf32": 494.5, "fp32": 67.0,
     "memory_gbs": 3350, "boost_mhz": 1980, "power_w": 700, "pcie": (5, 16), "nvlink_links": 18, "nvlink_link_gbs": 25,
     "sources": ("https://www.nvidia.com/en-us/data-center/h100/",
                 "https://glennklockwood.com/garden/processors/h100")},
    {"key": "H100 PCIe", "names": ("NVIDIA H100 PCIe",), "bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.0,
     "memory_gbs": 2000, "boost_mhz": 1755, "power_w": 350, "pcie": (5, 16), "nvlink_links": 0, "nvlink_link_gbs": 0,
     "sources": ("https://github.com/stas00/ml-engineering/blob/744d01e18b79512572f64a6bbd8b5f4a725203a7/compute/accelerator/README.md",
                 "https://github.com/qoofyk/LLM_Sizing_Guide/issues/3")},
    {"key": "H100 NVL", "names": ("NVIDIA H100 NVL",), "bf16": 835.5, "fp16": 835.5, "tf32": 417.5, "fp32": 60.0,
     "memory_gbs": 3900, "pcie": (5, 16), "nvlink_links": 12, "nvlink_link_gbs": 25, "nvlink_bridge": True,
     "boost_mhz": 1785, "power_w": 400,
     "sources": ("https://www.nvidia.com/en-us/data-center/h100/",
                 "https://github.com/NVIDIA/DCGM/blob/72fa3feaa67d716a75323a8f47c34ff3ee73f824/nvvs/diag-skus.yaml.in")},
    {"key": "A100 SXM 80GB", "names": ("NVIDIA A100-SXM4-80GB",), "bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5,
     "memory_gbs": 2039, "boost_mhz": 1410, "power_w": 400, "pcie": (4, 16), "nvlink_links": 12, "nvlink_link_gbs": 25,
     "sources": ("https://www.nvidia.com/en-us/data-center/a100/",
                 "https://www.thundercompute.com/blog/nvidia-a100-specs-full-guide")},
    {"key": "A100 SXM 40GB", "names": ("NVIDIA A100-SXM4-40GB",), "bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5,
     "memory_gbs": 1555, "boost_mhz": 1410, "power_w": 400, "pcie": (4, 16), "nvlink_links": 12, "nvlink_link_gbs": 25,
     "sources": ("https://www.nvidia.com/en-us/data-center/a100/",
                 "https://www.thundercompute.com/blog/nvidia-a100-specs-full-guide")},
    {"key": "A100 PCIe 80GB", "names": ("NVIDIA A100 80GB PCIe",), "bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5,
     "memory_gbs": 1935, "pcie": (4, 16), "nvlink_links": 12, "nvlink_link_gbs": 25, "nvlink_bridge": True,
     "boost_mhz": 1410, "power_w": 300,
     "sources": ("https://www.nvidia.com/en-us/data-center/a100/",
                 "https://www.thundercompute.com/blog/nvidia-a100-specs-full-guide")},
    {"key": "A100 PCIe 40GB", "names": ("NVIDIA A100-PCIE-40GB",), "bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5,
     "memory_gbs": 1555, "pcie": (4, 16), "nvlink_links": 12, "nvlink_link_gbs": 25, "nvlink_bridge": True,
     "boost_mhz": 1410, "power_w": 250,
     "sources": ("https://www.nvidia.com/en-us/data-center/a100/",
                 "https://www.thundercompute.com/blog/nvidia-a100-specs-full-guide")},
    {"key": "L40S", "names": ("NVIDIA L40S",), "bf16": 362.05, "fp16": 362.05, "tf32": 183.0, "fp32": 91.6,
     "memory_gbs": 864, "boost_mhz": 2520, "power_w": 350, "pcie": (4, 16), "nvlink_links": 0, "nvlink_link_gbs": 0,
     "sources": ("https://www.nvidia.com/en-us/data-center/l40s/",
                 "https://github.com/stas00/ml-engineering/blob/744d01e18b79512572f64a6bbd8b5f4a725203a7/compute/accelerator/README.md")},
    {"key": "L4", "names": ("NVIDIA L4",), "bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3,
     "memory_gbs": 300, "boost_mhz": 2040, "power_w": 72, "pcie": (4, 16), "nvlink_links": 0, "nvlink_link_gbs": 0,
     "sources": ("https://www.nvidia.com/en-us/data-center/l4/",
                 "https://store.sourcecode.com/en-us/bg-bucket-compare/125/9820")},
    {"key": "A10", "names": ("NVIDIA A10",), "bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2,
     "memory_gbs": 600, "boost_mhz": 1695, "power_w": 150, "pcie": (4, 16), "nvlink_links": 0, "nvlink_link_gbs": 0,
     "sources": ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf",
                 "https://github.com/karpathy/llm.c/pull/621")},
    {"key": "B200", "names": ("NVIDIA B200",), "bf16": 2250.0, "fp16": 2250.0, "tf32": 1100.0, "fp32": 75.0,
     "memory_gbs": 7700, "boost_mhz": 1965, "power_w": 1000, "pcie": (5, 16), "nvlink_links": 18, "nvlink_link_gbs": 50,
     "sources": ("https://resources.nvidia.com/en-us-blackwell-architecture/datasheet",
                 "https://glennklockwood.com/garden/processors/B200")},
)
# Device-memory bandwidth: a plain device-to-device copy (torch's copy_ of a 4 GiB buffer) counting bytes read
# plus written, against the datasheet's HBM figure. Measured on the real H200s (tests/fixtures/real/burnin/ and
# shared/reference: h200x1/probe.json 4255 GB/s, h200x2/bench.json 4270 GB/s; KINDS.md: about 4.3 TB/s): 0.887
# of 4800. Other SKUs assume the same fraction.
MEMORY_COPY_FRACTION = 0.887
# Sustained bf16 matmul at the power limit (16384^3, minutes long): ~676 of 989.5 TFLOP/s on the healthy H200
# (shared/reference/h200x1/burnin_120s.json, 120 s, and tests/fixtures/real/burnin/, 300 s): a GPU at its power
# cap holds its clocks well under boost, so a burn-in is judged against this, not the short matmul's fraction.
SUSTAINED_BF16_FRACTION = 0.683
MATMUL_KEYS = {"matmul_bf16_tflops": "bf16", "matmul_fp16_tflops": "fp16", "matmul_tf32_tflops": "tf32",
               "matmul_fp32_tflops": "fp32"}


def sku_for(name):
    """The SKU row whose nvidia-smi name is `name` (case and spacing ignored), or None."""
    wanted = " ".join((name or "").lower().split())
    for sku in SKUS:
        if wanted in (n.lower() for n in sku["names"]):
            return sku
    return None


def pcie_gbs(gen, width):
    """One direction of a PCIe link, GB/s, or None when the generation is unknown."""
    per_lane = PCIE_GEN_GBS_PER_LANE.get(gen)
    return round(per_lane * width, 1) if per_lane and width else None


def nvlink_gbs(sku, links):
    """One direction of `links` NVLinks of this SKU, GB/s."""
    return links * sku["nvlink_link_gbs"]


class Expected:
    """What a figure should reach, and where that comes from (shown in the evidence)."""

    def __init__(self, value, basis, calibrated):
        self.value = value
        self.basis = basis
        self.calibrated = calibrated  # the fraction was measured on this SKU, not assumed from another

    def __repr__(self):
        return "Expected(%.1f, %r)" % (self.value, self.basis)


def _fraction(sku, metric):
    return HEALTHY_FRACTION[metric], sku["key"] == CALIBRATED_ON


def expected_matmul(sku, metric):
    peak = sku[MATMUL_KEYS[metric]]
    fraction, calibrated = _fraction(sku, metric)
    return Expected(peak * fraction, "%.0f%% of %s's %.1f TFLOP/s dense peak" % (100 * fraction, sku["key"], peak),
                    calibrated)


def expected_host_copy(sku, metric, link=None):
    """H2D / D2H pinned: a fraction of the PCIe link the GPU trained to its maximum (else the SKU's)."""
    gen, width = link or sku["pcie"]
    ceiling = pcie_gbs(gen, width)
    if not ceiling:
        return None
    fraction, calibrated = _fraction(sku, metric)
    return Expected(ceiling * fraction, "%.0f%% of PCIe gen%d x%d (%.1f GB/s per direction)" % (
        100 * fraction, gen, width, ceiling), calibrated)


def link_gbs(sku, link):
    """One direction of the link between two GPUs, from its `topo -m` kind ("NV18", "PIX", "SYS"...)."""
    if link.startswith("NV") and sku["nvlink_links"]:
        return nvlink_gbs(sku, int(link[2:] or 0)), "%s (%d NVLinks x %d GB/s)" % (link, int(link[2:] or 0),
                                                                                  sku["nvlink_link_gbs"])
    ceiling = pcie_gbs(*sku["pcie"])
    return ceiling, "%s over PCIe gen%d x%d (%.1f GB/s)" % (link, sku["pcie"][0], sku["pcie"][1], ceiling)


def expected_p2p(sku, link):
    gbs, basis = link_gbs(sku, link)
    fraction, calibrated = _fraction(sku, "p2p_copy_gbs")
    return Expected(gbs * fraction, "%.0f%% of %s" % (100 * fraction, basis), calibrated and link.startswith("NV"))


def expected_busbw(sku, links):
    """NCCL all-reduce busbw at 1 GiB over GPUs joined by `links` (the kinds between every pair): bounded by the
    slowest pair's link. Calibrated on 2 x H200 over NVLink; other counts and topologies are estimates."""
    slowest = min(links, key=lambda link: link_gbs(sku, link)[0])
    gbs, basis = link_gbs(sku, slowest)
    fraction, calibrated = _fraction(sku, "nccl_busbw_gbs")
    return Expected(gbs * fraction, "%.0f%% of the slowest pair's link, %s" % (100 * fraction, basis),
                    calibrated and slowest.startswith("NV") and len(links) == 1)


def expected_measured(sku, metric):
    value = MEASURED.get(sku["key"], {}).get(metric)
    if value is None:
        return None
    return Expected(value, "median of the real %s runs" % sku["key"], True)


def expected_memory_copy(sku):
    """Device-to-device copy GB/s (read + write) a healthy GPU of this SKU reaches."""
    return Expected(sku["memory_gbs"] * MEMORY_COPY_FRACTION, "%.1f%% of %s's %d GB/s HBM datasheet figure" % (
        100 * MEMORY_COPY_FRACTION, sku["key"], sku["memory_gbs"]), sku["key"] == CALIBRATED_ON)


def expected_sustained(sku):
    """Median bf16 TFLOP/s a healthy GPU of this SKU holds through a burn-in at its power limit."""
    return Expected(sku["bf16"] * SUSTAINED_BF16_FRACTION, "%.1f%% of %s's %.1f TFLOP/s dense peak, held at its "
                    "%d W limit" % (100 * SUSTAINED_BF16_FRACTION, sku["key"], sku["bf16"], sku["power_w"]),
                    sku["key"] == CALIBRATED_ON)


def judge(measured, expected):
    """pass | warn | fail for one figure against its expectation, and measured / expected."""
    ratio = measured / expected.value if expected.value else 0.0
    if ratio < FAIL_BELOW:
        return "fail", ratio
    if ratio < WARN_BELOW:
        return "warn", ratio
    return "pass", ratio


def describe(label, measured, expected, ratio, unit):
    """One evidence line: measured / expected (ratio), and the basis of the expectation."""
    return "%s %.1f / %.1f %s expected (%.0f%%; %s%s)" % (
        label, measured, expected.value, unit, 100 * ratio, expected.basis,
        "" if expected.calibrated else ", fraction assumed from %s" % CALIBRATED_ON)
