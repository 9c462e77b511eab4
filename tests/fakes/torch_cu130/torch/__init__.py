"""A stand-in for torch 2.11.0+cu130 as recorded on the reference H200 host (shared/reference/h200x2/probe.txt).

Only the attributes the agent's torch_info task reads; counts come from FAKE_TORCH_DEVICE_COUNT so a test can
make torch disagree with the driver. Anything that would touch a GPU is absent, so such work fails loudly.
"""
import os
import types

__version__ = os.environ.get("FAKE_TORCH_VERSION", "2.11.0+cu130")
__file__ = __file__
version = types.SimpleNamespace(cuda="13.0")
backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(version=lambda: 91900))
__config__ = types.SimpleNamespace(show=lambda: "CUDA_VERSION=13.0, USE_CUDA=ON, USE_CUDNN=ON, USE_NCCL=1, USE_GLOO=ON,")


def _count():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and (not visible or visible.startswith("-")):
        return 0
    return int(os.environ.get("FAKE_TORCH_DEVICE_COUNT", "2"))


def _properties(index):
    return types.SimpleNamespace(name="NVIDIA H200", major=9, minor=0, total_memory=int(139.80072021484375 * 2**30),  # bench.json total_mem_gib
                                 multi_processor_count=132)


cuda = types.SimpleNamespace(
    is_available=lambda: _count() > 0, device_count=_count, get_device_properties=_properties,
    get_arch_list=lambda: ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
    nccl=types.SimpleNamespace(version=lambda: (2, 28, 9)),
)
distributed = types.SimpleNamespace(is_available=lambda: True, is_nccl_available=lambda: True,
                                    is_gloo_available=lambda: True)
