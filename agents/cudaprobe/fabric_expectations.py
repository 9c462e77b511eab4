"""What each board's NVLink fabric should look like, per SKU, and where each rule comes from.

The fabric checks (agents.cudaprobe.checks.fabric) judge a host by its row: how many NVLinks each GPU has, and who
manages the NVLink domain. An HGX 8-GPU board's NVSwitches are set up by the Fabric Manager on the host itself (no
Fabric Manager, no fabric); a GB200 / GB300 NVL72 compute tray's NVLink domain is set up by the NVLink switch trays
(NMX), and the tray shows it as a fabric state with a clique id and a cluster UUID, with IMEX on the tray for
memory shared across trays; H100 / H200 NVL cards are joined by NVLink bridges, with no fabric to manage; PCIe cards
such as the L40S have no NVLink. A rule written for one kind is wrong for another, so each row says which holds.

Link counts come from the SKU table (agents.cudaprobe.expectations, docs/reference/skus.json) where the SKU is
there; the GB200 / GB300 rows carry their own. docs/reference/fabric-skus.md is this table for people, with the
sources.
"""

from agents.cudaprobe import expectations

FM_GUIDE = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide"
NVML_FABRIC = "https://docs.nvidia.com/deploy/nvml-api/structnvmlGpuFabricInfo__t.html"
NVL72_FABRIC = ("https://docs.nvidia.com/mission-control/docs/systems-administration-guide/2.0.0/"
                "high-speed-fabric-management.html")
IMEX_GUIDE = "https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/overview.html"
MNNVL_SYSTEM = "https://docs.nvidia.com/multi-node-nvlink-systems/multi-node-tuning-guide/system.html"

