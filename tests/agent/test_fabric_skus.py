"""fabric.nvswitch judged by its board's row (agents/cudaprobe/fabric_expectations.py): the Fabric Manager is
required on HGX 8-GPU boards and nowhere else; an NVL72 tray's GPUs must be in one NVLink domain (state Completed,
status Success, a clique id, a cluster UUID); bridged NVL cards and PCIe cards have no fabric.

Stand-ins: `nvidia-smi -q` is the real 2 x H200 HGX host's (tests/fixtures/reference/h200x2/nvsmi_q.txt), its GPU
block repeated per GPU and its Fabric section's State / Status / CliqueId / ClusterUUID set to the values NVML
documents (nvmlGpuFabricInfo_t; the NVL72 values as in Azure/azhpc-images#506); the Fabric Manager and IMEX are
processes in a stand-in /proc, named as the kernel names them (`nv-fabricmanage`: comm is cut to 15 characters, as
`systemctl status nvidia-fabricmanager` shows "Main PID: N (nv-fabricmanage)"; `nvidia-imex`)."""

import re

import pytest

from agents.cudaprobe import fabric_expectations
from agents.cudaprobe.checks import fabric
from tests.agent.harness import Scenario
from tests.agent.test_fabric import FIXTURES, context

REAL_Q = FIXTURES / "reference" / "h200x2" / "nvsmi_q.txt"
ZERO = "00000000-0000-0000-0000-000000000000"
DOMAIN = "5f9d0c1e-8a7b-4c3d-9e2f-1a2b3c4d5e6f"
FABRIC = re.compile(r"(^    Fabric\n        State\s+: ).*\n(        Status\s+: ).*\n(        CliqueId\s+: ).*\n"
                    r"(        ClusterUUID\s+: ).*\n", re.M)


def q_text(count, fabric_of):
    """`nvidia-smi -q` of `count` GPUs; fabric_of(i) -> (state, status, clique, cluster) of GPU i."""
    head, first = re.split(r"^(?=GPU 00000000:)", REAL_Q.read_text(), flags=re.M)[:2]
    head = re.sub(r"(Attached GPUs\s+: )\d+", r"\g<1>%d" % count, head)
    blocks = []
    for i in range(count):
        block = first.replace("GPU 00000000:00:06.0", "GPU 00000000:%02X:00.0" % (0x10 + i), 1)
        state, status, clique, cluster = fabric_of(i)
        blocks.append(FABRIC.sub(lambda m: "%s%s\n%s%s\n%s%s\n%s%s\n" % (
            m.group(1), state, m.group(2), status, m.group(3), clique, m.group(4), cluster), block, count=1))
    return head + "".join(blocks)


def host(tmp_path, name, count, fabric_of, processes=(), switches=0):
    scenario = Scenario(tmp_path / "s")
    scenario.write("q.txt", q_text(count, fabric_of))
    for i in range(switches):
        (scenario.dev / ("nvidia-nvswitch%d" % i)).write_text("")
    proc = tmp_path / "proc"
    proc.mkdir()
    for pid, comm in enumerate(processes, start=4100):
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "comm").write_text(comm + "\n")
    facts = {"driver_gpus": [{"index": i, "name": name} for i in range(count)]}
    return context(scenario, facts=facts, CUDAPROBE_PROC_DIR=str(proc))


def alike(state, status="N/A", clique="N/A", cluster="N/A"):
    return lambda i: (state, status, clique, cluster)


FM, IMEX = "nv-fabricmanage", "nvidia-imex"

