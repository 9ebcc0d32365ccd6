#!/usr/bin/env python3
"""Peer measurements for bench/results.json, on the same GPU as bench_ckjit.

usage: peers.py [--quick] [--only torch|rows|gemm|cupy|triton]... [--op OP]... [--shape RxC]...
                [--gemm-case SUBSTRING]... [--no-flush-l2]

Prints one JSON object per line (JSONL) on stdout, like bench_ckjit: each has
"metric", "unit", "value", "kind", "impl" and details.  Diagnostics go to
stderr.  Peers that cannot be imported are skipped with a "note" record.

  torch   bandwidth (GB/s, bytes read + written, median of CUDA-event timed
          runs): clone, add, relu, gelu(approximate='tanh') on bf16
          8192x8192; .t().contiguous() on bf16 and f32 8192x8192.
  rows    the torch peers of bench/bench_rows.c (kind "rows", same cases,
          same bytes: rows_bytes() below mirrors the C one), timed the same
          way: torch.clone at every shape (the "copy" reference),
          torch.softmax(x, -1), F.layer_norm(x, (n,), w, b), F.rms_norm(x,
          (n,), w) (else the manual x * rsqrt(mean(x^2) + eps) * w),
          x.sum(-1) on bf16; the unfused sequences for rmsnorm_quant (h = x +
          r; y = rms_norm(h) * w; s = amax|y| / 127; q = round(y / s) int8)
          and smoothquant (y = x * smooth; same quant); topk_softmax as
          torch.topk(torch.softmax(x.float(), -1), k) and the renormalizing
          division (time in us).  --op / --shape select cases (as bench_rows).
  gemm    the peers of bench/bench_gemm.c (kind "gemm", TFLOP/s = the same
          2*m*n*k*batch as bench_gemm / median ms), timed as bench_gemm times
          ckjit: 10 warm-up calls (--quick 3), 50 runs (--quick 20), each one
          call between two CUDA events, synchronized, and before each run a
          max(2 x L2, 256 MiB) buffer overwritten on the same stream (cold L2;
          --no-flush-l2: no flush, as bench_gemm --no-flush-l2); a series
          whose median is over 1.25 x its min is measured once more and the
          lower median kept ("remeasured", as bench_gemm).  torch.matmul
          (cuBLAS) for the rr/rc/cr/cc cases (a column-major operand is a
          .t() view of a transposed tensor), the unfused torch.matmul, + bias,
          F.gelu(approximate='tanh') for bias_gelu, torch.bmm for the batched
          case, a Python loop of torch.matmul for the grouped one; f32 with
          cuBLAS tf32 off, tf32 with it on (set_matmul_tf32()).  cupy.matmul
          for bf16 4096x4096x4096 rr when CuPy has bfloat16 (else a note).
          --gemm-case selects cases like bench_gemm's --only.  Each record has
          "rel_err_vs_f64" (4 rows against an f64 matmul: tf32 shows ~1e-3).
          Also (kind "launch_gemm") the host time of torch.matmul(a, b, out=d)
          on bf16 128x128x128 and 16x128x128, the shapes of bench_ckjit's
          ckjit_gemm launch loop.
  cupy    RawKernel launch host time of a trivial copy kernel (f32 1024,
          per-call us); first call in a fresh process with the kernel in
          CuPy's disk cache (ms, after the context exists).
  triton  @triton.jit launch host time of a trivial copy kernel (per-call
          us); first call in a fresh process with the kernel in Triton's
          disk cache (ms, after the context exists).

Launch loops mirror bench_ckjit: N calls in chunks of 1000, the device
synchronized between chunks outside the timed loops; median of the repeats.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

N_ELEMS = 1024
CHUNK = 1000

COPY_SRC = r'''
extern "C" __global__ void peer_copy(const float* __restrict__ src,
                                     float* __restrict__ dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}
'''


def log(msg):
    print(f'peers.py: {msg}', file=sys.stderr, flush=True)


def emit(rec):
    print(json.dumps(rec), flush=True)


def note(section, text):
    log(f'note ({section}): {text}')
    emit({'metric': f'note {section}', 'unit': None, 'value': None, 'kind': 'note',
          'impl': section, 'note': text})


def median_min(values):
    return statistics.median(values), min(values)


def timing_plan(quick):
    """Warm-up calls and timed runs: bench_ckjit's and bench_rows' numbers."""
    return (2, 10) if quick else (5, 50)


def timed(fn, warmup, runs):
    """Median and min ms of `runs` calls of fn, each between two CUDA events
    on the current stream and synchronized (as bench_ckjit / bench_rows)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(runs):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
    return median_min(ms)


_TORCH_DEVICE_EMITTED = False


def emit_torch_device():
    global _TORCH_DEVICE_EMITTED
    import torch

    if _TORCH_DEVICE_EMITTED:
        return
    _TORCH_DEVICE_EMITTED = True
    emit({'metric': 'device', 'unit': None, 'value': None, 'kind': 'info', 'impl': 'torch',
          'name': torch.cuda.get_device_name(0),
          'capability': '%d.%d' % torch.cuda.get_device_capability(0),
          'torch_version': torch.__version__, 'torch_cuda': torch.version.cuda})


