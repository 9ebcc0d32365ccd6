#!/usr/bin/env python3
"""bf16 GEMM: ckjit_gemm against torch.matmul (cuBLAS) on the same GPU, stream and inputs,
and ckjit's cluster shapes (CKJIT_GEMM_CLUSTER) against each other in the same rounds.

usage: gemm_torch.py [--lib PATH] [--json FILE] [--quick] [--only SUBSTRING]...
                     [--budget S] [--no-flush-l2] [--check-layout]
The library: --lib, else CKJIT_LIBRARY (the .so or a directory holding it), else
build-gpu/libckjit.so, else what the python package (python/ckjit) loads.  ckjit runs
through ctypes over torch tensors (.data_ptr(), torch's current stream).  Operands: A
[m, k] and B [k, n] bfloat16, both row-major (random normal values), D [m, n] bf16, f32
accumulation, alpha 1, beta 0: ckjit_gemm (orders "rr") and torch.matmul(A, B, out=D_torch)
(into a preallocated output: no allocation in the timed call) read the same bytes.
Records (JSON lines on stdout and in --json, kind "gemm_ctypes", for bench/make_results.py):
  gemm bf16 MxNxK rr vs cublas (ctypes)              (ckjit as planned vs torch.matmul)
  gemm bf16 MxNxK rr cluster 2x1 vs 1x1 (ctypes)     (CKJIT_GEMM_CLUSTER=2x1 vs =1x1)
  gemm bf16 MxNxK rr cluster 1x2 vs 1x1 (ctypes)     (CKJIT_GEMM_CLUSTER=1x2 vs =1x1)
value = ckjit TFLOP/s (2*m*n*k / median time), peer_value = the peer's.  The cluster
variants are read by the library on every ckjit_gemm call: unset = the policy's choice
(the "ckjit" side; the parent unsets a CKJIT_GEMM_CLUSTER of its environment), "1x1" =
no clusters, "2x1" = pairs of blocks along M sharing B's tile by multicast, "1x2" = along
N sharing A's; their medians are also in details.ckjit_cluster_{1x1,2x1,1x2}_ms of the
"vs cublas" record.  A variant the library refuses (an error status) is noted and left
out, the rest still measured.  Targets: >= 1.0x cuBLAS on every shape, >= 1.05x at 4096^3
and 8192^3; the cluster records have none.  Every case is checked before it is timed
(against torch.matmul every element and an f32 matmul on the first and last 256 rows;
each cluster variant bit-identical to the planned call); one that fails posts no number
("check": "failed: ...").  Timing: rounds alternating the sides (the order rotating), each
call between its own CUDA events after a max(2 x L2, 256 MiB) buffer is overwritten
(--no-flush-l2: events around a loop of calls), a ~0.5 ms GPU sleep opening each loop;
medians.  Cases run in child processes (a crash or hang costs only its case;
torch_bench_common).  Exit status 0 when every case was measured or
CKJIT_ERROR_UNSUPPORTED, 2 when a check failed, else 1 (also: no CUDA device, no
library, a ctypes layout mismatch).
"""
import ctypes
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ is not a package
from torch_bench_common import (  # noqa: E402  (the shared ctypes, child runner, checks)
    BF16, GEMM_DESC_LAYOUT, UNSTEADY, BenchContext, CkjitFailed, FileReporter, GemmDesc, capture,
    first_call_ms, import_cuda_torch, layout_check, layout_gate, parse_library_args, run_child,
    run_parent, with_env)

ROW_MAJOR = 0                   # ckjit_order
CLUSTER_ENV = 'CKJIT_GEMM_CLUSTER'
CLUSTERS = ('1x1', '2x1', '1x2')  # the forced variants ('1x1': no clusters, the baseline)
# A bf16 element agrees when |ckjit - ref| <= RTOL * max |ref| over its row.  ckjit and
# cuBLAS both form exact products of the bf16 inputs and sum them in f32 (in different
# orders and, for split-K, different partial sums), which differ by a few f32 roundings,
# far below bf16's; after rounding to bf16 (8 bits: 2^-8 = 0.4% of |value| <= the row's
# max) they differ by at most ~1 ulp.  2e-2 is 5 ulps of the row's largest value: no
# rounding difference reaches it, while a misplaced tile does, and so does a dropped K
# block of 64 (an error of sqrt(64 / K) of the sum's spread in each element, the row's max
# ~4 spreads: at K = 8192 a third of the elements are out).
RTOL = 2e-2
REF_ROWS = 256                  # rows of the f32 reference: the first and the last REF_ROWS
PEER_NAME = 'torch.matmul (cuBLAS)'
CLUSTER_PEER = 'ckjit without clusters'
FAST_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192))  # target >= 1.05x there
torch = F = None                # imported by the child