# (row, nvidia-smi name, GPUs, fabric per GPU, processes, NVSwitch devices, status, signature, said)
ROWS = [
    ("HGX H200 8-GPU", "NVIDIA H200", 8, alike("Completed", "Success", "0", ZERO), [FM], 0, "pass", None,
     "8 GPU(s) in the fabric (state Completed, status Success)"),
    ("HGX H200 8-GPU", "NVIDIA H200", 8, alike("Not Started"), [], 0, "fail", "fabric_manager_not_running",
     "the Fabric Manager (nvidia-fabricmanager) is not running here"),
    ("HGX H100 8-GPU", "NVIDIA H100 80GB HBM3", 8, alike("N/A"), [FM], 0, "warn", "fabric_state_unread",
     "fabric state not reported for the 8 GPU(s) of this HGX H100 8-GPU"),
    ("HGX B200 8-GPU", "NVIDIA B200", 8, alike("In Progress"), [], 0, "fail", "fabric_manager_not_running",
     "in progress with no Fabric Manager (nvidia-fabricmanager) running on this HGX B200 8-GPU"),
    ("HGX B200 8-GPU", "NVIDIA B200", 8, alike("In Progress"), [FM], 0, "warn", "fabric_in_progress",
     "still in progress"),
    ("HGX A100 8-GPU", "NVIDIA A100-SXM4-80GB", 8, alike("N/A"), [], 6, "fail", "fabric_manager_not_running",
     "not running on this HGX A100 8-GPU: its NVSwitches carry no NVLink traffic"),
    ("HGX A100 8-GPU", "NVIDIA A100-SXM4-80GB", 8, alike("N/A"), [FM], 6, "pass", None,
     "6 NVSwitch device(s), the Fabric Manager running, no SXid"),
    ("H100 NVL (bridged PCIe)", "NVIDIA H100 NVL", 2, alike("N/A"), [], 0, "pass", None,
     "no NVSwitch fabric on a H100 NVL (bridged PCIe): NVLink through bridges, nothing for a Fabric Manager"),
    ("H200 NVL (bridged PCIe)", "NVIDIA H200 NVL", 4, alike("Not Started"), [], 0, "pass", None,
     "NVLink through bridges, nothing for a Fabric Manager to set up"),
    ("GB200 NVL72 compute tray", "NVIDIA GB200", 4, alike("Completed", "Success", "32766", DOMAIN), [IMEX], 0, "pass",
     None, "4 GPU(s) in NVLink domain %s (clique 32766; state Completed, status Success); nvidia-imex running; "
           "no Fabric Manager needed" % DOMAIN),
    ("GB200 NVL72 compute tray", "NVIDIA GB200", 4, alike("Completed", "Success", "32766", DOMAIN), [], 0, "pass",
     None, "nvidia-imex not running here"),
    ("GB200 NVL72 compute tray", "NVIDIA GB200", 4, alike("Not Started"), [], 0, "fail", "fabric_not_registered",
     "set up by the NVLink switch trays (NMX), not on this tray"),
    ("GB200 NVL72 compute tray", "NVIDIA GB200", 4, alike("Not Supported", "Success", "0", ZERO), [IMEX], 0, "fail",
     "fabric_not_registered", "not registered with the NVLink domain (fabric state Not Supported)"),
    ("GB300 NVL72 compute tray", "NVIDIA GB300", 4, alike("Completed", "Insufficient Resources", "0", ZERO), [IMEX],
     0, "fail", "fabric_registration_failed", "fabric registration failed: Insufficient Resources"),
    ("GB300 NVL72 compute tray", "NVIDIA GB300", 4, alike("Completed", "Success", "0", ZERO), [IMEX], 0, "fail",
     "fabric_no_cluster", "registered but in no NVLink domain (ClusterUUID %s, CliqueId 0)" % ZERO),
    ("GB200 NVL72 compute tray", "NVIDIA GB200", 4,
     lambda i: ("Completed", "Success", "32766" if i < 2 else "4001", DOMAIN), [IMEX], 0, "fail",
     "fabric_clique_split", "in different NVLink partitions"),
    ("PCIe cards without NVLink", "NVIDIA L40S", 2, alike("N/A"), [], 0, "pass", None,
     "no NVSwitch fabric on a PCIe cards without NVLink: no NVLink"),
]


@pytest.mark.parametrize("row,name,count,fabric_of,processes,switches,status,signature,said", ROWS,
                         ids=["%s-%d" % (r[0].split(" (")[0].replace(" ", "_"), i) for i, r in enumerate(ROWS)])
def test_each_board_row(tmp_path, row, name, count, fabric_of, processes, switches, status, signature, said):
    assert fabric_expectations.board_for(name)["key"] == row
    outcome = fabric.fabric_nvswitch(host(tmp_path, name, count, fabric_of, processes, switches))
    assert outcome.status == status and outcome.signatures == ([signature] if signature else []), outcome.summary
    assert said in outcome.summary, outcome.summary
    assert "board: %s" % row in outcome.evidence  # the rule's source goes with the verdict


def test_every_row_names_a_source_for_each_of_its_rules():
    for board in fabric_expectations.BOARDS:
        assert {"links", "fabric_manager"} <= set(board["sources"]), board["key"]
        if board["domain"] == "nvl72":
            assert {"fabric_state", "imex"} <= set(board["sources"]), board["key"]
        assert all(("https://" in text or "docs/reference" in text or "tests/fixtures" in text)
                   for text in board["sources"].values()), board["key"]


def test_every_sku_of_the_sku_table_with_nvlink_has_a_board_row():
    from agents.cudaprobe import expectations

    for sku in expectations.SKUS:
        board = fabric_expectations.board_for(sku["names"][0])
        assert board, sku["key"]
        assert (board["domain"] == "none") == (not sku["nvlink_links"]), sku["key"]
        if sku["nvlink_links"]:
            assert fabric_expectations.links_per_gpu(board, sku["names"][0]) == sku["nvlink_links"]


def test_an_hgx_a100_vm_given_gpus_but_no_nvswitch_is_not_asked_for_a_fabric_manager(tmp_path):
    outcome = fabric.fabric_nvswitch(host(tmp_path, "NVIDIA A100-SXM4-80GB", 2, alike("N/A")))
    assert outcome.status == "pass" and "no NVSwitch fabric on this board" in outcome.summary


def test_the_reference_page_lists_every_board_row():
    page = (FIXTURES.parents[1] / "docs" / "reference" / "fabric-skus.md").read_text()
    for board in fabric_expectations.BOARDS:
        row = next((line for line in page.splitlines() if line.startswith("| %s |" % board["key"])), None)
        assert row, board["key"]
        for url in board["sources"].values():
            assert url.split(" ")[0] in row, (board["key"], url)
