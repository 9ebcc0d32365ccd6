#!/usr/bin/env python3
"""Peer measurements for bench/results.json, on the same GPU as bench_ckjit.

usage: peers.py [--quick] [--only torch|rows|cupy|triton]... [--op OP]... [--shape RxC]...

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
    ap.add_argument('--only', action='append', choices=['torch', 'rows', 'cupy', 'triton'])
    ap.add_argument('--op', action='append', choices=list(ALL_ROW_OPS),
                    help='rows: only this op (repeatable)')
    ap.add_argument('--shape', action='append', help='rows: only this RxC (repeatable)')
    ap.add_argument('--child', choices=['cupy', 'triton'], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child == 'cupy':
        child_cupy()
        return 0
    if a.child == 'triton':
        child_triton()
        return 0

    only = set(a.only or ['torch', 'rows', 'cupy', 'triton'])
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
        else:
            note('torch', f'torch not importable ({why_torch}): skipped')
    if 'rows' in only:
        if not row_cases(a.op, a.shape):
            note('rows', 'no case matches --op/--shape')
        elif ok_torch:
            step('rows', lambda: torch_rows(a.quick, a.op, a.shape))
        else:
            note('rows', f'torch not importable ({why_torch}): skipped')
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