def rand_tensor(shape, dtype, gen):
    """Uniform in [-4, 4) with |x| >= 1/16: random and never zero (as the C
    benches)."""
    import torch

    x = torch.rand(*shape, device='cuda', generator=gen, dtype=torch.float32) * 8 - 4
    x = torch.where(x.abs() < 0.0625, x + torch.sign(x) * 0.5 + (x == 0) * 0.5, x)
    return x.to(dtype)


# ---- torch ------------------------------------------------------------------
def torch_bandwidth(quick):
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        note('torch', 'torch.cuda.is_available() is False: no torch measurements')
        return
    dev = torch.device('cuda')
    emit_torch_device()
    warmup, runs = timing_plan(quick)
    rows = cols = 8192
    shape = f'{rows}x{cols}'
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234)

    def rand(dtype):
        return rand_tensor((rows, cols), dtype, gen)

    x = rand(torch.bfloat16)
    y = rand(torch.bfloat16)
    xf = rand(torch.float32)

    cases = [
        ('copy', 'torch.clone', torch.bfloat16, lambda: x.clone(), 2),
        ('relu', 'torch.nn.functional.relu', torch.bfloat16, lambda: F.relu(x), 2),
        ('gelu_tanh', "torch.nn.functional.gelu(approximate='tanh')", torch.bfloat16,
         lambda: F.gelu(x, approximate='tanh'), 2),
        ('add', 'torch.add', torch.bfloat16, lambda: torch.add(x, y), 3),
        ('transpose', '.t().contiguous()', torch.bfloat16, lambda: x.t().contiguous(), 2),
        ('transpose', '.t().contiguous()', torch.float32, lambda: xf.t().contiguous(), 2),
    ]
    names = {torch.bfloat16: 'bf16', torch.float32: 'f32'}
    for op, api, dtype, fn, tensors in cases:
        dname = names[dtype]
        elem = torch.tensor([], dtype=dtype).element_size()
        med, mn = timed(fn, warmup, runs)
        nbytes = rows * cols * elem * tensors
        emit({'metric': f'bandwidth {op} {dname} {shape} (torch)', 'unit': 'GB/s',
              'value': nbytes / (med * 1e-3) / 1e9, 'kind': 'bandwidth', 'impl': 'torch',
              'op': op, 'api': api, 'dtype': dname, 'shape': shape, 'median_ms': med,
              'min_ms': mn, 'bytes': nbytes, 'runs': runs})
    del x, y, xf
    torch.cuda.empty_cache()


# ---- rows: the torch peers of bench/bench_rows.c ------------------------------
# The cases of bench_rows.c (keep in sync: ROW_SHAPES, QUANT_SHAPES, TOPK_*).
ROW_OPS = ('softmax', 'layernorm', 'rmsnorm', 'sum')
ROW_SHAPES = ((8192, 8192), (4096, 16384), (32768, 1024), (16, 65536), (64, 1048576),
              (1, 16777216))
QUANT_OPS = ('rmsnorm_quant', 'smoothquant')
QUANT_SHAPES = ((8192, 8192), (4096, 16384))
TOPK_TOKENS = 32768
TOPK_EXPERTS = (64, 128, 256)
TOPK_KS = (2, 8)
ALL_ROW_OPS = ROW_OPS + QUANT_OPS + ('topk_softmax',)
NORM_EPS = 1e-5


def rows_bytes(op, rows, cols, k=0, e=2):
    """Bytes read + written: a term-by-term mirror of rows_bytes() in
    bench/bench_rows.c, the one definition (see the comment there);
    make_results.py refuses a comparison whose two "bytes" differ.  'copy'
    (torch.clone) is the reference: 2*R*C*e."""
    R, C = rows, cols
    return {
        'copy': 2 * R * C * e,
        'softmax': 2 * R * C * e,
        'layernorm': 2 * R * C * e + 2 * C * e,
        'rmsnorm': 2 * R * C * e + C * e,
        'sum': R * C * e + R * e,
        'rmsnorm_quant': 3 * R * C * e + R * C + C * e + 4 * R,
        'smoothquant': R * C * e + R * C + 4 * C + 4 * R,
        'topk_softmax': R * C * e + 8 * R * k,
    }[op]


def row_cases(ops, shapes):
    """(op, rows, cols, k) in bench_rows' order, filtered like its --only and
    --shape."""
    cases = []
    for op in ROW_OPS:
        cases += [(op, r, c, 0) for r, c in ROW_SHAPES]
    for op in QUANT_OPS:
        cases += [(op, r, c, 0) for r, c in QUANT_SHAPES]
    for e in TOPK_EXPERTS:
        cases += [('topk_softmax', TOPK_TOKENS, e, k) for k in TOPK_KS]
    return [c for c in cases if (not ops or c[0] in ops)
            and (not shapes or f'{c[1]}x{c[2]}' in shapes)]


