#!/usr/bin/env python3
"""Host time of one ckjit call made from PyTorch through ctypes, beside
torch's own y.copy_(x), on the same stream: the way users (and outside
re-measurements) call ckjit.  Several libckjit builds can be compared in one
process run each (alternating rounds, medians); every build is a separate
process because a process loads one libckjit.

usage: dispatch_torch.py LIB [LIB...]     (prints one JSON line per LIB and
                                            one for torch)
       dispatch_torch.py --child LIB ROUNDS
"""
import ctypes
import json
import statistics
import subprocess
import sys
import time

CALLS = 2000
RELU, F32 = 1, 0  # ckjit_unary_op / ckjit_dtype values of the header


def child(lib_path, rounds):
    import torch
    lib = ctypes.CDLL(lib_path)
    lib.ckjit_unary.restype = ctypes.c_int
    lib.ckjit_unary.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                                ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    x = torch.randn(1, 1024, device="cuda:0")
    y = torch.empty_like(x)
    stream = torch.cuda.current_stream(0).cuda_stream
    args = (RELU, F32, 1, 1024, x.data_ptr(), 1024, y.data_ptr(), 1024, None, stream)
    assert lib.ckjit_unary(*args) == 0
    torch.cuda.synchronize()
    assert torch.equal(y, torch.relu(x))
    out = {"ckjit": [], "torch_copy": []}
    for _ in range(rounds):
        for name in ("ckjit", "torch_copy"):
            t0 = time.perf_counter()
            if name == "ckjit":
                for _ in range(CALLS):
                    lib.ckjit_unary(*args)
            else:
                for _ in range(CALLS):
                    y.copy_(x)
            out[name].append((time.perf_counter() - t0) / CALLS * 1e6)
            torch.cuda.synchronize()
    print(json.dumps({k: statistics.median(v) for k, v in out.items()}))


def main():
    if sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    libs = sys.argv[1:]
    results = {lib: [] for lib in libs}
    torch_copy = []
    for _ in range(3):  # alternate the builds, three processes each
        for lib in libs:
            r = json.loads(subprocess.check_output([sys.executable, __file__, "--child", lib, "7"]))
            results[lib].append(r["ckjit"])
            torch_copy.append(r["torch_copy"])
    for lib in libs:
        print(json.dumps({"metric": "host us per ckjit_unary relu f32 1x1024 via ctypes (torch stream)",
                          "lib": lib, "median_us": statistics.median(results[lib]),
                          "runs_us": results[lib]}))
    print(json.dumps({"metric": "host us per torch y.copy_(x) f32 1x1024",
                      "median_us": statistics.median(torch_copy)}))


if __name__ == "__main__":
    main()
