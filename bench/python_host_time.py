#!/usr/bin/env python3
"""Host time of one Python call: the ckjit package's ops against torch's own (issue 19).

usage: python_host_time.py [--lib PATH] [--json OUT] [--calls N] [--repeats R] [--device I]
                           [--quick]

Cases, on small tensors where the launch cost dominates: ckjit.rms_norm vs
torch.nn.functional.rms_norm (bf16 8x1024), ckjit.matmul vs torch.matmul (bf16
64x64x64), ckjit.softmax vs torch.softmax (bf16 8x1024).  Each side is a loop of N calls
on torch's current stream, timed with time.perf_counter_ns around the loop only (no
synchronization per call; one after the loop, untimed, so the GPU queue never fills),
the sides alternating, R loops each; the number is the median of the R per-call
times.  Every call allocates its output, on both sides.  The custom-op dispatcher path
(torch.ops.ckjit.<op>, what torch.compile graphs call) is measured the same way, as a
third side, and reported in its own record.  The issue's target: ckjit no slower than
torch (ratio = torch us / ckjit us >= 1).

Records: JSON lines (one per line), written to --json (appended to by
scripts/gpu-check.sh's "python" step into bench-ckjit.jsonl) and printed, in
make_results.py's kind "host_time" form: metric "python OP host time vs torch" (and
"python OP custom-op host time vs torch" for the dispatcher path), value (ckjit us,
the median), peer_value (torch us), peer_name, unit "us", card, check (ckjit's result
against torch's), details (shape, minima, calls, repeats, versions, the other path's
median), target; plus ckjit / peer / ratio (torch us / ckjit us), the results.json
fields, for reading the file directly.
Exit status 0 when every check passed, 2 when one failed, 1 when the run could not start.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--lib', default=os.path.join(ROOT, 'build-gpu', 'libckjit.so'),
                    help='libckjit to load (sets CKJIT_LIBRARY)')
    ap.add_argument('--json', help='write the records here (JSON lines)')
    ap.add_argument('--calls', type=int, default=1000, help='calls per timed loop')
    ap.add_argument('--repeats', type=int, default=20, help='timed loops per side')
    ap.add_argument('--device', type=int, default=0, help='CUDA device ordinal')
    ap.add_argument('--quick', action='store_true', help='200 calls, 5 repeats')
    ap.add_argument('--breakdown', action='store_true', help='also time the parts of one '
                    'call (stream and device queries, allocation, the bare C call) and log them')
    a = ap.parse_args()
    if a.quick:
        a.calls, a.repeats = 200, 5
    return a


def log(msg):
    print(f'python_host_time.py: {msg}', file=sys.stderr, flush=True)


def loop_us(fn, calls, sync):
    """Host microseconds per call of `calls` back-to-back calls (the sync after is untimed)."""
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter_ns()
    sync()
    return (t1 - t0) / calls / 1e3


def measure(sides, calls, repeats, sync):
    """name -> (median us, min us) over `repeats` loops per side, the sides alternating
    (their order rotating each round, so none always runs first)."""
    for fn in sides.values():  # warm-up: compiles or loads kernels, fills allocator caches
        loop_us(fn, max(calls // 10, 10), sync)
    names = list(sides)
    per = {n: [] for n in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            per[n].append(loop_us(sides[n], calls, sync))
    return {n: (statistics.median(v), min(v)) for n, v in per.items()}


def cases(torch, ckjit, dev):
    """(metric base, ckjit call, dispatcher call, peer call, peer name) per case."""
    F = torch.nn.functional
    g = torch.Generator(device='cpu').manual_seed(19)

    def rnd(*shape):
        return torch.randn(*shape, generator=g).to(torch.bfloat16).to(dev)

    x, w = rnd(8, 1024), rnd(1024)
    a, b = rnd(64, 64), rnd(64, 64)
    ops = torch.ops.ckjit
    return [
        ('python rms_norm host time bf16 8x1024',
         lambda: ckjit.rms_norm(x, (1024,), w, eps=1e-6),
         lambda: ops.rms_norm(x, [1024], w, 1e-6, None),
         lambda: F.rms_norm(x, (1024,), w, eps=1e-6), 'torch.nn.functional.rms_norm'),
        ('python matmul host time bf16 64x64x64',
         lambda: ckjit.matmul(a, b),
         lambda: ops.matmul(a, b, None, None, None, 1.0, 0.0, None, None, None, False, 0, False),
         lambda: torch.matmul(a, b), 'torch.matmul'),
        ('python softmax host time bf16 8x1024',
         lambda: ckjit.softmax(x, -1),
         lambda: ops.softmax(x, -1, 1.0, None, False),
         lambda: torch.softmax(x, -1), 'torch.softmax'),
    ]


def breakdown(torch, ckjit, dev, calls, repeats, sync):
    """Host us per call of each part of an eager ckjit call, and of the bare C calls
    (ctypes with preallocated outputs and parameters), logged: where the time goes."""
    lib, S = ckjit._lib.lib, ckjit._structs
    g = torch.Generator(device='cpu').manual_seed(19)
    x = torch.randn(8, 1024, generator=g).to(torch.bfloat16).to(dev)
    w, y = x[0].clone(), torch.empty_like(x)
    a = torch.randn(64, 64, generator=g).to(torch.bfloat16).to(dev)
    d = torch.empty_like(a)
    stream = torch.cuda.current_stream(dev).cuda_stream
    xp, yp, ap_, dp = x.data_ptr(), y.data_ptr(), a.data_ptr(), d.data_ptr()
    norm = S.NormParams(1e-6, w.data_ptr())
    desc = S.GemmDesc()
    lib.ckjit_gemm_desc_init(desc)
    desc.m = desc.n = desc.k = desc.lda = desc.ldb = desc.ldd = 64
    desc.a, desc.b, desc.d = ap_, ap_, dp
    norm_at, desc_at = S.ctypes.addressof(norm), S.ctypes.addressof(desc)
    prepared = S.PTR()
    assert lib.ckjit_softmax_prepare(2, 8, 1024, 1024, 1024, 0, dev.index,
                                     S.ctypes.byref(prepared)) == 0, 'ckjit_softmax_prepare'
    hp = prepared.value
    raw, index = torch._C._cuda_getCurrentRawStream, dev.index
    parts = {
        'torch.compiler.is_compiling()': torch.compiler.is_compiling,
        'torch._C._cuda_getCurrentRawStream(i)': lambda: raw(index),
        'torch._C._cuda_getDevice()': torch._C._cuda_getDevice,
        'x.new_empty(x.shape)': lambda: x.new_empty(x.shape),
        'torch.empty_like(x)': lambda: torch.empty_like(x),
        'ctypes + ckjit_softmax (C)': lambda: lib.ckjit_softmax(2, 8, 1024, xp, 1024, yp, 1024,
                                                                 0, stream),
        'ctypes + ckjit_prepared_run (C, softmax)': lambda: lib.ckjit_prepared_run(hp, xp, yp,
                                                                                  stream),
        'ctypes, 4 args, C refuses: ckjit_prepared_run(NULL)': lambda: lib.ckjit_prepared_run(
            0, xp, yp, stream),
        'ckjit.rows._softmax_prepared(x, 1.0, 0)': lambda: ckjit.rows._softmax_prepared(x, 1.0, 0),
        'empty_like + ckjit_prepared_run': lambda: lib.ckjit_prepared_run(
            hp, xp, torch.empty_like(x).data_ptr(), stream),
        'empty_like + x.data_ptr() + raw stream + prepared_run': lambda: lib.ckjit_prepared_run(
            hp, x.data_ptr(), torch.empty_like(x).data_ptr(), raw(index)),
        'torch.empty_like(x) + torch.softmax(x, -1)': lambda: (torch.empty_like(x),
                                                               torch.softmax(x, -1)),
        'ctypes + ckjit_rmsnorm2d (C)': lambda: lib.ckjit_rmsnorm2d(2, 8, 1024, xp, 1024, yp,
                                                                     1024, norm_at, stream),
        'ctypes + ckjit_gemm (C)': lambda: lib.ckjit_gemm(desc_at, stream),
        'ctypes, no C work: ckjit_last_status()': lib.ckjit_last_status,
        'ctypes, 9 args, C refuses: ckjit_softmax(NULL x)': lambda: lib.ckjit_softmax(
            2, 8, 1024, 0, 1024, yp, 1024, 0, stream),
        'x.dtype': lambda: x.dtype,
        'x.shape': lambda: x.shape,
        'x.stride()': lambda: x.stride(),
        'x.get_device()': lambda: x.get_device(),
        'x.is_contiguous()': lambda: x.is_contiguous(),
        'x.numel()': lambda: x.numel(),
        'x.data_ptr()': lambda: x.data_ptr(),
        'x.device': lambda: x.device,
        'a.new_empty((64, 64))': lambda: a.new_empty((64, 64)),
        'torch.empty((64, 64), dtype=, device=)': lambda: torch.empty((64, 64), dtype=a.dtype,
                                                                      device=dev),
        'torch.empty_strided': lambda: torch.empty_strided((64, 64), (64, 1), dtype=a.dtype,
                                                           device=dev),
        'ckjit.softmax(x, out=y)': lambda: ckjit.softmax(x, out=y),
        'ckjit.softmax(x)': lambda: ckjit.softmax(x),
        'torch.softmax(x, -1)': lambda: torch.softmax(x, -1),
        'ckjit.rms_norm(x, .., out=y)': lambda: ckjit.rms_norm(x, (1024,), w, 1e-6, out=y),
        'ckjit.matmul(a, a, out=d)': lambda: ckjit.matmul(a, a, out=d),
    }
    t = measure(parts, calls, repeats, sync)
    for name, (med, mn) in t.items():
        log(f'  {name:40s} {med:7.2f} us (min {mn:.2f})')


def check(torch, got, want):
    """'ok' when ckjit's bf16 result agrees with torch's (two bf16 roundings apart)."""
    if isinstance(got, tuple):
        got = got[0]
    ok = torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2)
    return 'ok' if ok else f'failed: max |diff| {float((got.float() - want.float()).abs().max())}'


def main():
    a = parse_args()
    os.environ['CKJIT_LIBRARY'] = a.lib
    sys.path.insert(0, os.path.join(ROOT, 'python'))  # this checkout's package
    try:
        import torch
        import ckjit
        if not torch.cuda.is_available():
            raise RuntimeError('torch sees no CUDA device')
    except Exception as e:  # no torch, no GPU, no library
        log(f'cannot run: {type(e).__name__}: {e}')
        return 1
    dev = torch.device('cuda', a.device)
    torch.cuda.set_device(dev)
    sync = torch.cuda.synchronize
    card = torch.cuda.get_device_name(dev)
    info = {'torch_version': torch.__version__, 'python': sys.version.split()[0],
            'lib': ckjit.library_path, 'calls': a.calls, 'repeats': a.repeats,
            'stream': 'torch.cuda.current_stream() (the default stream)'}
    log(f'{card}, torch {torch.__version__}, {ckjit.library_path}')
    records, failed = [], False
    with torch.no_grad():
        for base, ck, disp, peer, peer_name in cases(torch, ckjit, dev):
            status = check(torch, ck(), peer())
            failed |= status != 'ok'
            t = measure({'ckjit': ck, 'dispatcher': disp, 'peer': peer}, a.calls, a.repeats,
                        sync)
            ck_us, d_us, (p_us, p_min) = t['ckjit'][0], t['dispatcher'][0], t['peer']
            shape = ' '.join(base.split()[-2:])  # 'bf16 8x1024'
            metric = base.rsplit(' ', 2)[0]  # "python OP host time"
            op = metric.split()[1]
            common = {'kind': 'host_time', 'impl': 'ckjit', 'card': card, 'unit': 'us',
                      'peer_name': peer_name, 'check': status}
            for name, (us, mn), api, other in (
                    (f'{metric} vs torch', t['ckjit'],
                     f'ckjit.{op} (eager: ctypes, no dispatcher)', ('dispatcher_us', d_us)),
                    (f'python {op} custom-op host time vs torch', t['dispatcher'],
                     f'torch.ops.ckjit.{op} (the torch.compile path)', ('eager_us', ck_us))):
                records.append(dict(common, metric=name, value=round(us, 3),
                                    peer_value=round(p_us, 3), ckjit=round(us, 3),
                                    peer=round(p_us, 3), ratio=round(p_us / us, 3),
                                    details=dict(info, api=api, shape=shape, min_us=round(mn, 3),
                                                 peer_min_us=round(p_min, 3),
                                                 **{other[0]: round(other[1], 3)}),
                                    target='ratio >= 1.0 (issue 19)',
                                    target_met=p_us / us >= 1.0))
            log(f'{base}: ckjit {ck_us:.2f} us, dispatcher {d_us:.2f} us, torch {p_us:.2f} us '
                f'(torch / ckjit {p_us / ck_us:.2f}); check {status}')
        if a.breakdown:
            log('where the time goes (host us per call):')
            breakdown(torch, ckjit, dev, a.calls, a.repeats, sync)
    text = ''.join(json.dumps(r) + '\n' for r in records)
    if a.json:
        with open(a.json, 'w') as f:
            f.write(text)
    print(text, end='')
    return 2 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
