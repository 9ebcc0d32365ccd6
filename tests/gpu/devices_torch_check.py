#!/usr/bin/env python3
"""Issue 15 item 0 as a user meets it, through ctypes over torch tensors on a
two-GPU host: torch.cuda.set_device(1), x and y on cuda:1, ckjit_unary(RELU)
on torch's stream of device 1.  ckjit must refuse it (it serves device 0),
name both devices, write nothing, and leave torch on device 1; a call with
device 0's tensors and stream must still work from there.

usage: devices_torch_check.py LIBCKJIT   (exit 0: all held; 1: a check
failed; 77: fewer than two GPUs).  Prints one line per check.
"""
import ctypes
import sys

import torch

RELU, F32, INVALID_ARGUMENT = 1, 0, -1


def main():
    if torch.cuda.device_count() < 2:
        print("SKIP: fewer than two GPUs")
        return 77
    lib = ctypes.CDLL(sys.argv[1])
    lib.ckjit_unary.restype = ctypes.c_int
    lib.ckjit_unary.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                                ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    lib.ckjit_last_error.restype = ctypes.c_char_p
    failed = 0

    def check(ok, what):
        nonlocal failed
        print(("ok   " if ok else "FAIL ") + what)
        failed += not ok

    torch.cuda.set_device(1)
    x = torch.randn(4, 256, device="cuda:1")
    y = torch.full_like(x, 7.0)
    st = lib.ckjit_unary(RELU, F32, 4, 256, x.data_ptr(), 256, y.data_ptr(), 256, None,
                         torch.cuda.current_stream(1).cuda_stream)
    msg = lib.ckjit_last_error().decode()
    torch.cuda.synchronize(1)
    check(st == INVALID_ARGUMENT, "device 1's tensors and stream: status %d (want %d)" % (st, INVALID_ARGUMENT))
    check("device 1" in msg and "device 0" in msg, "message names both devices: %s" % msg)
    check(bool((y == 7.0).all()), "y untouched")
    check(torch.cuda.current_device() == 1, "torch still on device %d (want 1)" % torch.cuda.current_device())

    x0 = torch.randn(4, 256, device="cuda:0")
    y0 = torch.empty_like(x0)
    # torch's default stream is the NULL stream, which the driver reads as
    # the current context's (device 1's here): refused, as documented.
    st = lib.ckjit_unary(RELU, F32, 4, 256, x0.data_ptr(), 256, y0.data_ptr(), 256, None,
                         torch.cuda.current_stream(0).cuda_stream)
    check(st == INVALID_ARGUMENT and "default stream" in lib.ckjit_last_error().decode(),
          "device 0's tensors on the NULL stream while device 1 is current: status %d" % st)
    s0 = torch.cuda.Stream(device=0)
    st = lib.ckjit_unary(RELU, F32, 4, 256, x0.data_ptr(), 256, y0.data_ptr(), 256, None,
                         s0.cuda_stream)
    s0.synchronize()
    check(st == 0, "device 0's tensors and a device 0 stream from device 1: status %d" % st)
    check(torch.equal(y0, torch.relu(x0)), "relu on device 0 correct")
    check(torch.cuda.current_device() == 1, "torch still on device 1 after a device 0 call")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