def torch_rows(quick, ops, shapes):
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        note('rows', 'torch.cuda.is_available() is False: no torch row-wise measurements')
        return
    emit_torch_device()
    warmup, runs = timing_plan(quick)
    gen = torch.Generator(device='cuda')
    gen.manual_seed(4321)
    bf16 = torch.bfloat16
    have_rms = hasattr(F, 'rms_norm')
    rms_api = ('F.rms_norm(x, (n,), w, eps)' if have_rms
               else 'x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w')

    def rms_norm(h, w, n):
        if have_rms:
            return F.rms_norm(h, (n,), w, eps=NORM_EPS)
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + NORM_EPS) * w

    def quant(y):
        s = y.abs().amax(-1, keepdim=True) / 127
        return torch.round(y / s).clamp(-127, 127).to(torch.int8), s

    def record(op, rows, cols, k, api, fn):
        shape = f'{rows}x{cols}'
        metric = f'rows {op} bf16 {shape}' + (f' k{k}' if op == 'topk_softmax' else '') \
            + ' (torch)'
        unit = 'us' if op == 'topk_softmax' else 'GB/s'
        rec = {'metric': metric, 'unit': unit, 'value': None, 'kind': 'rows', 'impl': 'torch',
               'op': op, 'api': api, 'dtype': 'bf16', 'shape': shape}
        if op == 'topk_softmax':
            rec['k'] = k
        try:
            med, mn = timed(fn, warmup, runs)
        except Exception as e:  # an op torch lacks, out of memory: keep going
            rec.update(status='TORCH_ERROR', error=f'{type(e).__name__}: {e}'[:500])
            log(f'{metric}: {rec["error"]}')
            emit(rec)
            return
        nbytes = rows_bytes(op, rows, cols, k)
        gbps = nbytes / (med * 1e-3) / 1e9
        rec.update(value=med * 1e3 if op == 'topk_softmax' else gbps, median_ms=med, min_ms=mn,
                   bytes=nbytes, warmup=warmup, runs=runs)
        if op == 'topk_softmax':
            rec['gbps'] = gbps
        emit(rec)

    cases = row_cases(ops, shapes)
    done_shapes = []
    for op0, rows, cols, _ in cases:  # one pass per shape, in case order
        if (rows, cols) in done_shapes:
            continue
        done_shapes.append((rows, cols))
        here = [c for c in cases if (c[1], c[2]) == (rows, cols)]
        n = cols
        x = rand_tensor((rows, cols), bf16, gen)
        if any(c[0] != 'topk_softmax' for c in here):
            # The same run's copy bandwidth at this shape: the "vs copy" reference.
            record('copy', rows, cols, 0, 'torch.clone', lambda: x.clone())
        for op, _, _, k in here:
            if op == 'softmax':
                record(op, rows, cols, k, 'torch.softmax(x, -1)', lambda: torch.softmax(x, -1))
            elif op == 'layernorm':
                w = 1 + rand_tensor((n,), torch.float32, gen).mul_(0.125)
                b = rand_tensor((n,), torch.float32, gen).mul_(0.125)
                w, b = w.to(bf16), b.to(bf16)
                record(op, rows, cols, k, 'F.layer_norm(x, (n,), w, b, eps)',
                       lambda: F.layer_norm(x, (n,), w, b, eps=NORM_EPS))
            elif op == 'rmsnorm':
                w = (1 + rand_tensor((n,), torch.float32, gen).mul_(0.125)).to(bf16)
                record(op, rows, cols, k, rms_api, lambda: rms_norm(x, w, n))
            elif op == 'sum':
                record(op, rows, cols, k, 'x.sum(-1) (bf16 out)', lambda: x.sum(-1))
            elif op == 'rmsnorm_quant':
                r = rand_tensor((rows, cols), bf16, gen)
                w = (1 + rand_tensor((n,), torch.float32, gen).mul_(0.125)).to(bf16)

                def fused_add_rmsnorm_quant():
                    h = x + r
                    q, s = quant(rms_norm(h, w, n))
                    return h, q, s

                record(op, rows, cols, k,
                       f'h = x + r; y = {rms_api.replace("x", "h")}; s = amax|y| / 127; '
                       'q = round(y / s).clamp(-127, 127).to(int8)', fused_add_rmsnorm_quant)
                del r
            elif op == 'smoothquant':
                smooth = 1 + rand_tensor((n,), torch.float32, gen).mul_(0.125)
                record(op, rows, cols, k,
                       'y = x * smooth (f32); s = amax|y| / 127; '
                       'q = round(y / s).clamp(-127, 127).to(int8)', lambda: quant(x * smooth))
            elif op == 'topk_softmax':
                def topk(k=k):
                    w, i = torch.topk(torch.softmax(x.float(), -1), k)
                    return w / w.sum(-1, keepdim=True), i

                record(op, rows, cols, k, 'torch.topk(torch.softmax(x.float(), -1), k) '
                       '/ sum (i64 indices)', topk)
        del x
        torch.cuda.empty_cache()


# ---- gemm: the torch (cuBLAS) peers of bench/bench_gemm.c ------------------------
# The cases of bench_gemm.c (keep in sync: build_cases(), GROUPED, BATCH).
GEMM_SQUARE = ((4096, 4096, 4096), (8192, 8192, 8192), (1024, 1024, 1024), (8192, 8192, 1024))
GEMM_DECODE = ((16, 8192, 8192), (1, 8192, 8192), (128, 4096, 4096))
GEMM_GROUPED = ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 1024, 2048), (1024, 4096, 1024),
                (3072, 3072, 1024), (2048, 1024, 4096), (1024, 2048, 3072), (4096, 4096, 1024))
