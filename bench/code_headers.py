"""The error-code enumerations of the published headers, extracted into one file the tests count the tables against.

    python bench/code_headers.py [--cuda13 DIR] --cuda12 DIR --nccl DIR --nverror FILE     # writes CODES_PATH

Sources (issue 32): CUDA 13.0's driver_types.h (cudaError) and cuda.h (CUresult) as nvcc 13.0 installs them
(/usr/local/cuda-13.0/include); CUDA 12.9's from the nvidia-cuda-runtime-cu12 12.9.79 wheel (include/); NCCL 2.32.3's
nccl.h (ncclResult_t) from the nvidia-nccl-cu12 2.32.3 wheel; NVML's nvmlReturn_t as nvidia-ml-py (the agent's
pynvml, a mirror of nvml.h) defines it; the Xids of nverror.h in NVIDIA/open-gpu-kernel-modules (commit 0b7b804,
src/common/sdk/nvidia/inc/nverror.h, its #define lines). Each enumeration keeps its header, version and every name
with its value.
"""

import argparse
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
CODES_PATH = REPO / "cudaweb" / "playbooks" / "knowledge" / "headers" / "codes.yaml"


def _enum(text, start, end, name_pattern):
    body = text[text.index(start):]
    body = body[:body.index(end)]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return {name: int(value, 0) for name, value in re.findall(r"^\s*(%s)\s*=\s*(-?(?:0x)?[0-9a-fA-F]+)" % name_pattern,
                                                              body, re.M)}


def cuda(include, version):
    runtime = _enum((Path(include) / "driver_types.h").read_text(), "enum __device_builtin__ cudaError", "};",
                    r"cuda(?:Success|Error\w+)")
    driver = _enum((Path(include) / "cuda.h").read_text(), "typedef enum cudaError_enum", "} CUresult;", r"CUDA_\w+")
    return [{"table": "cuda_runtime", "enum": "cudaError_t", "header": "driver_types.h", "version": version,
             "codes": runtime},
            {"table": "cuda_driver", "enum": "CUresult", "header": "cuda.h", "version": version, "codes": driver}]


def nccl(include, version):
    text = (Path(include) / "nccl.h").read_text()
    start = text.index("} ncclResult_t;")
    codes = _enum(text[text.rindex("typedef enum", 0, start) + len("typedef enum {"):], "ncclSuccess", "} ncclResult_t;",
                  r"nccl\w+")
    return [{"table": "nccl", "enum": "ncclResult_t", "header": "nccl.h", "version": version,
             "codes": {k: v for k, v in codes.items() if k != "ncclNumResults"}}]


def nvml():
    import importlib.metadata

    import pynvml

    codes = {name: getattr(pynvml, name) for name in dir(pynvml)
             if name == "NVML_SUCCESS" or (name.startswith("NVML_ERROR_") and isinstance(getattr(pynvml, name), int))}
    return [{"table": "nvml", "enum": "nvmlReturn_t", "header": "nvml.h (nvidia-ml-py's pynvml.py)",
             "version": "nvidia-ml-py " + importlib.metadata.version("nvidia-ml-py"), "codes": codes}]


def xid(path):
    codes = {name: int(value) for name, value in
             re.findall(r"^#define\s+(\w+)\s+\((\d+)\)", Path(path).read_text(), re.M)}
    return [{"table": "xid", "enum": "Xid (nverror.h)", "header": "nverror.h",
             "version": "open-gpu-kernel-modules 0b7b804", "codes": codes}]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda13", default="/usr/local/cuda-13.0/include")
    parser.add_argument("--cuda12", required=True, help="include/ of the nvidia-cuda-runtime-cu12 12.9.79 wheel")
    parser.add_argument("--nccl", required=True, help="include/ of the nvidia-nccl-cu12 2.32.3 wheel")
    parser.add_argument("--nverror", required=True, help="nverror.h of open-gpu-kernel-modules at 0b7b804")
    args = parser.parse_args()
    found = cuda(args.cuda13, "CUDA 13.0") + cuda(args.cuda12, "CUDA 12.9") + nccl(args.nccl, "NCCL 2.32.3") + nvml() \
        + xid(args.nverror)
    CODES_PATH.parent.mkdir(exist_ok=True)
    header = ("# Error-code enumerations of the published headers (bench/code_headers.py writes this file; do not edit):\n"
              "# tests/playbooks/test_codes.py counts the knowledge tables against them.\n")
    CODES_PATH.write_text(header + yaml.safe_dump(found, sort_keys=False, width=120), encoding="utf-8")
    for item in found:
        print("%-12s %-12s %-22s %d codes" % (item["table"], item["enum"], item["version"], len(item["codes"])))


if __name__ == "__main__":
    main()
