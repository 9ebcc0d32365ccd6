#!/usr/bin/env python3
"""FP8 GEMM scaling probe: ckjit_gemm_fp8 on one pair of e4m3 operands with block
scales (random, then all 1.0) and with per-tensor scales, timed in alternating
rounds (cold L2, medians; bench/fp8_torch.py's context and timing).  No result
check and no peer: an A/B harness for the block-scaling pipeline (bench/NOTES.md
#196), to run against two builds of the library.

usage: fp8_block_probe.py LIBCKJIT.so
prints one line per shape: {side: TFLOP/s}
"""
import math
import sys

import fp8_torch as F8

if len(sys.argv) != 2:
    sys.exit(__doc__)
ctx = F8.Ctx(F8.parse_library_args(F8.__doc__, '', 'gemm_fp8.h', ['--lib', sys.argv[1]]))
torch = F8.torch
for (m, n, k) in [(4096, 4096, 4096), (4096, 7168, 16384)]:
    case, tcase = F8.Case(m, n, k, 'block'), F8.Case(m, n, k, 'tensor')
    A, Bt = F8.fp8_randn(ctx, m, k), F8.fp8_randn(ctx, n, k)
    kb = math.ceil(k / 128)
    ld_sb = -(-kb // 4) * 4
    sa_r = F8.positive(ctx, m, kb)
    sb_r = torch.ones(math.ceil(n / 128), ld_sb, device='cuda')
    sb_r[:, :kb] = F8.positive(ctx, sb_r.shape[0], kb)
    sa_1, sb_1 = torch.ones_like(sa_r), torch.ones_like(sb_r)
    D = torch.empty(m, n, device='cuda', dtype=torch.bfloat16)
    keep, sides = [], {}
    for name, (sa, sb) in {'block random': (sa_r, sb_r), 'block ones': (sa_1, sb_1)}.items():
        d = F8.make_desc(ctx, case, A, Bt, D, sa, sb, ld_sb)
        keep.append(d)
        sides[name] = ctx.call(ctx.lib.ckjit_gemm_fp8, d)
    st = torch.ones(1, device='cuda')
    d = F8.make_desc(ctx, tcase, A, Bt, D, st, st)
    keep.append(d)
    sides['tensor'] = ctx.call(ctx.lib.ckjit_gemm_fp8, d)
    for f in sides.values():
        f()
    torch.cuda.synchronize()
    res = ctx.time_sides(sides)
    print(m, n, k, {s: round(2 * m * n * k / v[0] / 1e9, 1) for s, v in res.items()}, flush=True)