REPORT = FileReporter('gemm_torch.py', 'gemm_ctypes', 'CKJIT_GEMM_JSON')
log, emit, note = REPORT.log, REPORT.emit, REPORT.note


# ---- ctypes mirror of include/ckjit/gemm.h (GemmDesc: torch_bench_common) ---------------
STRUCTS = {'ckjit_gemm_desc': GEMM_DESC_LAYOUT}


# ---- cases ---------------------------------------------------------------------------------
class Case:
    def __init__(self, m, n, k):
        self.m, self.n, self.k = m, n, k
        self.shape, self.flops = f'{m}x{n}x{k}', 2 * m * n * k
        self.base = f'gemm bf16 {self.shape} rr'
        self.main = self.base + ' vs cublas (ctypes)'
        self.cluster_metrics = {v: f'{self.base} cluster {v} vs 1x1 (ctypes)'
                                for v in CLUSTERS[1:]}
        # The metrics it writes (--only matches any; a failure writes each with no value).
        self.metrics = [self.main] + list(self.cluster_metrics.values())

    def target(self, metric):
        """(text, ratio target) of the issue for this metric."""
        if metric != self.main:
            return None, None
        if (self.m, self.n, self.k) in FAST_SHAPES:
            return f'>= 1.05x {PEER_NAME}', 1.05
        return f'>= 1.0x {PEER_NAME}', 1.0


CASES = [Case(m, n, k) for (m, n, k) in (
    (4096, 4096, 4096), (8192, 8192, 8192), (1024, 1024, 1024), (16, 8192, 8192),
    (128, 4096, 4096), (8192, 8192, 1024))]


def fail_records(case, status, error, extra=None):
    log(f'{case.base}: {status}: {error}')
    for metric in case.metrics:
        text, rt = case.target(metric)
        emit(dict(extra or {}, metric=metric, kind='gemm_ctypes', impl='ckjit', unit='TFLOP/s',
                  value=None, status=status, error=error[:600], target=text, target_ratio=rt,
                  target_met=None))


# ---- the child -------------------------------------------------------------------------------
class Ctx(BenchContext):
    def __init__(self, a):
        global torch, F
        torch, F = import_cuda_torch()
        os.environ.pop(CLUSTER_ENV, None)  # the 'ckjit' side: the policy's choice
        super().__init__(a, (('ckjit_gemm', GemmDesc),))
        self.spin = getattr(torch.cuda, '_sleep', None)
        self.rounds, self.calls = (5, 5) if a.quick else (20, 10)


def spans_of(m):
    """[(start, stop)]: the first and the last REF_ROWS rows."""
    r = min(REF_ROWS, m)
    return [(0, r)] + ([(max(r, m - REF_ROWS), m)] if m > r else [])


def pick(t, spans):
    """Those rows of t, as float32."""
    return torch.cat([t[a:b].float() for a, b in spans])


def agree(got, ref):
    """(largest |diff| / max |ref| of its row, elements out of RTOL of their row's max;
    NaN and inf count as out).  Row blocks at a time: a whole 8192^2 D in f32
    temporaries would take GiBs."""
    worst, bad = 0.0, 0
    for i in range(0, got.shape[0], 1024):
        g, r = got[i:i + 1024].float(), ref[i:i + 1024].float()
        row_max = r.abs().amax(dim=1, keepdim=True).clamp_min(1e-30)
        rel = (g - r).abs() / row_max
        bad += int((~(rel <= RTOL)).sum())
        worst = max(worst, float(rel.nan_to_num(math.inf).max()) if rel.numel() else 0.0)
    return worst, bad


def make_desc(ctx, case, A, B, D):
    d = GemmDesc()
    ctx.lib.ckjit_gemm_desc_init(ctypes.byref(d))  # alpha 1, batch 1, bf16, row-major
    d.m, d.n, d.k = case.m, case.n, case.k
    d.ab_dtype = d.out_dtype = BF16
    d.a_order = d.b_order = ROW_MAJOR
    d.a, d.lda, d.b, d.ldb = A.data_ptr(), A.stride(0), B.data_ptr(), B.stride(0)
    d.d, d.ldd, d.alpha, d.beta = D.data_ptr(), D.stride(0), 1.0, 0.0
    return d


def in_cluster(call, value):
    """call with CKJIT_GEMM_CLUSTER=value (read by each ckjit_gemm call)."""
    return with_env(CLUSTER_ENV, value, call)


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