GEMM_BATCH = 16
GEMM_FLUSH_MIN = 256 << 20


class GemmCase:
    """One case of bench_gemm.c: kind 'plain', 'bias_gelu', 'batched' or
    'grouped'; layout = a_order b_order ('r' row-major, 'c' column-major)."""

    def __init__(self, dtype, kind, m, n, k, batch=1, layout='rr'):
        self.dtype, self.kind, self.m, self.n, self.k = dtype, kind, m, n, k
        self.batch, self.layout = batch, layout

    @property
    def shape(self):
        if self.kind == 'grouped':
            return f'grouped{len(GEMM_GROUPED)}'
        return f'{self.m}x{self.n}x{self.k}'

    @property
    def variant(self):
        return {'bias_gelu': 'bias_gelu', 'batched': f'batch{self.batch}'}.get(self.kind,
                                                                                  self.layout)

    @property
    def metric(self):
        """bench_gemm's metric (the ckjit record) without the " (torch)"."""
        return f'gemm {self.dtype} {self.shape} {self.variant}'

    def problems(self):
        return list(GEMM_GROUPED) if self.kind == 'grouped' else [(self.m, self.n, self.k)]

    def flops(self):
        """2*m*n*k*batch (grouped: summed over the problems), as case_flops()."""
        return sum(2 * m * n * k for m, n, k in self.problems()) * self.batch


def gemm_cases(only):
    """bench_gemm's cases in its order, filtered like its --only (the metric
    contains one of the substrings)."""
    cases = []
    for d in ('bf16', 'f16'):
        cases += [GemmCase(d, 'plain', m, n, k) for m, n, k in GEMM_SQUARE]
    cases += [GemmCase('bf16', 'plain', m, n, k) for m, n, k in GEMM_DECODE]
    cases += [GemmCase('bf16', 'plain', 4096, 4096, 4096, layout=lay) for lay in ('rc', 'cr', 'cc')]
    cases += [GemmCase('bf16', 'bias_gelu', 4096, 4096, 4096)]
    cases += [GemmCase('f32', 'plain', 2048, 2048, 2048), GemmCase('tf32', 'plain', 4096, 4096, 4096)]
    cases += [GemmCase('tf32', 'plain', 4096, 4096, 4096, layout=lay) for lay in ('rc', 'cr', 'cc')]
    cases += [GemmCase('tf32', 'plain', 64, 4096, 4096)]
    cases += [GemmCase('bf16', 'batched', 1024, 1024, 1024, GEMM_BATCH)]
    cases += [GemmCase('bf16', 'grouped', 0, 0, 0)]
    # bench_gemm's Stream-K-forced variants: the same torch call.
    cases += [GemmCase('bf16', 'plain', m, n, k, layout='rr streamk')
              for m, n, k in GEMM_DECODE + ((1024, 1024, 1024),)]
    return [c for c in cases if not only or any(s in c.metric for s in only)]


def gemm_timing_plan(quick):
    """Warm-up calls and timed runs: bench_gemm's numbers."""
    return (3, 20) if quick else (10, 50)


def gemm_flush_bytes(props):
    """max(2 x L2, 256 MiB), as flush_size() in bench_gemm.c."""
    l2 = getattr(props, 'L2_cache_size', 0) or 0
    return max(2 * l2, GEMM_FLUSH_MIN)


UNSTEADY = 1.25  # bench_gemm.c's: a median past 1.25 x the min is measured again


def timed_gemm(fn, warmup, runs, flush, sync, event, elapsed):
    """bench_time_runs() of bench_util.h: median and min ms of `runs` calls of
    fn, each alone between two events on the current stream and synchronized;
    with `flush` (a callable that overwrites a max(2 x L2, 256 MiB) buffer on
    that stream) called before each run and its first event.  As bench_gemm,
    a series whose median is over UNSTEADY x its min was disturbed: it is
    measured once more and the one with the lower median kept.  Returns
    (median, min, remeasured)."""
    for _ in range(warmup):
        fn()
    sync()
    s, e = event(), event()

    def series():
        ms = []
        for i in range(runs):
            if flush is not None:
                flush(i)
            s.record()
            fn()
            e.record()
            e.synchronize()
            ms.append(elapsed(s, e))
        return median_min(ms)
    med, mn = series()
    if med <= UNSTEADY * mn:
        return med, mn, False
    again = series()
    return (again if again[0] < med else (med, mn)) + (True,)


def safe_getattr(obj, name, default=None):
    """getattr that also survives torch.backends.cuda.matmul's __getattr__,
    which raises AssertionError (not AttributeError) for an unknown name in
    older torch."""
    try:
        return getattr(obj, name)
    except Exception:
        return default


