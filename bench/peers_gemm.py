"""peers.py's section "gemm": the torch (cuBLAS) and CuPy peers of bench/bench_gemm.c
(see peers.py's docstring), timed as bench_gemm times ckjit."""
from peers_common import emit, emit_torch_device, log, median_min, note, rand_tensor

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