def cluster_variants(ctx, case, A, B, D):
    """({variant: its timed callable (into D)}, [bit-identity failures], [notes]): each
    forced cluster shape run once into its own output and compared with the planned
    call's D bit for bit; one the library refuses is noted and left out."""
    sides, bad, notes = {}, [], []
    for v in CLUSTERS:
        out = torch.full_like(D, math.nan)
        try:
            first_ms = first_call_ms(in_cluster(ctx.call(
                ctx.lib.ckjit_gemm, make_desc(ctx, case, A, B, out)), v))
        except CkjitFailed as e:
            notes.append(f'{CLUSTER_ENV}={v}: {e.args[0]}: {" ".join(e.args[1].split())[:200]}'
                         ': not timed')
            continue
        if not torch.equal(out, D):
            diff = int((out != D).sum())  # NaN counts, as in torch.equal
            bad.append(f'cluster {v} ({CLUSTER_ENV}={v}) differs from the planned call in '
                       f'{diff} elements')
            continue
        sides[v] = in_cluster(ctx.call(ctx.lib.ckjit_gemm, make_desc(ctx, case, A, B, D)), v)
        log(f'{case.base}: cluster {v}: first call {first_ms:.1f} ms, bit-identical')
    return sides, bad, notes


def bf16_reduced_reduction():
    """torch's allow_bf16_reduced_precision_reduction (cuBLAS may then reduce split-K
    partials in bf16; left as torch has it, the default users get); None where this torch
    has no such setting (older torch raises AssertionError, not AttributeError)."""
    try:
        return bool(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)
    except Exception:  # noqa: BLE001
        return None


def tflops(case, ms):
    return case.flops / ms / 1e9 if ms else None


