"""The `nvidia-smi topo -m` parser on real outputs (tests/fixtures/topo/SOURCES.md says where each came from)."""

from pathlib import Path

import pytest

from agents.cudaprobe.nvsmi import parse_topology

TOPO = Path(__file__).resolve().parent.parent / "fixtures" / "topo"
EXPECTED = {  # file: (GPUs, link kinds between GPUs, NICs)
    "h200x2_nv18_this_host.txt": (2, {"NV18"}, 0),
    "nvlink_8gpu_nvswitch.txt": (8, {"NV18"}, 0),
    "with_nics.txt": (8, {"NV12"}, 17),
    "tab_format_8gpu_nv18_12nics_trailing_tabs.txt": (8, {"NV18"}, 12),
    "nvlink_pairs.txt": (8, {"NV1", "NV2", "SYS"}, 2),
    "two_gpu_nv2_bridge_numa_na.txt": (2, {"NV2"}, 0),
    "pcie_switch.txt": (8, {"PIX", "NODE"}, 2),
    "pcie_switch_across_sockets_8x4090_before.txt": (8, {"PIX", "SYS"}, 2),
    "pcie_switch_pxb_across_sockets_8x_a5000.txt": (8, {"PIX", "PXB", "SYS"}, 2),
    "across_sockets.txt": (5, {"SYS", "PHB", "NODE"}, 0),
    "across_sockets_4gpu_titanx_mlx4_nics.txt": (4, {"PHB", "SYS"}, 2),
    "a10_4gpu_all_sys_single_numa_nics.txt": (4, {"SYS"}, 2),
    "legacy_soc_format_4gpu_k40m_tab.txt": (4, {"PHB", "SYS"}, 1),
    "two_gpu_phb_numa_na.txt": (2, {"PHB"}, 0),
    "tab_format_2gpu_rtx5090_phb_gpu_numa_id.txt": (2, {"PHB"}, 0),
    "one_gpu_tesla_p4_tab_numa_na.txt": (1, set(), 0),
}


def test_every_recorded_output_has_an_expectation():
    assert {p.name for p in TOPO.glob("*.txt")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_parser_reads_every_pair_of_every_shape(name):
    gpus, kinds, nics = EXPECTED[name]
    topology = parse_topology((TOPO / name).read_text())
    assert topology["gpus"] == list(range(gpus))
    assert set(topology["links"].values()) == kinds
    assert len(topology["links"]) == gpus * (gpus - 1) // 2
    assert len(topology["nics"]) == nics


def test_one_pair_in_detail():
    links = parse_topology((TOPO / "nvlink_pairs.txt").read_text())["links"]
    # DGX-1 hybrid cube mesh, as printed: GPU0 -- NV1 -- GPU1, NV2 to GPU2 and GPU7, SYS to GPU4-6
    assert [links["0-%d" % other] for other in range(1, 8)] == ["NV1", "NV2", "NV1", "SYS", "SYS", "SYS", "NV2"]
    assert links["4-5"] == "NV2" and links["3-4"] == "NV1"


def test_no_matrix_is_none():
    assert parse_topology("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.") is None
