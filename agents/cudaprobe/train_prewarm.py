"""What a training worker can get ready before it may touch its GPU: the CUDA driver initialised (cuInit).

A training worker waits for the measuring worker to end before it makes its context (EXCLUSIVE_PROCESS compute mode
allows one per GPU: children.hand_gpus_to_trainers). cuInit needs no context, and a training worker that has not
called it pays it on its first tensor. Importing this module calls it, in the worker's preload (children.
TRAIN_PRELOAD), while the L4-L5 checks measure on the other worker: on a lent H200 (issue 33, 5 runs each way) the
trainer's setup before its first step fell from 0.42 s to 0.30 s (median). Loading cuDNN's sub-libraries here as
well was tried in the same runs and changed nothing measurable (0.02 s, first steps within their spread), so it
is not done. Nothing here makes a context or runs on the GPU; a failure is left for torch to meet and report.
"""

import ctypes
import time

done = {}


def _prewarm():
    started = time.perf_counter()
    try:
        done["cuinit_rc"] = ctypes.CDLL("libcuda.so.1").cuInit(0)
    except OSError as exc:
        done["cuinit_error"] = str(exc)
    done["cuinit_s"] = round(time.perf_counter() - started, 3)


_prewarm()
