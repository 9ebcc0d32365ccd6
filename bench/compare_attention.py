#!/usr/bin/env python3
"""Before/after timing of ckjit_attention in two builds, in one process, with
torch SDPA's cuDNN and FlashAttention-2 backends alongside (the A/B rows of
bench/NOTES.md's attention section).

usage: compare_attention.py BASE_LIB NEW_LIB SHAPE...
  SHAPE  b:hq:hkv:s:d:causal[:alibi|bias], e.g. 4:16:16:4096:128:1 (bf16 BSHD,
         sq = sk = s; alibi: slopes per head; bias: an f32 [s, s] bias
         broadcast over batch and head; the peers are skipped for those)

Both libraries are loaded with ctypes (RTLD_LOCAL, so two builds coexist);
each call runs on the same inputs and stream.  Before timing, each build's
O is checked against float64 attention on sampled rows (bias / ALiBi: the
two builds against each other).  Timing is bench/attention_torch.py's:
alternating calls between CUDA events, a cold L2 before each, medians.
Prints one line per shape: TFLOP/s per side (4 b h s^2 d, halved causal).
Run with the kernels of both builds prewarmed into CKJIT_CACHE_DIR (the
cache key tells the builds' kernels apart), or they compile at first call.
"""
import ctypes
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attention_torch as at  # noqa: E402  (the Ctx, descriptor and check helpers)


def load(path):
    lib = ctypes.CDLL(path)
    lib.ckjit_attention.argtypes = [ctypes.POINTER(at.AttentionDesc), ctypes.c_void_p]
    lib.ckjit_attention.restype = ctypes.c_int
    lib.ckjit_attention_desc_init.argtypes = [ctypes.POINTER(at.AttentionDesc)]
    return lib


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    ctx = at.Ctx(types.SimpleNamespace(lib=sys.argv[1], quick=False, no_lse=True, no_flush_l2=False))
    torch = at.torch
    libs = {'base': ctx.lib, 'new': load(sys.argv[2])}
    failed = False
    for shape in sys.argv[3:]:
        b, hq, hkv, s, d, causal, feat = (shape.split(':') + [''])[:7]
        case = at.Case(int(b), int(hq), int(hkv), int(s), int(d), causal == '1')
        q = torch.randn(case.b, case.s, case.hq, case.d, device='cuda', dtype=torch.bfloat16)
        k, v = (torch.randn(case.b, case.s, case.hkv, case.d, device='cuda', dtype=torch.bfloat16)
                for _ in range(2))
        slopes = torch.rand(case.hq, device='cuda') * 0.1 if feat == 'alibi' else None
        bias = torch.randn(case.s, case.s, device='cuda') * 0.5 if feat == 'bias' else None
        fns, outs = {}, {}
        for name, lib in libs.items():
            ctx.lib = lib
            outs[name] = torch.empty_like(q)
            desc = at.make_desc(ctx, case, q, k, v, outs[name])
            if slopes is not None:
                desc.alibi_slopes, desc.alibi_stride_batch = slopes.data_ptr(), 0
            if bias is not None:
                desc.bias, desc.bias_dtype = bias.data_ptr(), 0  # CKJIT_F32
                desc.bias_strides = at.Strides(0, 0, case.s, 1)
            fns[name] = ctx.call(lib.ckjit_attention, desc)
        for peer in () if feat else at.PEERS:
            kw = {'is_causal': case.causal, **({'enable_gqa': True} if case.hq != case.hkv else {})}
            fns[peer] = at.sdpa(ctx, ctx.backends[peer], [(q, k, v)], kw)
        for name in libs:
            fns[name]()
        torch.cuda.synchronize()
        if feat:
            diff = (outs['base'].float() - outs['new'].float()).abs().max().item()
            note = f'  (max |base - new| {diff:.3g})'
        else:
            note = ''
            for name in libs:
                seqs = [(q[i], k[i], v[i], outs[name][i]) for i in range(min(case.b, 2))]
                worst, bad = at.sampled_check(case, seqs)
                if bad:
                    failed = True
                    note += f'  CHECK FAILED {name}: {bad} elements, max diff {worst:.3g}'
        res = ctx.measure(fns)
        print(f'{case.name + (" " + feat if feat else ""):30s}' +
              ''.join(f' {n} {case.flops / r[0] / 1e9:6.1f}' for n, r in res.items()) + note, flush=True)
    sys.exit(2 if failed else 0)


if __name__ == '__main__':
    main()