def run_case(ctx, case):
    ctx.gen.manual_seed(9000 + CASES.index(case))
    m, n, k = case.m, case.n, case.k
    A = torch.randn(m, k, device='cuda', generator=ctx.gen).to(torch.bfloat16)
    B = torch.randn(k, n, device='cuda', generator=ctx.gen).to(torch.bfloat16)
    D = torch.full((m, n), math.nan, device='cuda', dtype=torch.bfloat16)
    ck = ctx.call(ctx.lib.ckjit_gemm, make_desc(ctx, case, A, B, D))
    try:
        first_ms = first_call_ms(ck)
    except CkjitFailed as e:
        return fail_records(case, *e.args)
    spans = spans_of(m)
    ref = pick(A, spans) @ B.float()  # f32, TF32 off (Ctx)
    ref_worst, ref_bad = agree(torch.cat([D[a:b] for a, b in spans]), ref)
    ref = None
    D_torch = torch.empty(m, n, device='cuda', dtype=torch.bfloat16)
    peer = lambda: torch.matmul(A, B, out=D_torch)  # noqa: E731
    peer_out, why = capture(peer)
    notes = [f'{PEER_NAME} refused the case: {why}'] if peer_out is None else []
    peer_worst, peer_bad = agree(D, D_torch) if peer_out is not None else (0.0, 0)
    variants, mismatched, vnotes = cluster_variants(ctx, case, A, B, D)
    notes += vnotes
    sides = {'ckjit': ck}
    if peer_out is not None:
        sides['torch'] = peer
    sides.update((f'ckjit {v}', fn) for v, fn in variants.items())
    check_vs = (f'f32 matmul (TF32 off) on the first and last {REF_ROWS} rows' +
                (f' and {PEER_NAME} every element' if peer_out is not None else '') +
                f', |diff| <= {RTOL} * max |ref| of the row; the cluster variants '
                f'({CLUSTER_ENV}={", ".join(CLUSTERS)}) bit-identical to the planned call')
    problems = mismatched + ([f'vs f32 reference {ref_bad} elements out (worst '
                              f'{ref_worst:.3g} of the row max)'] if ref_bad else []) + (
        [f'vs {PEER_NAME} {peer_bad} elements out (worst {peer_worst:.3g})'] if peer_bad else [])
    check = 'ok' if not problems else 'failed: ' + '; '.join(problems)
    details = {'shape': case.shape, 'm': m, 'n': n, 'k': k, 'orders': 'rr',
               'dtypes': 'A, B, D bfloat16; f32 accumulation', 'torch_version': torch.__version__,
               'torch_cuda': torch.version.cuda,
               'torch_bf16_reduced_precision_reduction': bf16_reduced_reduction(),
               'first_call_ms': first_ms, 'check_vs': check_vs, 'ref_max_rel_diff': ref_worst,
               'peer_max_rel_diff': peer_worst if peer_out is not None else None,
               'l2_flush': bool(ctx.flush_bytes), 'flush_bytes': ctx.flush_bytes,
               'rounds': ctx.rounds, 'calls_per_round': ctx.calls}
    base = {'kind': 'gemm_ctypes', 'impl': 'ckjit', 'unit': 'TFLOP/s', 'flops': case.flops,
            'card': torch.cuda.get_device_name(), 'check': check}
    peer_out = None
    if check != 'ok':
        return fail_records(case, 'CHECK_FAILED', check, dict(base, details=details, note=(
            '; '.join(notes) or None)))
    res = ctx.time_sides(sides)
    ck_ms, ck_min = res['ckjit']
    cl = {v: res.get(f'ckjit {v}', (None, None)) for v in CLUSTERS}  # (median, min)
    cl_ms = {v: med for v, (med, _) in cl.items()}
    details.update(ckjit_ms=ck_ms, ckjit_min_ms=ck_min, **{
        f'ckjit_cluster_{v}_ms': ms for v, ms in cl_ms.items()})
    log(f'{case.base}: ckjit as planned {ck_ms:.4f} ms, ' + ', '.join(
        f'{CLUSTER_ENV}={v} ' + (f'{ms:.4f} ms' if ms else 'not run') for v, ms in cl_ms.items())
        + (f", torch {res['torch'][0]:.4f} ms" if 'torch' in res else ''))
    unsteady = [s for s, (med, mn) in res.items() if med > UNSTEADY * mn]
    if unsteady:
        notes.append(f'timing unsteady (median > {UNSTEADY} x min): {", ".join(unsteady)}')
    note_txt = '; '.join(notes) or None

    rec = dict(base, metric=case.main, value=tflops(case, ck_ms), details=details,
               note=note_txt)
    text, rt = case.target(case.main)
    if 'torch' in res:
        p_ms, p_min = res['torch']
        rec.update(peer_value=tflops(case, p_ms), peer_name=PEER_NAME)
        rec['details'] = dict(details, peer_ms=p_ms, peer_min_ms=p_min,
                              peer_form='torch.matmul(A, B, out=D_torch)',
                              peer_kernels=kernel_names(peer))
    else:
        rec['peer_name'] = f'{PEER_NAME} (refused the case)'
    ratio = rec['value'] / rec['peer_value'] if rec.get('peer_value') else None
    rec.update(target=text, target_ratio=rt, target_met=ratio >= rt if ratio else None)
    log(f"{case.main}: ckjit {ck_ms:.4f} ms = {rec['value']:.1f} TFLOP/s" + (
        f", peer {rec['details']['peer_ms']:.4f} ms = {rec['peer_value']:.1f} TFLOP/s, "
        f'ratio {ratio:.3f}' if ratio else ''))
    emit(rec)

    for v, metric in case.cluster_metrics.items():  # no target: what the clusters buy
        # value None where the library refused the variant (the note says why); details:
        # ckjit_ms / peer_ms are this record's sides (the variant, 1x1), planned_ms the
        # policy's choice
        rec = dict(base, metric=metric, value=tflops(case, cl_ms[v]), details=dict(
            details, cluster=v, planned_ms=ck_ms, planned_min_ms=ck_min, ckjit_ms=cl[v][0],
            ckjit_min_ms=cl[v][1], peer_ms=cl['1x1'][0], peer_min_ms=cl['1x1'][1]),
            target=None, target_ratio=None, target_met=None, note=note_txt)
        if cl_ms['1x1']:
            rec.update(peer_value=tflops(case, cl_ms['1x1']), peer_name=CLUSTER_PEER)
        else:
            rec['peer_name'] = f'{CLUSTER_PEER} ({CLUSTER_ENV}=1x1 not run)'
        log(f'{metric}: ' + ', '.join(f'{x} {cl_ms[x]:.4f} ms' if cl_ms[x] else f'{x} not run'
                                      for x in (v, '1x1')))
        emit(rec)


# ---- the parent ------------------------------------------------------------------------------
def parse_args():
    return parse_library_args(__doc__, '"8192x8192x8192", "16x8192", "1024x1024"', 'gemm.h')


def main():
    a = parse_args()
    if a.child:
        return run_child(a, [int(i) for i in a.child.split(',')], Ctx, CASES, run_case,
                         fail_records, REPORT)
    status = layout_gate(a, layout_check(STRUCTS, ['ckjit/ckjit.h', 'ckjit/gemm.h'], 'gemm'),
                         'gemm.h', REPORT)
    if status is not None:
        return status
    def unset_cluster():  # the children inherit the environment
        if os.environ.get(CLUSTER_ENV) is not None:
            log(f'{CLUSTER_ENV}={os.environ.pop(CLUSTER_ENV)} in the environment: unset (the '
                '"ckjit" side is the policy\'s choice; the variants set it per call)')
    return run_parent(a, __file__, CASES, 'CKJIT_GEMM_JSON', fail_records, REPORT, unset_cluster)


if __name__ == '__main__':
    sys.exit(main())
