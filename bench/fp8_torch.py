#!/usr/bin/env python3
"""FP8 GEMM: ckjit_gemm_fp8 (tensor / row / block scaling) against torch._scaled_mm on
the same GPU, stream and inputs.

usage: fp8_torch.py [--lib PATH] [--json FILE] [--quick] [--only SUBSTRING]...
                    [--budget S] [--no-flush-l2] [--check-layout]
The library: --lib, else CKJIT_LIBRARY (the .so or a directory holding it), else
build-gpu/libckjit.so, else what the python package (python/ckjit) loads.  ckjit runs
through ctypes over torch tensors (.data_ptr(), torch's current stream).  Operands: A
[m, k] e4m3fn row-major, B_t [n, k] e4m3fn row-major and B = B_t.t() (k x n,
column-major): torch._scaled_mm(A, B, scale_a, scale_b, out_dtype=bfloat16) and ckjit
(b = B_t, ldb = k) read the same bytes and the same f32 scales; D is bf16.
Records (JSON lines on stdout and in --json, kind "gemm_fp8", for bench/make_results.py):
  gemm fp8 MxNxK tensor vs scaled_mm              (per-tensor scales)
  gemm fp8 MxNxK rowwise vs scaled_mm             (scale_a [m, 1], scale_b [1, n])
  gemm fp8 MxNxK blockwise                        (1x128 / 128x128 scales, no peer)
  gemm fp8 MxNxK blockwise vs scaled_mm rowwise   (peer: torch's row-wise at that shape)
  gemm fp8 MxNxK blockwise vs scaled_mm blockwise (only where this torch takes
                                                   DeepSeek-style block scales on sm_90)
value = ckjit TFLOP/s (2*m*n*k / median time), peer_value = the peer's; details.ckjit_cluster2_ms:
ckjit's median with CKJIT_GEMM_FP8_CLUSTER=2 (pairs of blocks multicasting A) in the same rounds.  Every case is
checked before it is timed; one that fails posts no number ("check": "failed: ...").
Cases run in child processes (a crash or hang costs only its case; torch_bench_common).
Exit status 0 when every case was measured or CKJIT_ERROR_UNSUPPORTED, 2 when a check
failed, else 1 (also: no CUDA device, no library, a ctypes layout mismatch).
"""
import ctypes
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ is not a package
from torch_bench_common import (  # noqa: E402  (the shared ctypes, child runner, checks)
    BF16, FLT, I64, INT, PTR, UNSTEADY, BenchContext, CkjitFailed, FileReporter, capture,
    first_call_ms, import_cuda_torch, layout_check, layout_gate, parse_library_args, run_child,
    run_parent, with_env)

FP8_E4M3 = 4                    # ckjit_dtype
SCALING = {'tensor': 0, 'row': 1, 'block': 2}  # ckjit_fp8_scaling
LABEL = {'tensor': 'tensor', 'row': 'rowwise', 'block': 'blockwise'}
E4M3_MAX = 448.0
BLK = 128                       # the block of CKJIT_FP8_SCALE_BLOCK (1 x 128 A, 128 x 128 B)
# A bf16 element agrees when |ckjit - ref| <= RTOL * max |ref| over its row.  Both sides
# form exact f32 products and sum each K block of 128 on the tensor cores before adding it
# to an f32 accumulator, so they differ by a few f32 roundings, far below bf16's; after
# rounding to bf16 (8 bits: 2^-8 = 0.4% of |value| <= max of the row) they differ by at
# most ~1 ulp.  2e-2 is 5 ulps of the row's largest value: no rounding difference reaches
# it, while a dropped K block (~12% of the sum's spread at k = 8192), a wrong row or block
# scale (>= 1% of the value, typically ~50%) or a misplaced tile does.
RTOL = 2e-2
REF_ROWS = 256                  # rows of the f32 reference: the first and the last REF_ROWS
PEER_NAME = 'torch._scaled_mm (cuBLASLt)'
BLOCK_TARGET_SHAPE = (4096, 7168, 16384)  # blockwise >= 1400 TFLOP/s, >= 0.95x row-wise
torch = F = None                # imported by the child


REPORT = FileReporter('fp8_torch.py', 'gemm_fp8', 'CKJIT_FP8_JSON')
log, emit, note = REPORT.log, REPORT.emit, REPORT.note


