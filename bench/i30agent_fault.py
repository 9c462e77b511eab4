"""Make an application fault inside this process on GPU 0: a kernel that stores through a bad pointer, so that the
driver logs the Xids a faulting application raises (13 / 31 / 43 on an H200 with driver 580). Used by
bench/i30agent_on_device.sh to show that the next watch sees them as xid_application. Changes no GPU setting: the
fault ends this process's context only.

First way: PTX handed to the driver (cuModuleLoadData JIT-compiles it; no compiler needed) and launched through
libcuda with ctypes, storing to address 0x10. Second way, where that cannot load: a torch tensor over a device
address nothing maps (__cuda_array_interface__), written by torch's fill kernel.
"""

import ctypes
import sys

PTX = b"""
.version 7.0
.target sm_80
.address_size 64
.visible .entry bad_store(.param .u64 where)
{
  .reg .u64 %rd<2>;
  .reg .u32 %r<2>;
  ld.param.u64 %rd1, [where];
  mov.u32 %r1, 42;
  st.global.u32 [%rd1], %r1;
  ret;
}
"""


def through_libcuda():
    cuda = ctypes.CDLL("libcuda.so.1")

    def call(name, *args):
        return getattr(cuda, name)(*args)

    assert call("cuInit", 0) == 0
    device, context, module, function = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    assert call("cuDeviceGet", ctypes.byref(device), 0) == 0
    assert call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device) == 0
    assert call("cuCtxSetCurrent", context) == 0
    loaded = call("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(PTX))
    if loaded != 0:
        raise RuntimeError("cuModuleLoadData returned %d" % loaded)
    assert call("cuModuleGetFunction", ctypes.byref(function), module, b"bad_store") == 0
    where = ctypes.c_uint64(0x10)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(where), ctypes.c_void_p))
    launched = call("cuLaunchKernel", function, 1, 1, 1, 1, 1, 1, 0, None, params, None)
    synced = call("cuCtxSynchronize")
    return "libcuda PTX store to 0x10: launch %d, synchronize %d (700 = CUDA_ERROR_ILLEGAL_ADDRESS)" % (
        launched, synced)


def through_torch():
    import torch

    class Nowhere:
        __cuda_array_interface__ = {"data": (0x7F0000000000, False), "shape": (1 << 20,), "typestr": "<f4",
                                    "version": 3}

    try:
        tensor = torch.as_tensor(Nowhere(), device="cuda")
        tensor.fill_(1.0)
        torch.cuda.synchronize()
        return "torch fill through an unmapped address: no error reported"
    except Exception as exc:
        return "torch fill through an unmapped address: %s" % str(exc).splitlines()[0]


if __name__ == "__main__":
    try:
        print(through_libcuda())
    except Exception as exc:
        print("libcuda way failed (%s); the torch way:" % exc)
        print(through_torch())
    sys.stdout.flush()