def set_matmul_tf32(flag):
    """Lets cuBLAS use tf32 for f32 matmuls (flag) or not.  torch >= 2.9 has
    torch.backends.cuda.matmul.fp32_precision ('tf32' / 'ieee') and raises
    when that and the legacy allow_tf32 are mixed, so the new API is used when
    it exists.  Returns (what was set, a function that restores it)."""
    import torch

    mm = torch.backends.cuda.matmul
    old = safe_getattr(mm, 'fp32_precision')
    if old is not None:
        mm.fp32_precision = 'tf32' if flag else 'ieee'

        def restore():
            try:
                mm.fp32_precision = old
            except Exception:  # 'none' may not be settable: IEEE is the default
                mm.fp32_precision = 'ieee'
        return f"torch.backends.cuda.matmul.fp32_precision = '{mm.fp32_precision}'", restore
    old = mm.allow_tf32
    mm.allow_tf32 = bool(flag)
    return (f'torch.backends.cuda.matmul.allow_tf32 = {bool(flag)}',
            lambda: setattr(mm, 'allow_tf32', old))


def torch_gemm(quick, only, flush_on, with_cupy):
    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        note('gemm', 'torch.cuda.is_available() is False: no torch GEMM measurements')
        return
    emit_torch_device()
    cases = gemm_cases(only)
    warmup, runs = gemm_timing_plan(quick)
    props = torch.cuda.get_device_properties(0)
    flush_bytes = gemm_flush_bytes(props) if flush_on else 0
    flush_buf = torch.empty(flush_bytes // 4, dtype=torch.int32, device='cuda') \
        if flush_on else None
    mm = torch.backends.cuda.matmul
    emit({'metric': 'gemm settings (torch)', 'unit': None, 'value': None, 'kind': 'info',
          'impl': 'torch', 'l2_flush': flush_on, 'flush_bytes': flush_bytes,
          'l2_bytes': getattr(props, 'L2_cache_size', None),
          'allow_bf16_reduced_precision_reduction':
              safe_getattr(mm, 'allow_bf16_reduced_precision_reduction'),
          'allow_fp16_reduced_precision_reduction':
              safe_getattr(mm, 'allow_fp16_reduced_precision_reduction')})
    gen = torch.Generator(device='cuda')
    gen.manual_seed(2468)
    tdtype = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32,
              'tf32': torch.float32}

    def operand(rows, cols, order, dt, batch=1):
        """A rows x cols operand in `order` ('r' / 'c'): a column-major one is
        stored transposed and used through a .t() view (cuBLAS transposes it,
        no copy)."""
        lead = (batch,) if batch > 1 else ()
        if order == 'r':
            return rand_tensor(lead + (rows, cols), dt, gen)
        return rand_tensor(lead + (cols, rows), dt, gen).transpose(-1, -2)

    def record(c, api, fn, check, extra=None):
        rec = {'metric': f'{c.metric} (torch)', 'unit': 'TFLOP/s', 'value': None,
               'kind': 'gemm', 'impl': 'torch', 'op': 'gemm', 'api': api, 'dtype': c.dtype,
               'shape': c.shape, 'variant': c.variant, 'm': c.m, 'n': c.n, 'k': c.k,
               'batch': c.batch, 'a_order': 'row' if c.layout[0] == 'r' else 'col',
               'b_order': 'row' if c.layout[1] == 'r' else 'col', 'flops': c.flops(),
               'l2_flush': flush_on}
        if c.kind == 'grouped':
            rec['problems'] = ','.join(f'{m}x{n}x{k}' for m, n, k in c.problems())
        rec.update(extra or {})
        try:
            med, mn, again = timed_gemm(fn, warmup, runs,
                                 (lambda i: flush_buf.fill_(i)) if flush_on else None,
                                 torch.cuda.synchronize,
                                 lambda: torch.cuda.Event(enable_timing=True),
                                 lambda s, e: s.elapsed_time(e))
            rec['rel_err_vs_f64'] = check()
        except Exception as e:  # out of memory, a missing feature: keep going
            rec.update(status='TORCH_ERROR', error=f'{type(e).__name__}: {e}'[:500])
            log(f'{c.metric}: {rec["error"]}')
            emit(rec)
            return
        rec.update(value=c.flops() / (med * 1e-3) / 1e12, median_ms=med, min_ms=mn,
                   warmup=warmup, runs=runs, flush_bytes=flush_bytes, remeasured=again)
        log(f'{c.metric} (torch): {rec["value"]:.4g} TFLOP/s (median {med:.4f} ms)')
        emit(rec)

    def rel_err(got, want):
        """max |got - want| / max |want| over the checked rows (f64)."""
        return float((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-30))

    def gelu64(v):
        return 0.5 * v * (1 + torch.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))

    for c in cases:
        dt = tdtype[c.dtype]
        restore = None
        try:
            api_tf32 = ''
            if dt == torch.float32:
                api_tf32, restore = set_matmul_tf32(c.dtype == 'tf32')
            if c.kind == 'grouped':
                probs = [(operand(m, k, 'r', dt), operand(k, n, 'r', dt))
                         for m, n, k in c.problems()]

                def fn(probs=probs):
                    return [torch.matmul(a, b) for a, b in probs]

                def check(probs=probs):
                    a, b = probs[0]
                    return rel_err(torch.matmul(a[:4], b), a[:4].double() @ b.double())

                record(c, f'for each problem: torch.matmul(a, b) (a Python loop of '
                       f'{len(probs)} cuBLAS calls)', fn, check,
                       {'note': f'torch has no grouped GEMM: a Python loop of {len(probs)} '
                                'torch.matmul calls, one cuBLAS launch each'})
                del probs
            elif c.kind == 'batched':
                a = operand(c.m, c.k, 'r', dt, c.batch)
                b = operand(c.k, c.n, 'r', dt, c.batch)
                record(c, 'torch.bmm(a, b) (cuBLAS strided batched)', lambda: torch.bmm(a, b),
                       lambda: rel_err(torch.bmm(a, b)[0, :4], a[0, :4].double() @ b[0].double()))
                del a, b
            else:
                a = operand(c.m, c.k, c.layout[0], dt)
                b = operand(c.k, c.n, c.layout[1], dt)
                views = {'r': '', 'c': ' (stored transposed, a .t() view)'}
                if c.kind == 'bias_gelu':
                    bias = rand_tensor((c.n,), dt, gen)
                    record(c, "F.gelu(torch.matmul(a, b) + bias, approximate='tanh') "
                           '(three kernels)',
                           lambda: F.gelu(torch.matmul(a, b) + bias, approximate='tanh'),
                           lambda: rel_err(
                               F.gelu(torch.matmul(a[:4], b) + bias, approximate='tanh'),
                               gelu64(a[:4].double() @ b.double() + bias.double())))
                    del bias
                else:
                    api = f'torch.matmul(a{views[c.layout[0]]}, b{views[c.layout[1]]})'
                    if api_tf32:
                        api += f'; {api_tf32}'
                    record(c, api, lambda: torch.matmul(a, b),
                           lambda: rel_err(torch.matmul(a[:4], b), a[:4].double() @ b.double()))
                if with_cupy and c.metric == 'gemm bf16 4096x4096x4096 rr':
                    cupy_gemm(c, warmup, runs, flush_on, flush_bytes)
                del a, b
        finally:
            if restore:
                restore()
        torch.cuda.empty_cache()