# ---- ctypes mirror of include/ckjit/gemm_fp8.h ------------------------------------------
class Fp8Desc(ctypes.Structure):  # ckjit_gemm_fp8_desc (enums are int)
    _fields_ = [('m', I64), ('n', I64), ('k', I64), ('a_dtype', INT), ('b_dtype', INT),
                ('out_dtype', INT), ('a', PTR), ('lda', I64), ('b', PTR), ('ldb', I64),
                ('d', PTR), ('ldd', I64), ('scaling', INT), ('scale_a', PTR),
                ('scale_b', PTR), ('ld_scale_a', I64), ('ld_scale_b', I64), ('alpha', FLT),
                ('bias', PTR), ('bias_mode', INT), ('activation', INT), ('c', PTR), ('ldc', I64),
                ('beta', FLT), ('d0', PTR), ('ldd0', I64), ('d1', PTR), ('ldd1', I64)]


# Offsets by hand, LP64: m n k 0 8 16, a_dtype b_dtype out_dtype 24 28 32 (+4), a 40, lda 48,
# b 56, ldb 64, d 72, ldd 80, scaling 88 (+4), scale_a 96, scale_b 104, ld_scale_a 112,
# ld_scale_b 120, alpha 128 (+4), bias 136, bias_mode 144, activation 148, c 152, ldc 160,
# beta 168 (+4), d0 176, ldd0 184, d1 192, ldd1 200: sizeof 208.
STRUCTS = {'ckjit_gemm_fp8_desc': (Fp8Desc, 208, 200)}


# ---- cases ---------------------------------------------------------------------------------
class Case:
    def __init__(self, m, n, k, scaling):
        self.m, self.n, self.k, self.scaling = m, n, k, scaling
        self.shape, self.flops = f'{m}x{n}x{k}', 2 * m * n * k
        self.base = f'gemm fp8 {self.shape} {LABEL[scaling]}'
        # The metrics it writes (--only matches any; a failure writes each with no value).
        self.metrics = ([self.base, self.base + ' vs scaled_mm rowwise'] if scaling == 'block'
                        else [self.base + ' vs scaled_mm'])

    def target(self, metric):
        """(text, ratio target, TFLOP/s target) of the issue for this metric."""
        if self.scaling != 'block':
            return '>= 1.0x torch._scaled_mm', 1.0, None
        if (self.m, self.n, self.k) != BLOCK_TARGET_SHAPE:
            return None, None, None
        if metric.endswith('vs scaled_mm rowwise'):
            return '>= 0.95x torch._scaled_mm row-wise at the same shape', 0.95, None
        return ('>= 1400 TFLOP/s', None, 1400.0) if metric == self.base else (None, None, None)


CASES = [Case(m, n, k, s) for (m, n, k) in ((4096, 4096, 4096), (8192, 8192, 8192),
                                           (4096, 7168, 2048)) for s in ('tensor', 'row')]
CASES += [Case(4096, 7168, 16384, 'block'), Case(4096, 4096, 4096, 'block')]


def fail_records(case, status, error, extra=None):
    log(f'{case.base}: {status}: {error}')
    for metric in case.metrics:
        text, rt, tt = case.target(metric)
        emit(dict(extra or {}, metric=metric, kind='gemm_fp8', impl='ckjit', unit='TFLOP/s',
                  value=None, status=status, error=error[:600], target=text, target_ratio=rt,
                  target_tflops=tt, target_met=None))


# ---- the child -------------------------------------------------------------------------------
class Ctx(BenchContext):
    def __init__(self, a):
        global torch, F
        torch, F = import_cuda_torch()
        super().__init__(a, (('ckjit_gemm_fp8', Fp8Desc),))
        self.spin = getattr(torch.cuda, '_sleep', None)
        self.rounds, self.calls = (5, 5) if a.quick else (20, 10)