# domain:
#   "hgx"    NVSwitches on the board, set up by this host's Fabric Manager (nv-fabricmanager): required
#   "nvl72"  NVLink switch trays outside the host set up the domain (NMX); the GPUs register with it (fabric state
#            Completed, a clique id, a cluster UUID); the Fabric Manager does not run on the compute tray; IMEX does
#   "bridge" PCIe cards joined two or four by NVLink bridges: no fabric, no Fabric Manager; links all up (bridged)
#            or all down (no bridge fitted), never some
#   "none"   no NVLink
# fabric_state: whether the driver reports the GPU's fabric registration (nvmlDeviceGetGpuFabricInfo: Hopper and
# later); on HGX A100 it is N/A and the Fabric Manager's process and the NVSwitch devices are what shows.
BOARDS = (
    {"key": "HGX A100 8-GPU", "sku": ("A100 SXM 80GB", "A100 SXM 40GB"), "domain": "hgx", "fabric_state": False,
     "sources": {"links": "docs/reference/skus.json (A100-SXM4: nvlink_links 12)",
                 "fabric_manager": FM_GUIDE + " (Overview, 'The NVIDIA HGX A100 GPU Baseboard'; 'Getting Started "
                                              "with Fabric Manager': the GPUs' NVLinks are not usable until FM "
                                              "configures the NVSwitches)",
                 "fabric_state": NVML_FABRIC + " (nvmlDeviceGetGpuFabricInfo: Hopper or newer)"}},
    {"key": "HGX H100 8-GPU", "sku": ("H100 SXM",), "domain": "hgx", "fabric_state": True,
     "sources": {"links": "docs/reference/skus.json (H100 SXM: nvlink_links 18)",
                 "fabric_manager": FM_GUIDE + " (Overview, 'The NVIDIA HGX H100 GPU Baseboard')",
                 "fabric_state": NVML_FABRIC + " (state: registration with the Fabric Manager; status checked "
                                               "once state is Completed)"}},
    {"key": "HGX H200 8-GPU", "sku": ("H200",), "domain": "hgx", "fabric_state": True,
     "sources": {"links": "docs/reference/skus.json (H200: nvlink_links 18); tests/fixtures/reference/h200x2 (18 "
                          "links per GPU read through NVML on a real 2 x H200 HGX host)",
                 "fabric_manager": FM_GUIDE + " (Overview: HGX H100/H200 baseboards, third-generation NVSwitch)",
                 "fabric_state": "tests/fixtures/reference/h200x2/nvsmi_q.txt (real: Fabric State Completed, "
                                 "Status Success, CliqueId 0, ClusterUUID all zeros)"}},
    {"key": "HGX B200 8-GPU", "sku": ("B200",), "domain": "hgx", "fabric_state": True,
     "sources": {"links": "docs/reference/skus.json (B200: nvlink_links 18)",
                 "fabric_manager": FM_GUIDE + " (Overview, 'NVIDIA HGX B200/B100 GPU Baseboard'; 'What is NVLink "
                                              "Subnet Manager?': FM runs with NVLSM on fourth-generation NVSwitch "
                                              "systems; without them the GPUs stay 'In Progress', as quoted in "
                                              "https://github.com/siderolabs/extensions/pull/717)",
                 "fabric_state": NVML_FABRIC}},
    {"key": "H100 NVL (bridged PCIe)", "sku": ("H100 NVL",), "domain": "bridge", "fabric_state": False,
     "sources": {"links": "docs/reference/skus.json (H100 NVL: 12 links through NVLink bridges, 600 GB/s)",
                 "fabric_manager": "https://www.nvidia.com/en-us/data-center/h100/ (H100 NVL: PCIe card, NVLink "
                                   "bridge; no NVSwitch, so nothing for a Fabric Manager to set up: " + FM_GUIDE +
                                   " covers NVSwitch-based systems only)"}},
    {"key": "H200 NVL (bridged PCIe)", "sku": ("H200 NVL",), "domain": "bridge", "fabric_state": False,
     "sources": {"links": "docs/reference/skus.json (H200 NVL: 18 links, 2- or 4-way NVLink bridge, 900 GB/s)",
                 "fabric_manager": "https://www.nvidia.com/en-us/data-center/h200/ (H200 NVL: PCIe card with 2- or "
                                   "4-way NVLink bridges; " + FM_GUIDE + " covers NVSwitch-based systems only)"}},
    {"key": "GB200 NVL72 compute tray", "names": ("NVIDIA GB200",), "nvlink_links": 18, "domain": "nvl72",
     "fabric_state": True,
     "sources": {"links": "https://github.com/NVIDIA/k8s-test-infra/issues/371 (nvidia-smi nvlink -s of a GB200: "
                          "Link 0-17 at 53.125 GB/s); " + MNNVL_SYSTEM + " (18 compute trays x 4 GPUs, 9 NVLink "
                          "switch trays)",
                 "fabric_manager": NVL72_FABRIC + " (the NVL72 NVLink domain is set up by NVLink Management "
                                                  "Software, NMX, on the switch trays)",
                 "fabric_state": NVML_FABRIC + " (cliqueId, clusterUuid: the GPUs of one NVLink domain share the "
                                               "cluster UUID); https://github.com/NVIDIA/nccl/issues/1301 (NCCL "
                                               "needs both to use multi-node NVLink); "
                                               "https://github.com/Azure/azhpc-images/pull/506 (GB200/GB300 nodes: "
                                               "State Completed, Status Success, CliqueId non-zero, ClusterUUID "
                                               "non-zero)",
                 "imex": IMEX_GUIDE + " (IMEX runs on each compute tray of the domain; memory shared across "
                                      "trays needs it)"}},
    {"key": "GB300 NVL72 compute tray", "names": ("NVIDIA GB300",), "nvlink_links": 18, "domain": "nvl72",
     "fabric_state": True,
     "sources": {"links": "https://docs.nvidia.com/base-command-manager/product-manuals/nvidia-mission-control/"
                          "nvlinkinfo (GB200/GB300: NVLink 5, 18 links per GPU)",
                 "fabric_manager": NVL72_FABRIC,
                 "fabric_state": NVML_FABRIC + "; https://github.com/Azure/azhpc-images/pull/506",
                 "imex": IMEX_GUIDE}},
    {"key": "A100 PCIe (optional bridge)", "sku": ("A100 PCIe 80GB", "A100 PCIe 40GB"), "domain": "bridge",
     "fabric_state": False,
     "sources": {"links": "docs/reference/skus.json (A100 PCIe: NVLink bridge optional, 12 links when bridged)",
                 "fabric_manager": FM_GUIDE + " (NVSwitch-based systems only)"}},
    {"key": "PCIe cards without NVLink", "sku": ("L40S", "L4", "A10", "H100 PCIe"), "domain": "none",
     "fabric_state": False,
     "sources": {"links": "docs/reference/skus.json (nvlink: false for L40S, L4, A10, H100 PCIe)",
                 "fabric_manager": FM_GUIDE + " (NVSwitch-based systems only)"}},
)


def _names(board):
    names = list(board.get("names", ()))
    for key in board.get("sku", ()):
        names += next(sku["names"] for sku in expectations.SKUS if sku["key"] == key)
    return names


def board_for(name):
    """The BOARDS row whose GPUs nvidia-smi names `name` (case and spacing ignored), or None."""
    wanted = " ".join((name or "").lower().split())
    for board in BOARDS:
        if wanted in (n.lower() for n in _names(board)):
            return board
    return None


def links_per_gpu(board, name):
    """NVLinks each GPU of this board has when every link is up (bridged, for bridge boards)."""
    if "nvlink_links" in board:
        return board["nvlink_links"]
    sku = expectations.sku_for(name)
    return sku["nvlink_links"] if sku else 0