def cupy_gemm(c, warmup, runs, flush_on, flush_bytes):
    """cupy.matmul for one case, when this CuPy has a bfloat16 dtype (CuPy >=
    14 with ml_dtypes); else a note."""
    try:
        import cupy as cp
    except Exception as e:  # ImportError, or a broken install raising anything
        note('gemm', f'cupy not importable ({type(e).__name__}: {e}): no cupy.matmul peer')
        return
    try:
        import ml_dtypes
        bf16 = ml_dtypes.bfloat16
        probe = cp.ones((8, 8), dtype=cp.float32).astype(bf16)
        probe = cp.matmul(probe, probe)
        cp.cuda.Device().synchronize()
    except Exception as e:
        note('gemm', f'cupy {cp.__version__} has no usable bfloat16 ({type(e).__name__}: '
             f'{str(e)[:200]}): no cupy.matmul peer for {c.metric}')
        return
    rec = {'metric': f'{c.metric} (cupy)', 'unit': 'TFLOP/s', 'value': None, 'kind': 'gemm',
           'impl': 'cupy', 'op': 'gemm', 'api': 'cupy.matmul(a, b) (ml_dtypes.bfloat16)',
           'dtype': c.dtype, 'shape': c.shape, 'variant': c.variant, 'm': c.m, 'n': c.n,
           'k': c.k, 'batch': c.batch, 'a_order': 'row', 'b_order': 'row', 'flops': c.flops(),
           'l2_flush': flush_on, 'cupy_version': cp.__version__,
           'note': 'CuPy may run 16-bit matmuls with an f32 compute type '
                   '(cupy._core.get_compute_type)'}
    try:
        a = (cp.random.random((c.m, c.k), dtype=cp.float32) * 8 - 4).astype(bf16)
        b = (cp.random.random((c.k, c.n), dtype=cp.float32) * 8 - 4).astype(bf16)
        buf = cp.empty(flush_bytes // 4, dtype=cp.int32) if flush_on else None
        med, mn, again = timed_gemm(lambda: cp.matmul(a, b), warmup, runs,
                                    (lambda i: buf.fill(i)) if flush_on else None,
                                    cp.cuda.Device().synchronize, cp.cuda.Event,
                                    cp.cuda.get_elapsed_time)
    except Exception as e:
        rec.update(status='CUPY_ERROR', error=f'{type(e).__name__}: {e}'[:500])
        log(f'{c.metric} (cupy): {rec["error"]}')
        emit(rec)
        return
    rec.update(value=c.flops() / (med * 1e-3) / 1e12, median_ms=med, min_ms=mn, warmup=warmup,
               runs=runs, flush_bytes=flush_bytes, remeasured=again)
    emit(rec)
    del a, b, buf
    cp.get_default_memory_pool().free_all_blocks()


# ---- launch loops -----------------------------------------------------------
def launch_loop(launch, sync, calls, repeats):
    """Median and min host microseconds per call over `repeats`."""
    per_call = []
    for _ in range(repeats):
        total = 0.0
        done = 0
        while done < calls:
            m = min(CHUNK, calls - done)
            t0 = time.perf_counter()
            for _ in range(m):
                launch()
            total += time.perf_counter() - t0
            sync()
            done += m
        per_call.append(total / calls * 1e6)
    return median_min(per_call)


GEMM_LAUNCH_SHAPES = ((128, 128, 128), (16, 128, 128))  # bench_ckjit's gemm_launch_case


def torch_gemm_launch(quick):
    """Host time of torch.matmul(a, b, out=d), bf16, in bench_ckjit's loop."""
    import torch
    calls, repeats = (2000, 5) if quick else (20000, 10)
    for m, n, k in GEMM_LAUNCH_SHAPES:
        a = torch.ones(m, k, dtype=torch.bfloat16, device='cuda')
        b = torch.ones(k, n, dtype=torch.bfloat16, device='cuda')
        d = torch.empty(m, n, dtype=torch.bfloat16, device='cuda')
        launch = lambda: torch.matmul(a, b, out=d)
        launch_loop(launch, torch.cuda.synchronize, CHUNK, 1)
        if not bool((d == k).all()):
            note('torch', f'torch.matmul of ones {m}x{n}x{k} is not {k} everywhere: not timed')
            continue
        med, mn = launch_loop(launch, torch.cuda.synchronize, calls, repeats)
        shape = f'{m}x{n}x{k}'
        emit({'metric': f'launch host time gemm bf16 {shape} (torch)', 'unit': 'us',
              'value': med, 'kind': 'launch_gemm', 'impl': 'torch',
              'api': 'torch.matmul(a, b, out=d)', 'op': 'gemm', 'dtype': 'bf16',
              'shape': shape, 'min_us': mn, 'calls': calls, 'chunk': CHUNK,
              'repeats': repeats})


def emit_launch(impl, api, med, mn, calls, repeats):
    emit({'metric': f'launch host time copy f32 1x{N_ELEMS} ({impl})', 'unit': 'us',
          'value': med, 'kind': 'launch', 'impl': impl, 'api': api, 'op': 'copy',
          'dtype': 'f32', 'shape': f'1x{N_ELEMS}', 'min_us': mn, 'calls': calls,
          'chunk': CHUNK, 'repeats': repeats})


def run_first_call_children(impl, cache_env, quick, script):
    """Runs `--child IMPL` fresh processes sharing a new disk cache dir: one to
    fill it, then the measured ones.  Emits the median."""
    runs = 2 if quick else 5
    cache = tempfile.mkdtemp(prefix=f'ckjit-peer-{impl}-')
    env = dict(os.environ)
    env[cache_env] = cache
    results = []
    try:
        for i in range(runs + 1):
            p = subprocess.run([sys.executable, script, '--child', impl], env=env,
                               capture_output=True, text=True, timeout=180)
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith('FIRSTCALL ')), None)
            if p.returncode != 0 or line is None:
                note(impl, f'first-call child failed (exit {p.returncode}): '
                     f'{(p.stderr or p.stdout).strip()[-600:]}')
                return
            call_ms, sync_ms = (float(v) for v in line.split()[1:3])
            if i > 0:  # the first run filled the cache
                results.append((call_ms, sync_ms))
    except subprocess.TimeoutExpired:
        note(impl, 'first-call child timed out')
        return
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    sync = [s for _, s in results]
    call = [c for c, _ in results]
    emit({'metric': f'first call from disk cache copy f32 1x{N_ELEMS} ({impl})', 'unit': 'ms',
          'value': statistics.median(sync), 'kind': 'first_call', 'impl': impl,
          'call_return_ms': statistics.median(call), 'min_ms': min(sync), 'runs': len(sync),
          'measures': 'a fresh process, context already initialized: the first kernel call '
                      f'until it has returned and the device is synchronized ({cache_env} '
                      'filled by an earlier process)'})