def fp8_randn(ctx, rows, cols):
    """Normal values (f32) clamped to e4m3fn's range and rounded to it."""
    x = torch.randn(rows, cols, device='cuda', generator=ctx.gen)
    return x.clamp_(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def positive(ctx, *shape):
    """Scales in [0.5, 1.5): positive, and products keep bf16 far from its range's ends."""
    return torch.rand(*shape, device='cuda', generator=ctx.gen) + 0.5


def expand_blocks(s, rows_per, cols_per, rows, cols):
    """A per-element [rows, cols] view of block scales s (each entry covers rows_per x
    cols_per elements; last blocks may be short)."""
    return s.repeat_interleave(rows_per, 0)[:rows].repeat_interleave(cols_per, 1)[:, :cols]


def spans_of(m):
    """[(start, stop)]: the first and the last REF_ROWS rows (slices, not index tensors:
    advanced indexing of float8 tensors is not implemented in every torch)."""
    r = min(REF_ROWS, m)
    return [(0, r)] + ([(max(r, m - REF_ROWS), m)] if m > r else [])


def pick(t, spans):
    """Those rows of t, as float32."""
    return torch.cat([t[a:b].float() for a, b in spans])


def reference_rows(case, A, Bt, sa, sb, spans):
    """f32 D of those rows from dequantized inputs (f32 matmul, TF32 off)."""
    n, k = case.n, case.k
    a, bt = pick(A, spans), Bt.float()
    if case.scaling == 'block':
        kb = math.ceil(k / BLK)
        a *= expand_blocks(pick(sa, spans)[:, :kb], 1, BLK, a.shape[0], k)
        bt *= expand_blocks(sb[:, :kb], BLK, BLK, n, k)
    elif case.scaling == 'row':  # sa [m], sb [n]
        a *= pick(sa.reshape(-1, 1), spans)
        bt *= sb.reshape(-1, 1)
    else:  # sa, sb: [1]
        a, bt = a * sa.reshape(()), bt * sb.reshape(())
    return a @ bt.t()


def agree(got, ref):
    """(largest |diff| / max |ref| of its row, elements out of RTOL of their row's max;
    NaN and inf count as out)."""
    g, r = got.float(), ref.float()
    row_max = r.abs().amax(dim=1, keepdim=True).clamp_min(1e-30)
    rel = (g - r).abs() / row_max
    bad = int((~(rel <= RTOL)).sum())
    worst = float(rel.nan_to_num(math.inf).max()) if rel.numel() else 0.0
    return worst, bad


def make_desc(ctx, case, A, Bt, D, sa, sb, ld_sb=0):
    d = Fp8Desc()
    ctx.lib.ckjit_gemm_fp8_desc_init(ctypes.byref(d))  # e4m3 both, bf16 out, alpha 1
    d.m, d.n, d.k, d.out_dtype = case.m, case.n, case.k, BF16
    d.a_dtype = d.b_dtype = FP8_E4M3
    d.a, d.lda, d.b, d.ldb = A.data_ptr(), A.stride(0), Bt.data_ptr(), Bt.stride(0)
    d.d, d.ldd, d.scaling = D.data_ptr(), D.stride(0), SCALING[case.scaling]
    d.scale_a, d.scale_b = sa.data_ptr(), sb.data_ptr()
    d.ld_scale_a, d.ld_scale_b = 0, ld_sb  # block: A's scales [m, ceil(k/128)] exactly
    return d


def scaled_mm_ways(case, A, B, sa, sb):
    """[(form, callable)] of torch._scaled_mm on scale forms this torch may take for the
    case's scaling (the first that runs and agrees is timed)."""
    def way(a_s, b_s):
        return lambda: torch._scaled_mm(A, B, scale_a=a_s, scale_b=b_s, out_dtype=torch.bfloat16)
    if case.scaling == 'tensor':  # sa, sb: one float each
        return [('0-dim scales', way(sa.reshape(()), sb.reshape(()))),
                ('shape (1,) scales', way(sa.reshape(1), sb.reshape(1))),
                ('shape (1, 1) scales', way(sa.reshape(1, 1), sb.reshape(1, 1)))]
    return [('scale_a (m, 1), scale_b (1, n)', way(sa.reshape(-1, 1), sb.reshape(1, -1)))]


def torch_blockwise(A, B, sa, sb):
    """[(form, callable)] of torch's DeepSeek-style block scaling (cuBLASLt 12.9+ on sm_90;
    older torch refuses): A's scales outer-dim-major ([m, kb], stride (1, m)), B's
    [L4, ceil(n/128)] with stride (1, L4), L4 = kb rounded up to 4 (sb is [nb, L4])."""
    sa_t, sb_t = sa.t().contiguous().t(), sb.t()
    ways = []
    try:
        from torch.nn.functional import ScalingType, scaled_mm
        ways.append(('F.scaled_mm BlockWise1x128 / BlockWise128x128', lambda: scaled_mm(
            A, B, sa_t, ScalingType.BlockWise1x128, sb_t, ScalingType.BlockWise128x128,
            output_dtype=torch.bfloat16)))
    except ImportError:
        pass
    ways.append(('torch._scaled_mm with block-shaped scales', lambda: torch._scaled_mm(
        A, B, scale_a=sa_t, scale_b=sb_t, out_dtype=torch.bfloat16)))
    return ways


def first_working(ways, check):
    """(form, callable, output) of the first way that runs and passes check(output) ->
    (worst, bad), and the notes of those that did not."""
    notes = []
    for form, fn in ways:
        out, err = capture(fn)
        if out is None:
            notes.append(f'{form}: refused: {err}')
            continue
        worst, bad = check(out)
        if bad:
            notes.append(f'{form}: {bad} elements out of tolerance (worst {worst:.3g} of the '
                         'row max): not timed')
            continue
        return form, fn, out, notes
    return None, None, None, notes


def kernel_names(fn):
    """The CUDA kernels one call of fn launches (torch.profiler), to say which library
    served the peer; None where the profiler is unavailable."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            fn()
            torch.cuda.synchronize()
        return sorted({e.key[:160] for e in p.key_averages()
                       if 'CUDA' in str(e.device_type) and not e.key.startswith('Memset')})
    except Exception:  # noqa: BLE001 (CUPTI missing and the like: the names are optional)
        return None


def in_clusters(call):
    """call with CKJIT_GEMM_FP8_CLUSTER=2 (read by each ckjit_gemm_fp8 call): the same
    tile in pairs of blocks multicasting A, for the clusters' effect in the same run."""
    return with_env('CKJIT_GEMM_FP8_CLUSTER', '2', call)


def run_case(ctx, case):
    ctx.gen.manual_seed(7000 + CASES.index(case))
    m, n, k = case.m, case.n, case.k
    A, Bt = fp8_randn(ctx, m, k), fp8_randn(ctx, n, k)
    B = Bt.t()  # k x n column-major: _scaled_mm's second operand, ckjit's b (ldb = k)
    ld_sb, kb = 0, math.ceil(k / BLK)
    if case.scaling == 'tensor':
        sa, sb = positive(ctx, 1), positive(ctx, 1)
    elif case.scaling == 'row':
        sa, sb = positive(ctx, m), positive(ctx, n)
    else:  # A [m, kb]; B [ceil(n/128), L4] (L4: kb rounded up to 4, cuBLASLt's padding)
        ld_sb = -(-kb // 4) * 4
        sa, sb = positive(ctx, m, kb), torch.ones(math.ceil(n / BLK), ld_sb, device='cuda')
        sb[:, :kb] = positive(ctx, sb.shape[0], kb)
    D = torch.full((m, n), math.nan, device='cuda', dtype=torch.bfloat16)
    desc = make_desc(ctx, case, A, Bt, D, sa, sb, ld_sb)
    ck = ctx.call(ctx.lib.ckjit_gemm_fp8, desc)
    try:
        first_ms = first_call_ms(ck)
    except CkjitFailed as e:
        return fail_records(case, *e.args)
    spans = spans_of(m)
    ref = reference_rows(case, A, Bt, sa, sb, spans)
    ref_worst, ref_bad = agree(pick(D, spans), ref)
    notes, sides, peer_out = [], {'ckjit': ck}, None
    if case.scaling == 'block':  # the peer: torch's row-wise GEMM at this shape
        row_sa, row_sb = positive(ctx, m, 1), positive(ctx, 1, n)
        form, peer_fn, _, why = first_working(
            [('row-wise', lambda: torch._scaled_mm(A, B, scale_a=row_sa, scale_b=row_sb,
                                                   out_dtype=torch.bfloat16))],
            lambda out: (0.0, int((~torch.isfinite(out)).sum())))
        bform, bfn, _, bwhy = first_working(torch_blockwise(A, B, sa, sb), lambda out: agree(
            pick(out, spans), ref))
        notes += why + [f'torch blockwise {w}' for w in bwhy]
        if bfn:
            sides['torch blockwise'] = bfn
    else:
        form, peer_fn, peer_out, why = first_working(
            scaled_mm_ways(case, A, B, sa, sb), lambda out: agree(pick(out, spans), ref))
        notes += why
    compared = peer_out is not None  # tensor / row: ckjit against torch, every element
    peer_worst, peer_bad = agree(D, peer_out) if compared else (0.0, 0)
    peer_out = ref = None
    if peer_fn:
        sides['torch'] = peer_fn
    sides['ckjit cluster 2'] = in_clusters(ck)
    check_vs = (f'f32 matmul of the dequantized inputs on the first and last {REF_ROWS} rows'
                + (', and torch._scaled_mm every element' if compared else '') +
                f'; |diff| <= {RTOL} * max |ref| of the row')
    check = 'ok' if not (ref_bad or peer_bad) else (
        f'failed: vs f32 reference {ref_bad} elements out (worst {ref_worst:.3g} of the row '
        f'max); vs torch._scaled_mm {peer_bad} out (worst {peer_worst:.3g})')
    details = {'shape': case.shape, 'm': m, 'n': n, 'k': k, 'scaling': case.scaling,
               'dtypes': 'A, B float8_e4m3fn; D bfloat16; scales float32',
               'torch_version': torch.__version__, 'torch_cuda': torch.version.cuda,
               'use_fast_accum': False, 'first_call_ms': first_ms, 'check_vs': check_vs,
               'ref_max_rel_diff': ref_worst, 'peer_max_rel_diff': peer_worst if compared else None,
               'l2_flush': bool(ctx.flush_bytes), 'flush_bytes': ctx.flush_bytes,
               'rounds': ctx.rounds, 'calls_per_round': ctx.calls}
    base = {'kind': 'gemm_fp8', 'impl': 'ckjit', 'unit': 'TFLOP/s', 'flops': case.flops,
            'card': torch.cuda.get_device_name(), 'check': check}
    if check != 'ok':
        return fail_records(case, 'CHECK_FAILED', check, dict(base, details=details, note=(
            '; '.join(notes) or None)))
    res = ctx.time_sides(sides)
    ck_ms, ck_min = res['ckjit']
    details.update(ckjit_ms=ck_ms, ckjit_min_ms=ck_min, ckjit_cluster2_ms=res['ckjit cluster 2'][0])
    log(f'{case.base}: ckjit as planned {ck_ms:.4f} ms, in clusters of two (CKJIT_GEMM_FP8_CLUSTER=2) '
        f"{res['ckjit cluster 2'][0]:.4f} ms")
    peers = {'torch': (f'{PEER_NAME}, row-wise scales' if case.scaling == 'block' else
                       PEER_NAME, form)}
    metrics = list(case.metrics)
    if 'torch blockwise' in sides:  # an extra record: the like-for-like peer, where it exists
        peers['torch blockwise'] = ('torch scaled_mm, 1x128 / 128x128 block scales', bform)
        metrics.append(case.base + ' vs scaled_mm blockwise')
    for metric in metrics:
        side = ('torch blockwise' if metric.endswith('blockwise vs scaled_mm blockwise') else
                None if metric == case.base else 'torch')
        text, rt, tt = case.target(metric)
        rec = dict(base, metric=metric, value=case.flops / ck_ms / 1e9, details=dict(details),
                   target=text, target_ratio=rt, target_tflops=tt)
        if side and side in res:
            p_ms, p_min = res[side]
            rec.update(peer_value=case.flops / p_ms / 1e9, peer_name=peers[side][0])
            rec['details'].update(peer_ms=p_ms, peer_min_ms=p_min, peer_form=peers[side][1],
                                  peer_kernels=kernel_names(sides[side]))
        elif side:
            rec['peer_name'] = f'{PEER_NAME} (refused the case)'
        ratio = rec['value'] / rec['peer_value'] if rec.get('peer_value') else None
        met = [ratio >= rt if ratio else None] if rt else []
        met += [rec['value'] >= tt] if tt else []
        rec['target_met'] = None if not met or None in met else all(met)
        unsteady = [s for s, (med, mn) in res.items() if med > UNSTEADY * mn]
        note_txt = '; '.join(notes + ([f'timing unsteady (median > {UNSTEADY} x min): '
                                       f'{", ".join(unsteady)}'] if unsteady else []))
        rec['note'] = note_txt or None
        log(f"{metric}: ckjit {ck_ms:.4f} ms = {rec['value']:.1f} TFLOP/s" + (
            f", peer {rec['details']['peer_ms']:.4f} ms = {rec['peer_value']:.1f} TFLOP/s"
            if rec.get('peer_value') else ''))
        emit(rec)


# ---- the parent ------------------------------------------------------------------------------
def parse_args():
    return parse_library_args(__doc__, '"rowwise", "8192", "block"', 'gemm_fp8.h')


def main():
    a = parse_args()
    if a.child:
        return run_child(a, [int(i) for i in a.child.split(',')], Ctx, CASES, run_case,
                         fail_records, REPORT)
    status = layout_gate(a, layout_check(STRUCTS, ['ckjit/ckjit.h', 'ckjit/gemm_fp8.h'],
                                         'fp8'), 'gemm_fp8.h', REPORT)
    if status is not None:
        return status
    return run_parent(a, __file__, CASES, 'CKJIT_FP8_JSON', fail_records, REPORT)


if __name__ == '__main__':
    sys.exit(main())
