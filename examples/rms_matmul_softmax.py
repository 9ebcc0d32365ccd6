#!/usr/bin/env python3
"""rmsnorm -> matmul -> softmax with the ckjit package on torch tensors, checked against
torch: probs = softmax(rms_norm(x, weight=gamma) @ w) over each row.

Run it (see examples/README.md):  CKJIT_LIBRARY=build/libckjit.so PYTHONPATH=python \\
                                  python3 examples/rms_matmul_softmax.py
"""
import sys

import torch
import torch.nn.functional as F

import ckjit


def main():
    if not torch.cuda.is_available():
        print('no CUDA GPU visible to torch', file=sys.stderr)
        return 1
    torch.manual_seed(7)
    rows, hidden, vocab = 64, 256, 200  # vocab: not a tile multiple
    dtype = torch.bfloat16
    x = torch.randn(rows, hidden, device='cuda', dtype=dtype)
    gamma = (0.5 + torch.arange(hidden, device='cuda') / hidden).to(dtype)
    w = (torch.randn(vocab, hidden, device='cuda') * 0.1).to(dtype)  # an nn.Linear weight

    h = ckjit.rms_norm(x, (hidden,), gamma, eps=1e-5)   # like F.rms_norm
    logits = ckjit.matmul(h, w.t())                     # w.t(): read column-major, no copy
    probs = ckjit.softmax(logits, dim=-1)               # like torch.softmax

    # the same chain in torch, in float64 from the same bf16 intermediates
    h_ref = F.rms_norm(x.double(), (hidden,), gamma.double(), eps=1e-5)
    logits_ref = (h.double() @ w.double().t())
    probs_ref = torch.softmax(logits.double(), dim=-1)
    for name, got, want in (('rms_norm', h, h_ref), ('matmul', logits, logits_ref),
                            ('softmax', probs, probs_ref)):
        err = float((got.double() - want).abs().max())
        scale = max(float(want.abs().max()), 1e-3)
        if not err <= 2e-2 * scale:  # two bf16 roundings
            print(f'FAIL: {name}: max |ckjit - torch| = {err:.3g} (largest value {scale:.3g})')
            return 1
    print(f'OK: {rows}x{hidden} -> {rows}x{vocab} on {torch.cuda.get_device_name()}; '
          f'kernels compiled this run: {ckjit.stats()["compiles"]}, cache: {ckjit.cache_dir()}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