# ---- cupy -------------------------------------------------------------------
def cupy_launch(quick):
    import cupy as cp
    import numpy as np

    calls, repeats = (2000, 5) if quick else (20000, 10)
    x = cp.arange(N_ELEMS, dtype=cp.float32) + 1.0
    y = cp.empty_like(x)
    kern = cp.RawKernel(COPY_SRC, 'peer_copy')
    args = (x, y, np.int32(N_ELEMS))
    grid, block = (1,), (N_ELEMS,)
    kern(grid, block, args)
    cp.cuda.Device().synchronize()
    if not bool((x == y).all()):
        note('cupy', 'the CuPy copy kernel copied wrong data')
    launch_loop(lambda: kern(grid, block, args), cp.cuda.Device().synchronize, CHUNK, 1)
    med, mn = launch_loop(lambda: kern(grid, block, args), cp.cuda.Device().synchronize,
                          calls, repeats)
    emit_launch('cupy', 'cupy.RawKernel.__call__', med, mn, calls, repeats)
    emit({'metric': 'cupy version', 'unit': None, 'value': None, 'kind': 'info',
          'impl': 'cupy', 'version': cp.__version__})


def child_cupy():
    import cupy as cp
    import numpy as np

    x = cp.arange(N_ELEMS, dtype=cp.float32) + 1.0  # creates the context
    y = cp.empty_like(x)
    args = (x, y, np.int32(N_ELEMS))
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    kern = cp.RawKernel(COPY_SRC, 'peer_copy')
    kern((1,), (N_ELEMS,), args)
    t1 = time.perf_counter()
    cp.cuda.Device().synchronize()
    t2 = time.perf_counter()
    print(f'FIRSTCALL {(t1 - t0) * 1e3:.6f} {(t2 - t0) * 1e3:.6f}', flush=True)


