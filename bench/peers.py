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
          same bytes: rows_bytes() in peers_rows.py mirrors the C one), timed the same
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
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from peers_common import (emit, emit_torch_device, log, median_min, note, rand_tensor, timed,
                          timing_plan)
from peers_gemm import gemm_cases, torch_gemm
from peers_rows import ALL_ROW_OPS, row_cases, torch_rows

N_ELEMS = 1024
CHUNK = 1000

COPY_SRC = r'''
extern "C" __global__ void peer_copy(const float* __restrict__ src,
                                     float* __restrict__ dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}
'''



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
