#!/usr/bin/env python3
"""Grouped (mixture-of-experts) FP8 GEMM: ckjit_gemm_fp8_moe (contiguous layout) against a
dense FP8 GEMM of the same useful flops, ckjit's own ckjit_gemm_fp8 and torch._scaled_mm,
in one process on one stream.

usage: moe_fp8_torch.py [--lib PATH] [--json FILE] [--quick] [--sort-only]
The problem (issue 21): 4096 tokens routed to 8 of 64 experts (uniformly at random), so
32768 token rows, grouped by expert and each expert's rows padded to 128 (tile_experts
names each 128-row tile's expert); the expert GEMMs of a DeepSeek-like layer: up
(n 1408, k 4096) and down (n 4096, k 1408), e4m3 operands, bf16 D, tensor scales (one
for A, one per expert for B) or block scales (1x128 of A, 128x128 of each B).  The dense
peers multiply a [32768, k] A by one [k, n] B: the same flops, no routing.  TFLOP/s count
the routed rows only (2 * 32768 * n * k; the grouped call also computes its padding
rows).  Checked before timing: expert rows (the first and last 64 of three experts)
against an f32 matmul of the dequantized inputs, |diff| <= 2e-2 x the row's max.  Timing:
rounds alternating the three calls, each call between its own CUDA events after an L2
flush, medians.  Records (JSON lines, kind "gemm_fp8", bench/make_results.py):
  gemm fp8 32768xNxK SCALING moe contiguous E64 top8 vs dense ckjit
  gemm fp8 32768xNxK SCALING moe contiguous E64 top8 vs dense scaled_mm
Also ckjit_moe_sort at 16384 tokens x top-8 of 256 experts (int32 ids, tile 128), GPU time
per call against torch's stable sort of the same ids plus its bincount (the sort a PyTorch
MoE layer runs; it yields no padding or tile list, so it does less), kind "host_time"
(microseconds, lower is better):
  moe_sort i32 T16384 k8 E256 tile128 vs torch stable sort
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
I64, INT, PTR = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p
T, E, TOP, BLK = 4096, 64, 8, 128

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ is not a package
from torch_bench_common import load_structs  # noqa: E402

S = load_structs()
Fp8Desc, MoeDesc, SortDesc = S.GemmFp8Desc, S.GemmFp8MoeDesc, S.MoeSortDesc
BF16, FP8_E4M3, I32 = S.BF16_DT, S.FP8_E4M3_DT, S.I32_DT


def load(lib_path):
    lib = ctypes.CDLL(lib_path)
    for name, desc in (('ckjit_gemm_fp8', Fp8Desc), ('ckjit_gemm_fp8_moe', MoeDesc)):
        getattr(lib, name).argtypes = [ctypes.POINTER(desc), PTR]
        getattr(lib, name).restype = INT
        getattr(lib, name + '_desc_init').argtypes = [ctypes.POINTER(desc)]
    lib.ckjit_last_error.restype = ctypes.c_char_p
    return lib


def routing(gen):
    """Rows of each expert (top-8 of 64 per token, uniform) and the padded layout."""
    choice = torch.rand(T, E, generator=gen, device='cuda').topk(TOP, dim=1).indices
    counts = torch.bincount(choice.flatten(), minlength=E).tolist()
    tiles = [e for e in range(E) for _ in range(math.ceil(counts[e] / BLK))]
    starts, at = [], 0
    for e in range(E):
        starts.append(at)
        at += math.ceil(counts[e] / BLK) * BLK
    return counts, starts, at, torch.tensor(tiles, dtype=torch.int32, device='cuda')


def fp8(gen, *shape):
    return torch.randn(*shape, generator=gen, device='cuda').clamp_(-448, 448).to(torch.float8_e4m3fn)


def scales(gen, *shape):
    return torch.rand(*shape, generator=gen, device='cuda') + 0.5


def fill(desc, m, n, k, a, b, d, sa, sb, scaling):
    g = desc
    g.m, g.n, g.k, g.out_dtype = m, n, k, BF16
    g.a_dtype = g.b_dtype = FP8_E4M3
    g.a, g.lda, g.b, g.ldb, g.d, g.ldd = a.data_ptr(), k, b.data_ptr(), k, d.data_ptr(), n
    g.scaling, g.scale_a, g.scale_b = (2 if scaling == 'block' else 0), sa.data_ptr(), sb.data_ptr()


def dequant_rows(a_rows, sa_rows, scaling, k):
    a = a_rows.float()
    if scaling == 'block':
        a *= sa_rows.repeat_interleave(BLK, 1)[:, :k]
    else:
        a *= sa_rows
    return a


def run_case(lib, n, k, scaling, a_args, emit, log):
    gen = torch.Generator(device='cuda').manual_seed(1000 + n + k)
    counts, starts, cap, tile_experts = routing(gen)
    rows, kb, nb = T * TOP, math.ceil(k / BLK), math.ceil(n / BLK)
    A, B = fp8(gen, cap, k), fp8(gen, E, n, k)
    if scaling == 'block':
        sa, sb = scales(gen, cap, kb), scales(gen, E, nb, kb)
    else:
        sa, sb = scales(gen, 1), scales(gen, E)
    D = torch.full((cap, n), math.nan, device='cuda', dtype=torch.bfloat16)
    moe = MoeDesc()
    lib.ckjit_gemm_fp8_moe_desc_init(ctypes.byref(moe))
    fill(moe.gemm, cap, n, k, A, B, D, sa, sb, scaling)
    moe.layout, moe.experts, moe.tile_experts = 0, E, tile_experts.data_ptr()
    stream = torch.cuda.current_stream().cuda_stream

    def call(fn, desc):
        def go():
            st = fn(ctypes.byref(desc), stream)
            if st:
                raise RuntimeError(f'status {st}: {lib.ckjit_last_error().decode()}')
        return go
    ck_moe = call(lib.ckjit_gemm_fp8_moe, moe)
    ck_moe()
    torch.cuda.synchronize()
    worst = 0.0
    for e in (0, E // 2, E - 1):  # the first and last 64 rows of three experts
        if counts[e] == 0:
            continue
        for lo in sorted({starts[e], starts[e] + max(0, counts[e] - 64)}):
            hi = min(lo + 64, starts[e] + counts[e])
            a = dequant_rows(A[lo:hi], sa[lo:hi] if scaling == 'block' else sa, scaling, k)
            b = B[e].float()
            if scaling == 'block':
                b *= sb[e].repeat_interleave(BLK, 0)[:n].repeat_interleave(BLK, 1)[:, :k]
            else:
                b *= sb[e]
            ref = a @ b.t()
            rel = (D[lo:hi].float() - ref).abs() / ref.abs().amax(dim=1, keepdim=True).clamp_min(1e-30)
            worst = max(worst, float(rel.nan_to_num(math.inf).max()))
    check = 'ok' if worst <= 2e-2 else f'failed: worst {worst:.3g} of the row max'
    # dense peers: a [rows, k] A (the first `rows` rows of A), one B
    Dd = torch.empty((rows, n), device='cuda', dtype=torch.bfloat16)
    dense = Fp8Desc()
    lib.ckjit_gemm_fp8_desc_init(ctypes.byref(dense))
    sa_d = sa[:rows] if scaling == 'block' else sa
    sb_d = sb[0] if scaling == 'block' else sb[:1]
    fill(dense, rows, n, k, A[:rows], B[0], Dd, sa_d, sb_d, scaling)
    ck_dense = call(lib.ckjit_gemm_fp8, dense)
    Bt = B[0].t()
    if scaling == 'block':
        from torch.nn.functional import ScalingType, scaled_mm
        sa_t = sa_d.t().contiguous().t()
        ld = -(-kb // 4) * 4
        sb_pad = torch.ones(nb, ld, device='cuda')
        sb_pad[:, :kb] = sb_d
        torch_dense = lambda: scaled_mm(A[:rows], Bt, sa_t, ScalingType.BlockWise1x128, sb_pad.t(),  # noqa: E731
                                        ScalingType.BlockWise128x128, output_dtype=torch.bfloat16)
    else:
        torch_dense = lambda: torch._scaled_mm(A[:rows], Bt, scale_a=sa.reshape(()),  # noqa: E731
                                               scale_b=sb[0].reshape(()), out_dtype=torch.bfloat16)
    sides = {'moe': ck_moe, 'dense ckjit': ck_dense, 'dense scaled_mm': torch_dense}
    try:
        torch_dense()
    except Exception as e:  # noqa: BLE001 (an older torch without this scaling: no torch peer)
        log(f'torch refused the dense {scaling} peer: {type(e).__name__}: {e}')
        del sides['dense scaled_mm']
    flush = torch.empty(256 << 20, dtype=torch.uint8, device='cuda')
    for fn in list(sides.values()) * 3:
        fn()
    torch.cuda.synchronize()
    times = {s: [] for s in sides}
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    names = list(sides)
    for r in range(a_args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            for _ in range(a_args.calls):
                flush.fill_(r)
                ev[0].record()
                sides[name]()
                ev[1].record()
                ev[1].synchronize()
                times[name].append(ev[0].elapsed_time(ev[1]))
    med = {s: statistics.median(v) for s, v in times.items()}
    flops = 2 * rows * n * k
    label = 'blockwise' if scaling == 'block' else 'tensor'
    for peer in [p for p in ('dense ckjit', 'dense scaled_mm') if p in sides]:
        rec = {'kind': 'gemm_fp8', 'impl': 'ckjit', 'unit': 'TFLOP/s',
               'metric': f'gemm fp8 {rows}x{n}x{k} {label} moe contiguous E{E} top{TOP} vs {peer}',
               'value': flops / med['moe'] / 1e9, 'peer_value': flops / med[peer] / 1e9,
               'peer_name': 'ckjit_gemm_fp8 (dense, same flops)' if peer == 'dense ckjit'
               else 'torch._scaled_mm / F.scaled_mm (dense, same flops)',
               'card': torch.cuda.get_device_name(), 'check': check, 'flops': flops,
               'details': {'shape': f'{rows}x{n}x{k}', 'scaling': label, 'tokens': T,
                           'experts': E, 'top': TOP, 'padded_rows': cap,
                           'counts_min_max': [min(counts), max(counts)],
                           'ckjit_ms': med['moe'], 'peer_ms': med[peer],
                           'ckjit_min_ms': min(times['moe']), 'peer_min_ms': min(times[peer]),
                           'ref_max_rel_diff': worst, 'rounds': a_args.rounds,
                           'calls_per_round': a_args.calls, 'l2_flush': True},
               'note': None}
        log(f"{rec['metric']}: moe {med['moe']:.4f} ms = {rec['value']:.1f} TFLOP/s, "
            f"{peer} {med[peer]:.4f} ms = {rec['peer_value']:.1f} ({check})")
        emit(rec)


def sort_case(lib, a_args, emit, log):
    """ckjit_moe_sort against torch.sort(stable) + bincount, GPU time per call."""
    tokens, k, experts, tile = 16384, 8, 256, 128
    gen = torch.Generator(device='cuda').manual_seed(5)
    ids = torch.rand(tokens, experts, generator=gen, device='cuda').topk(k, dim=1).indices.int()
    lib.ckjit_moe_sort_capacity.restype = I64
    lib.ckjit_moe_sort_capacity.argtypes = [I64, INT, INT, INT]
    cap = lib.ckjit_moe_sort_capacity(tokens, k, experts, tile)
    out = [torch.empty(n, dtype=torch.int32, device='cuda')
           for n in (cap, experts + 1, experts, cap // tile, 1)]
    d = SortDesc(tokens, k, experts, tile, I32, ids.data_ptr(), *[o.data_ptr() for o in out], None)
    lib.ckjit_moe_sort.argtypes = [ctypes.POINTER(SortDesc), PTR]
    lib.ckjit_moe_sort.restype = INT
    stream = torch.cuda.current_stream().cuda_stream

    def ck():
        st = lib.ckjit_moe_sort(ctypes.byref(d), stream)
        if st:
            raise RuntimeError(f'status {st}: {lib.ckjit_last_error().decode()}')

    def peer():
        flat = ids.flatten()
        return torch.sort(flat, stable=True).indices, torch.bincount(flat, minlength=experts)
    ck()
    torch.cuda.synchronize()
    want = peer()[0].int()  # torch's stable sort = the entries in expert order
    got = out[0][out[0] != tokens * k]
    check = 'ok' if torch.equal(got, want) else 'failed: sorted ids differ from torch.sort(stable)'
    times = {'ckjit': [], 'torch': []}
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    for r in range(a_args.rounds * 4):
        for name, fn in (('ckjit', ck), ('torch', peer))[::1 if r % 2 else -1]:
            ev[0].record()
            fn()
            ev[1].record()
            ev[1].synchronize()
            times[name].append(ev[0].elapsed_time(ev[1]) * 1000)
    med = {s: statistics.median(v) for s, v in times.items()}
    rec = {'kind': 'host_time', 'metric': f'moe_sort i32 T{tokens} k{k} E{experts} tile{tile} vs torch stable sort',
           'unit': 'us', 'value': med['ckjit'], 'peer_value': med['torch'],
           'peer_name': 'torch.sort(stable=True) + torch.bincount (GPU time)', 'check': check,
           'details': {'what': 'GPU time per call (CUDA events), medians', 'ckjit_min_us': min(times['ckjit']),
                       'peer_min_us': min(times['torch'])}}
    log(f"{rec['metric']}: ckjit {med['ckjit']:.1f} us, torch {med['torch']:.1f} us ({check})")
    emit(rec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--lib', default=os.path.join(ROOT, 'build-gpu', 'libckjit.so'))
    ap.add_argument('--json')
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--sort-only', action='store_true', help='only the ckjit_moe_sort record')
    a = ap.parse_args()
    a.rounds, a.calls = (3, 3) if a.quick else (10, 5)
    if not torch.cuda.is_available():
        print('moe_fp8_torch.py: no CUDA device', file=sys.stderr)
        return 1
    lib = load(a.lib)
    out = open(a.json, 'w') if a.json else None

    def emit(rec):
        line = json.dumps(rec)
        print(line)
        if out:
            out.write(line + '\n')

    def log(msg):
        print('moe_fp8_torch.py: ' + msg, file=sys.stderr)
    status = 0
    try:
        sort_case(lib, a, emit, log)
    except Exception as e:  # noqa: BLE001
        log(f'moe_sort: {type(e).__name__}: {e}')
        status = 1
    for scaling in () if a.sort_only else ('block', 'tensor'):
        for n, k in ((1408, 4096), (4096, 1408)):
            try:
                run_case(lib, n, k, scaling, a, emit, log)
            except Exception as e:  # noqa: BLE001 (one case's failure is reported, the rest run)
                log(f'{scaling} n {n} k {k}: {type(e).__name__}: {e}')
                status = 1
    return status


if __name__ == '__main__':
    sys.exit(main())