# ---- triton -----------------------------------------------------------------
# Defined at module level: @triton.jit resolves names (tl) in the module globals.
try:
    import triton
    import triton.language as tl
except Exception as _e:  # ImportError, or a broken install raising anything
    triton = None
    TRITON_IMPORT_ERROR = f'{type(_e).__name__}: {_e}'
else:
    TRITON_IMPORT_ERROR = ''

    @triton.jit
    def peer_copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def triton_launch(quick):
    import torch

    calls, repeats = (2000, 5) if quick else (20000, 10)
    kern = peer_copy_kernel
    x = torch.arange(N_ELEMS, dtype=torch.float32, device='cuda') + 1.0
    y = torch.empty_like(x)
    kern[(1,)](x, y, N_ELEMS, BLOCK=N_ELEMS)
    torch.cuda.synchronize()
    if not torch.equal(x, y):
        note('triton', 'the Triton copy kernel copied wrong data')
    launch_loop(lambda: kern[(1,)](x, y, N_ELEMS, BLOCK=N_ELEMS), torch.cuda.synchronize,
                CHUNK, 1)
    med, mn = launch_loop(lambda: kern[(1,)](x, y, N_ELEMS, BLOCK=N_ELEMS),
                          torch.cuda.synchronize, calls, repeats)
    emit_launch('triton', 'triton.jit kernel[grid](...)', med, mn, calls, repeats)
    emit({'metric': 'triton version', 'unit': None, 'value': None, 'kind': 'info',
          'impl': 'triton', 'version': triton.__version__})


def child_triton():
    import torch

    kern = peer_copy_kernel
    x = torch.arange(N_ELEMS, dtype=torch.float32, device='cuda') + 1.0  # creates the context
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    kern[(1,)](x, y, N_ELEMS, BLOCK=N_ELEMS)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    print(f'FIRSTCALL {(t1 - t0) * 1e3:.6f} {(t2 - t0) * 1e3:.6f}', flush=True)


# ---- main -------------------------------------------------------------------
def importable(name):
    try:
        __import__(name)
        return True, ''
    except Exception as e:  # ImportError, or a broken install raising anything
        return False, f'{type(e).__name__}: {e}'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--only', action='append',
                    choices=['torch', 'rows', 'gemm', 'cupy', 'triton'])
    ap.add_argument('--op', action='append', choices=list(ALL_ROW_OPS),
                    help='rows: only this op (repeatable)')
    ap.add_argument('--shape', action='append', help='rows: only this RxC (repeatable)')
    ap.add_argument('--gemm-case', action='append', metavar='SUBSTRING',
                    help='gemm: only the cases whose metric contains this (repeatable; '
                         'as bench_gemm --only)')
    ap.add_argument('--no-flush-l2', action='store_true',
                    help='gemm: no L2 flush before each timed run (as bench_gemm --no-flush-l2)')
    ap.add_argument('--child', choices=['cupy', 'triton'], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child == 'cupy':
        child_cupy()
        return 0
    if a.child == 'triton':
        child_triton()
        return 0

    only = set(a.only or ['torch', 'rows', 'gemm', 'cupy', 'triton'])
    script = os.path.abspath(__file__)
    status = 0
    ok_torch, why_torch = importable('torch')

    def step(name, fn):
        nonlocal status
        t0 = time.perf_counter()
        try:
            fn()
        except Exception as e:  # keep going with the other peers
            note(name, f'failed: {type(e).__name__}: {e}')
            status = 1
        log(f'{name}: {time.perf_counter() - t0:.1f} s')

    if 'torch' in only:
        if ok_torch:
            step('torch', lambda: torch_bandwidth(a.quick))
            step('torch', lambda: torch_gemm_launch(a.quick))
        else:
            note('torch', f'torch not importable ({why_torch}): skipped')
    if 'rows' in only:
        if not row_cases(a.op, a.shape):
            note('rows', 'no case matches --op/--shape')
        elif ok_torch:
            step('rows', lambda: torch_rows(a.quick, a.op, a.shape))
        else:
            note('rows', f'torch not importable ({why_torch}): skipped')
    if 'gemm' in only:
        if not gemm_cases(a.gemm_case):
            note('gemm', 'no case matches --gemm-case')
        elif ok_torch:
            step('gemm', lambda: torch_gemm(a.quick, a.gemm_case, not a.no_flush_l2, True))
        else:
            note('gemm', f'torch not importable ({why_torch}): skipped')
    if 'cupy' in only:
        ok, why = importable('cupy')
        if ok:
            step('cupy', lambda: cupy_launch(a.quick))
            step('cupy', lambda: run_first_call_children('cupy', 'CUPY_CACHE_DIR', a.quick,
                                                         script))
        else:
            note('cupy', f'cupy not importable ({why}): skipped')
    if 'triton' in only:
        ok, why = triton is not None, TRITON_IMPORT_ERROR
        if ok and ok_torch:
            step('triton', lambda: triton_launch(a.quick))
            step('triton', lambda: run_first_call_children('triton', 'TRITON_CACHE_DIR',
                                                           a.quick, script))
        else:
            note('triton', f'triton not importable ({why or why_torch}): skipped')
    return status


if __name__ == '__main__':
    sys.exit(main())
