#!/usr/bin/env python3
"""Fused attention forward: ckjit_attention against torch SDPA's cuDNN and
FlashAttention-2 backends on the same GPU, stream and inputs (issue 17).

usage: attention_torch.py [--lib PATH] [--prewarm PATH] [--quick] [--only SUBSTRING]...
                          [--budget S] [--no-flush-l2] [--no-lse] [--check-layout]
JSONL records on stdout for bench/make_results.py, whose "Attention" section of
RESULTS.md says how each number is made.  ckjit runs through ctypes over torch tensors
(.data_ptr(), torch's current stream); the peers are F.scaled_dot_product_attention
under sdpa_kernel(CUDNN_ATTENTION / FLASH_ATTENTION) on .transpose(1, 2) views of the
same BSHD tensors.  A case whose check fails is not timed ("check": "failed").  Cases
run in a child process (a crash or hang costs only its case); the compile times
(ckjit-prewarm) come last.  Exit status 0 when every case was measured or
CKJIT_ERROR_UNSUPPORTED, 2 when a check failed, else 1.
"""
import argparse
import ctypes
import json
import math
import os
import random
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCH = 'sm_90'
BF16, MASK_NONE, MASK_CAUSAL = 2, 0, 1  # ckjit_dtype / ckjit_attention_mask values
ATOL, RTOL, UNSTEADY, CHUNK = 2e-2, 1e-2, 1.25, 1000
CASE_LIMIT = 150   # seconds a case may run in the child (its first call may compile)
COMPILE_KEEP = 30  # seconds of --budget kept for the compile measurement (last)
PEERS = ('cudnn', 'flash')
COMPILE_NAME = 'attention compile'
torch = F = None  # imported by the child

# ---- ctypes mirrors of include/ckjit/ckjit.h ---------------------------------------
I64, INT, FLT, PTR = ctypes.c_int64, ctypes.c_int, ctypes.c_float, ctypes.c_void_p


class Strides(ctypes.Structure):  # ckjit_attention_strides
    _fields_ = [('batch', I64), ('head', I64), ('seq', I64), ('dim', I64)]


class AttentionDesc(ctypes.Structure):  # ckjit_attention_desc (enums are int)
    _fields_ = [('dtype', INT), ('batch', I64), ('num_heads_q', I64), ('num_heads_kv', I64),
                ('seqlen_q', I64), ('seqlen_k', I64), ('head_dim_qk', I64), ('head_dim_v', I64),
                ('q', PTR), ('q_strides', Strides), ('k', PTR), ('k_strides', Strides),
                ('v', PTR), ('v_strides', Strides), ('o', PTR), ('o_strides', Strides),
                ('lse', PTR), ('lse_strides', Strides), ('cu_seqlens_q', PTR),
                ('cu_seqlens_k', PTR), ('softmax_scale', FLT), ('mask', INT),
                ('window_left', I64), ('window_right', I64), ('bias', PTR), ('bias_dtype', INT),
                ('bias_strides', Strides), ('alibi_slopes', PTR), ('alibi_stride_batch', I64),
                ('softcap', FLT)]


class GemmDesc(ctypes.Structure):  # ckjit_gemm_desc
    _fields_ = [('m', I64), ('n', I64), ('k', I64), ('ab_dtype', INT), ('out_dtype', INT),
                ('a', PTR), ('lda', I64), ('a_order', INT), ('b', PTR), ('ldb', I64),
                ('b_order', INT), ('d', PTR), ('ldd', I64), ('c', PTR), ('ldc', I64),
                ('alpha', FLT), ('beta', FLT), ('bias', PTR), ('bias_mode', INT),
                ('activation', INT), ('d0', PTR), ('ldd0', I64), ('d1', PTR), ('ldd1', I64),
                ('batch', I64), ('stride_a', I64), ('stride_b', I64), ('stride_c', I64),
                ('stride_d', I64), ('stride_d0', I64), ('stride_d1', I64), ('split_k', INT),
                ('allow_tf32', INT)]


# Offsets by hand, LP64 (int/enum 4 bytes, int64/pointer 8, aligned to size; strides 32):
# attention: dtype 0 (+4), batch..head_dim_v 8..56, q 64, q_strides 72, k 104, 112, v 144,
# 152, o 184, 192, lse 224, 232, cu_seqlens_q/k 264/272, softmax_scale 280, mask 284,
# window_left/right 288/296, bias 304, bias_dtype 312 (+4), bias_strides 320, alibi_slopes
# 352, alibi_stride_batch 360, softcap 368 (+4): sizeof 376.  gemm: m n k 0 8 16, dtypes
# 24 28, a 32, lda 40, a_order 48 (+4), b 56, ldb 64, b_order 72 (+4), d 80, ldd 88, c 96,
# ldc 104, alpha/beta 112/116, bias 120, bias_mode 128, activation 132, d0 136, ldd0 144,
# d1 152, ldd1 160, batch 168, stride_a..d1 176..216, split_k 224, allow_tf32 228: 232.
# layout_check() also compares every offset with a C program built on ckjit.h.
STRUCTS = {'ckjit_attention_desc': (AttentionDesc, 376, 368), 'ckjit_gemm_desc': (GemmDesc, 232, 228)}


def layout_check():
    """(mismatches, how checked): vs the hand numbers above and offsetof() in C."""
    bad, ours = [], {}
    src = ['#include <stdio.h>', '#include <stddef.h>', '#include "ckjit/ckjit.h"', 'int main(void) {']
    for cname, (st, size, last) in STRUCTS.items():
        ours[cname] = dict({f[0]: getattr(st, f[0]).offset for f in st._fields_},
                           sizeof=ctypes.sizeof(st))
        if (ctypes.sizeof(st), getattr(st, st._fields_[-1][0]).offset) != (size, last):
            bad.append(f'{cname}: ctypes sizeof {ctypes.sizeof(st)}, by hand {size}')
        src += [f'printf("{cname} {k} %zu\\n", ' + (f'sizeof({cname}));' if k == 'sizeof' else
                                                    f'offsetof({cname}, {k}));') for k in ours[cname]]
    cc = shutil.which(os.environ.get('CC', 'cc')) or shutil.which('gcc')
    if not cc or not os.path.exists(os.path.join(ROOT, 'include', 'ckjit', 'ckjit.h')):
        return bad, 'sizeof by hand only (no C compiler or no ckjit.h here)'
    with tempfile.TemporaryDirectory(prefix='ckjit-attention-layout-') as d:
        with open(os.path.join(d, 'l.c'), 'w') as f:
            f.write('\n'.join(src) + '\nreturn 0; }\n')
        p = subprocess.run([cc, '-std=c11', '-I', os.path.join(ROOT, 'include'),
                            os.path.join(d, 'l.c'), '-o', os.path.join(d, 'l')],
                           capture_output=True, text=True)
        if p.returncode:  # e.g. a field ckjit.h no longer has
            return bad + [f'the C layout program failed: {p.stderr.strip()[-400:]}'], cc
        out = subprocess.run([os.path.join(d, 'l')], capture_output=True, text=True).stdout
    c_val = {tuple(ln.split()[:2]): int(ln.split()[2]) for ln in out.splitlines()}
    bad += [f'{cname}.{k}: ctypes {v}, C {c_val.get((cname, k))}' for cname in ours
            for k, v in ours[cname].items() if c_val.get((cname, k)) != v]
    return bad, f'ctypes == offsetof()/sizeof from {cc} on ckjit.h (and sizeof by hand)'


# ---- cases and records -----------------------------------------------------------------
class Case:
    def __init__(self, b, hq, hkv, s, d, causal, varlen=0, launch=False):
        self.b, self.hq, self.hkv, self.s, self.d = b, hq, hkv, s, d
        self.causal, self.varlen, self.launch = causal, varlen, launch
        heads = f'h{hq}' if hq == hkv else f'h{hq}/{hkv}'
        self.name = (f'varlen{varlen} {heads} d{d}' if varlen else f'b{b} {heads} s{s} d{d}') + \
            (' causal' if causal else '')
        self.base = (f'attention launch host time bf16 {self.name} vs ckjit_gemm bf16 128x128x128'
                     if launch else f'attention bf16 {self.name}')
        self.lens = [s] * b  # each entry's sequence length; varlen: seed 17, 100 and 8000 in
        if varlen:
            rng = random.Random(17)
            self.lens = [100, 8000] + [rng.randint(100, 8000) for _ in range(varlen - 2)]
            rng.shuffle(self.lens)
        self.flops = sum(4 * hq * n * n * d for n in self.lens) // (2 if causal else 1)


CASES = [Case(16, 16, 16, 1024, 128, c) for c in (False, True)]
CASES += [Case(4, 16, 16, 4096, d, c) for d in (64, 128, 256) for c in (False, True)]
CASES += [Case(1, 16, 16, 16384, 128, True), Case(4, 32, 8, 4096, 128, True),
          Case(0, 16, 16, 0, 128, True, varlen=16), Case(1, 1, 1, 128, 128, False, launch=True)]


def log(msg):
    print(f'attention_torch.py: {msg}', file=sys.stderr, flush=True)


def emit(rec):
    print(json.dumps(rec), flush=True)


def note(text):
    log(f'note: {text}')
    emit({'metric': 'note attention', 'unit': None, 'value': None, 'kind': 'note',
          'impl': 'attention', 'note': text})


def fail_records(case, status, error, extra=None):
    log(f'{case.base}: {status}: {error}')
    rec = dict(extra or {}, unit='us' if case.launch else 'TFLOP/s', value=None, impl='ckjit',
               status=status, error=error[:600])
    if case.launch:
        return emit(dict(rec, metric=case.base, kind='attention_launch'))
    for p in PEERS:
        emit(dict(rec, metric=f'{case.base} vs {p}', kind='attention', peer=p, peer_value=None,
                  case=case.name, flops=case.flops))


# ---- the child: torch and ckjit in one process ------------------------------------------
class CkjitFailed(Exception):
    """args: (ckjit status name, ckjit_last_error())."""


class Ctx:
    def __init__(self, a):
        global torch, F
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.sdpa_kernel, self.backends = sdpa_kernel, {
            'cudnn': SDPBackend.CUDNN_ATTENTION, 'flash': SDPBackend.FLASH_ATTENTION}
        lib = self.lib = ctypes.CDLL(a.lib)
        for op, st in (('ckjit_attention', AttentionDesc), ('ckjit_gemm', GemmDesc)):
            getattr(lib, op).argtypes, getattr(lib, op).restype = [ctypes.POINTER(st), PTR], INT
            getattr(lib, op + '_desc_init').argtypes = [ctypes.POINTER(st)]
        lib.ckjit_status_string.argtypes = [INT]
        lib.ckjit_status_string.restype = lib.ckjit_last_error.restype = ctypes.c_char_p
        self.stream = PTR(torch.cuda.current_stream().cuda_stream)
        self.quick, self.lse, self.gen = a.quick, not a.no_lse, torch.Generator(device='cuda')
        self.warmup, self.runs = (3, 20) if a.quick else (10, 50)
        self.flush_bytes = 0 if a.no_flush_l2 else max(2 * (getattr(
            torch.cuda.get_device_properties(0), 'L2_cache_size', 0) or 0), 256 << 20)
        self.flush = self.flush_bytes and torch.empty(self.flush_bytes // 4, dtype=torch.int32,
                                                      device='cuda')

    def call(self, fn, desc):
        ref, stream, lib = ctypes.byref(desc), self.stream, self.lib

        def run():
            st = fn(ref, stream)
            if st:
                raise CkjitFailed(lib.ckjit_status_string(st).decode(), (
                    lib.ckjit_last_error() or b'').decode(errors='replace').strip())
        return run

    def measure(self, fns):
        """Event-timed runs alternating over fns: name -> (median, min ms, remeasured)."""
        for fn in list(fns.values()) * self.warmup:  # alternating too
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def series():
            ms = {k: [] for k in fns}
            for i in range(self.runs):
                for k, fn in fns.items():
                    if self.flush_bytes:
                        self.flush.fill_(i)
                    s.record()
                    fn()
                    e.record()
                    e.synchronize()
                    ms[k].append(s.elapsed_time(e))
            return {k: (statistics.median(v), min(v)) for k, v in ms.items()}
        first = series()
        if all(med <= UNSTEADY * mn for med, mn in first.values()):
            return {k: v + (False,) for k, v in first.items()}
        again = series()  # as bench_gemm: once more, the lower median kept
        return {k: (again[k] if again[k][0] < first[k][0] else first[k]) + (True,) for k in fns}


def make_desc(ctx, case, q, k, v, o, lse=None, cu=None):
    """BSHD q/k/v/o, LSE [b, h, s]; varlen: packed [tokens, h, d], LSE [h, tokens]."""
    d = AttentionDesc()
    ctx.lib.ckjit_attention_desc_init(ctypes.byref(d))
    d.dtype, d.batch, d.num_heads_q, d.num_heads_kv = BF16, len(case.lens), case.hq, case.hkv
    d.seqlen_q = d.seqlen_k = max(case.lens)  # varlen: the longest sequence
    d.head_dim_qk = d.head_dim_v = case.d
    for name, t in (('q', q), ('k', k), ('v', v), ('o', o), ('lse', lse)):
        if t is not None:  # (batch, seq, head, dim) / LSE (batch, head, seq, -); varlen: batch 0
            st = ((0,) if cu is not None else ()) + t.stride() + ((1,) if name == 'lse' else ())
            setattr(d, name, t.data_ptr())
            setattr(d, name + '_strides', Strides(*st) if name == 'lse' else
                    Strides(st[0], st[2], st[1], st[3]))
    if cu is not None:
        d.cu_seqlens_q = d.cu_seqlens_k = cu.data_ptr()
    d.softmax_scale, d.mask = 1.0 / math.sqrt(case.d), MASK_CAUSAL if case.causal else MASK_NONE
    return d  # (ckjit_attention_desc_init left window -1, no bias / ALiBi / softcap)


def jnum(x):  # JSON has no NaN
    return x if math.isfinite(x) else repr(x)


def compare(got, ref):
    """(max |got - ref|, elements outside ATOL + RTOL |ref|; NaN counts)."""
    g, r = got.float(), ref.float()
    diff = (g - r).abs()
    return float(diff.max()), int((~(diff <= ATOL + RTOL * r.abs())).sum())


def sampled_check(case, seqs):
    """(worst max diff, bad count): ckjit's O against float64 attention, first and last
    64 rows and heads of each (q, k, v, o) [s, h, d] (sq == sk: causal keeps j <= i)."""
    worst, bad = 0.0, 0
    for q, k, v, o in seqs:
        n = q.shape[0]
        rows = torch.tensor(sorted(set(range(min(64, n))) | set(range(max(0, n - 64), n))),
                            device=q.device)
        for h in (0, case.hq - 1):
            g = h // (case.hq // case.hkv)
            sc = (q[rows, h].double() @ k[:, g].double().T) / math.sqrt(case.d)
            if case.causal:
                sc.masked_fill_(torch.arange(n, device=q.device)[None] > rows[:, None], -math.inf)
            w, b = compare(o[rows, h], torch.softmax(sc, -1) @ v[:, g].double())
            worst, bad = (max(worst, w) if math.isfinite(worst) else worst), bad + b
    return worst, bad


def capture(fn):
    """(fn()'s output, None) synchronized, or (None, why torch refused it)."""
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter('always')
        try:
            out = fn()
            torch.cuda.synchronize()
            return out, None
        except Exception as e:  # a backend that refuses the case: a note, not a failure
            why = [f'{type(e).__name__}: {e}'] + [str(w.message) for w in ws][:4]
            return None, ' | '.join((x.strip().splitlines() or [''])[0] for x in why)[:600]


def sdpa(ctx, bk, seqs, kw):
    """SDPA under sdpa_kernel(bk) on .transpose(1, 2) views of each BSHD (q, k, v)."""
    views = [tuple(t.transpose(1, 2) for t in x) for x in seqs]

    def fn():
        with ctx.sdpa_kernel(bk):
            return [F.scaled_dot_product_attention(*x, **kw) for x in views]
    return fn


def peer_ways(ctx, case, q, k, v, starts):
    """Per backend, the ways to run the case that worked, (label, callable, api, output
    as ckjit's O), and notes.  Varlen: a Python loop of per-sequence calls (a padded
    batch would do 16 x 8000^2 / sum(len^2), about 3x, the work)."""
    out, notes, lens = {}, [], case.lens
    for peer in PEERS:
        bk, got, why = ctx.backends[peer], [], []
        api = f'F.scaled_dot_product_attention under sdpa_kernel({bk})'
        for label in (['python loop'] if case.varlen else
                      ['enable_gqa=True', 'K/V expanded'] if case.hq != case.hkv else ['dense']):
            kw, api_s = {'is_causal': case.causal}, api
            if label == 'python loop':
                fn = sdpa(ctx, bk, [tuple(t[s0:s0 + n][None] for t in (q, k, v))
                                    for s0, n in zip(starts, lens)], kw)
                api_s += f': a Python loop of {len(lens)} per-sequence calls'
            elif label == 'K/V expanded':
                r = case.hq // case.hkv
                fn = sdpa(ctx, bk, [(q, k.repeat_interleave(r, 2), v.repeat_interleave(r, 2))], kw)
                api_s += ', K/V repeat_interleave-expanded to the query heads before timing'
            else:
                kw.update({'enable_gqa': True} if label == 'enable_gqa=True' else {})
                fn = sdpa(ctx, bk, [(q, k, v)], kw)
                api_s += ', enable_gqa=True' if 'enable_gqa' in kw else ''
            res, err = capture(fn)
            if res is None:
                why.append(f'{label}: {err}')
                continue
            if label == 'python loop':  # [1, h, n, d] each -> packed [tokens, h, d]
                res = torch.cat([x.transpose(1, 2)[0] for x in res])
            else:  # [b, h, s, d] -> [b, s, h, d]
                res = res[0].transpose(1, 2)
            got.append((label, fn, api_s, res))
            if label == 'enable_gqa=True':
                break  # K/V expanded only where enable_gqa is refused
        if why:
            notes.append(f'{peer}: ' + ('refused the case: ' if not got else '') + '; '.join(why))
        out[peer] = got
    return out, notes


def run_case(ctx, case):
    ctx.gen.manual_seed(1000 + CASES.index(case))
    lens, shape = case.lens, ((sum(case.lens),) if case.varlen else (case.b, case.s))
    q, k, v = (torch.randn(*shape, h, case.d, device='cuda', dtype=torch.bfloat16,
                           generator=ctx.gen) for h in (case.hq, case.hkv, case.hkv))
    starts = [sum(lens[:i]) for i in range(len(lens) + 1)]
    cu = torch.tensor(starts, dtype=torch.int32, device='cuda') if case.varlen else None
    lse = torch.empty((case.hq, starts[-1]) if case.varlen else (case.b, case.hq, case.s),
                      dtype=torch.float32, device='cuda') if ctx.lse else None
    o = torch.full_like(q, math.nan)
    ck = ctx.call(ctx.lib.ckjit_attention, make_desc(ctx, case, q, k, v, o, lse, cu))
    t0 = time.perf_counter()
    try:
        ck()
        torch.cuda.synchronize()
    except CkjitFailed as e:
        return fail_records(case, *e.args)
    first_ms = (time.perf_counter() - t0) * 1e3
    ref_diff, ref_bad = sampled_check(case, [tuple(t[starts[i]:starts[i + 1]] for t in (
        q, k, v, o)) for i in (0, lens.index(max(lens)))] if case.varlen else  # first, longest
        [(q[i], k[i], v[i], o[i]) for i in (0, -1)])
    ways, notes = peer_ways(ctx, case, q, k, v, starts)
    ref = next(((p, w[0], w[3]) for p in PEERS for w in ways[p]), None)  # cuDNN, else flash
    peer_diff, peer_bad = compare(o, ref[2]) if ref else (0.0, 0)
    for p in PEERS:  # each peer way must agree with that reference too; outputs dropped
        for w in [w for w in ways[p] if compare(w[3], ref[2])[1]]:
            notes.append(f'{p}: {w[0]} differs from {ref[0]} {ref[1]}: not timed')
            ways[p].remove(w)
        ways[p] = [w[:3] for w in ways[p]]
    check_ok = ref_bad == 0 and peer_bad == 0
    base = {'kind': 'attention', 'impl': 'ckjit', 'unit': 'TFLOP/s', 'case': case.name,
            'causal': case.causal, 'head_dim': case.d, 'flops': case.flops, 'first_call_ms':
            first_ms, 'check': 'ok' if check_ok else 'failed', 'check_vs': (
                f'{ref[0]} ({ref[1]}) every element, ' if ref else 'no peer ran; ') +
            'float64 on sampled rows', 'max_abs_diff': jnum(peer_diff), 'ref_max_abs_diff':
            jnum(ref_diff), 'tolerance': f'|diff| <= {ATOL} + {RTOL} |ref|', 'lse': ctx.lse,
            'lengths': lens if case.varlen else None}
    ref = None
    if not check_ok:
        return fail_records(case, 'CHECK_FAILED', (
            f'ckjit O vs the peer: max |diff| {peer_diff:.4g}, {peer_bad} elements out of '
            f'tolerance; vs float64 sampled rows: max |diff| {ref_diff:.4g}, {ref_bad} out'), base)
    res = ctx.measure(dict([('ckjit', ck)] + [(f'{p}|{w[0]}', w[1]) for p in PEERS for w in ways[p]]))
    ck_med, ck_min, again = res['ckjit']
    for p in PEERS:
        rec = dict(base, metric=f'{case.base} vs {p}', value=case.flops / ck_med / 1e9, peer=p,
                   ckjit_ms=ck_med, ckjit_min_ms=ck_min, remeasured=again, warmup=ctx.warmup,
                   runs=ctx.runs, l2_flush=bool(ctx.flush_bytes), flush_bytes=ctx.flush_bytes,
                   peer_value=None, peer_name=f'{p} (refused the case)')
        if ways[p]:
            (med, mn, _), label, api_s = min(((res[f'{p}|{w[0]}'], w[0], w[2]) for w in ways[p]),
                                             key=lambda x: x[0][0])
            rec.update(peer_value=case.flops / med / 1e9, peer_name=api_s, peer_ms=med,
                       peer_min_ms=mn)
            rec['varlen_mode' if case.varlen else 'gqa_mode' if case.hq != case.hkv else
                'mode'] = label
        rec['note'] = '; '.join(n for n in notes if n.startswith(p + ':')) or None
        log(f"{rec['metric']}: ckjit {ck_med:.4f} ms, {p} {rec.get('peer_ms', math.nan):.4f} ms")
        emit(rec)


def launch_us(fn, calls):  # host us per call; synchronized between chunks, untimed
    total = 0.0
    for done in range(0, calls, CHUNK):
        t0 = time.perf_counter()
        for _ in range(min(CHUNK, calls - done)):
            fn()
        total += time.perf_counter() - t0
        torch.cuda.synchronize()
    return total / calls * 1e6


def run_launch(ctx, case):
    """Host us per ckjit_attention call against one ckjit_gemm call, alternating."""
    calls, repeats = (2000, 5) if ctx.quick else (20000, 10)
    ctx.gen.manual_seed(99)
    q, k, v = (torch.randn(1, 128, 1, 128, device='cuda', dtype=torch.bfloat16, generator=ctx.gen)
               for _ in range(3))
    o, a = torch.full_like(q, math.nan), torch.ones(128, 128, dtype=torch.bfloat16, device='cuda')
    d, g = torch.full_like(a, math.nan), GemmDesc()
    ctx.lib.ckjit_gemm_desc_init(ctypes.byref(g))
    g.m = g.n = g.k = g.lda = g.ldb = g.ldd = 128  # bf16, row-major: set by desc_init
    g.a, g.b, g.d, g.split_k = a.data_ptr(), a.data_ptr(), d.data_ptr(), 1
    fns = (('attention', ctx.call(ctx.lib.ckjit_attention, make_desc(ctx, case, q, k, v, o))),
           ('gemm', ctx.call(ctx.lib.ckjit_gemm, g)))
    per = {'attention': [], 'gemm': []}
    try:
        for _, fn in fns:
            launch_us(fn, CHUNK)  # warm-up: compiles or loads
        diff, bad = sampled_check(case, [(q[0], k[0], v[0], o[0])])
        if bad or not bool((d == 128).all()):
            return fail_records(case, 'CHECK_FAILED', f'attention: max |diff| {diff:.4g}, {bad} '
                                f'out of tolerance; gemm of ones all 128: {bool((d == 128).all())}')
        for _ in range(repeats):
            for name, fn in fns:
                per[name].append(launch_us(fn, calls))
    except CkjitFailed as e:
        return fail_records(case, *e.args)
    emit({'metric': case.base, 'unit': 'us', 'value': statistics.median(per['attention']),
          'kind': 'attention_launch', 'impl': 'ckjit', 'check': 'ok',
          'api': 'ckjit_attention via ctypes (bf16 b1 h1 s128 d128, no LSE)',
          'peer_value': statistics.median(per['gemm']),
          'peer_name': 'ckjit_gemm via ctypes (bf16 128x128x128, split_k 1)',
          'min_us': min(per['attention']), 'peer_min_us': min(per['gemm']), 'calls': calls,
          'chunk': CHUNK, 'repeats': repeats})


def child(a, indices):
    try:
        ctx = Ctx(a)
    except Exception as e:  # no torch, no GPU, no library
        return print(f'#fatal {type(e).__name__}: {e}'.replace('\n', ' ')[:600]) or 2
    emit({'metric': 'attention settings', 'kind': 'info', 'impl': 'attention', 'value': None,
          'device': torch.cuda.get_device_name(0), 'torch_version': torch.__version__,
          'cudnn_version': torch.backends.cudnn.version(), 'lib': a.lib})
    for i in indices:
        print(f'#start {i}', flush=True)
        try:
            (run_launch if CASES[i].launch else run_case)(ctx, CASES[i])
        except Exception as e:  # out of memory, a CUDA error
            fail_records(CASES[i], 'ERROR', f'{type(e).__name__}: {e}')
        print(f'#done {i}', flush=True)
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:  # a kernel fault lost the context: a new child takes the next cases
            return 3
    return 0


# ---- the parent: children, compile times -----------------------------------------------
def run_children(a, pending, deadline):
    """Cases in a child process, a new one after a crash or hang; records forwarded."""
    args = [sys.executable, os.path.abspath(__file__), '--lib', a.lib] + [
        f for f, on in (('--quick', a.quick), ('--no-flush-l2', a.no_flush_l2),
                        ('--no-lse', a.no_lse)) if on]
    statuses = []
    while pending:
        if deadline - time.time() < 10:
            for i in pending:
                fail_records(CASES[i], 'SKIPPED', 'not started: --budget spent')
            return statuses + ['SKIPPED']
        p = subprocess.Popen(args + ['--child', ','.join(map(str, pending))],
                             stdout=subprocess.PIPE, start_new_session=True)
        buf, current, done, fatal, killed, t_case = b'', None, set(), None, False, time.time()
        while True:
            left = max(min(deadline, t_case + CASE_LIMIT) - time.time(), 0)
            killed = not select.select([p.stdout], [], [], left)[0]
            chunk = b'' if killed else os.read(p.stdout.fileno(), 1 << 16)
            if not chunk:
                if killed:
                    os.killpg(p.pid, signal.SIGKILL)
                break
            *lines, buf = (buf + chunk).split(b'\n')
            for line in (x.decode(errors='replace') for x in lines):
                if line.startswith('#start '):
                    current, t_case = int(line[7:]), time.time()
                elif line.startswith('#done '):
                    current = done.add(int(line[6:]))  # None
                elif line.startswith('#fatal '):
                    fatal = line[7:]
                elif line.startswith('{'):
                    try:
                        statuses.append(json.loads(line).get('status'))
                    except ValueError:
                        log(f'a child line that is not JSON: {line[:200]}')
                        continue
                    print(line, flush=True)
        rc = p.wait()
        if current is not None:
            statuses.append('CHILD_TIMEOUT' if killed else 'CHILD_DIED')
            fail_records(CASES[current], statuses[-1],
                         f'no output for {CASE_LIMIT} s or --budget spent' if killed else
                         f'the child process died (exit {rc}; its stderr is in the log)')
            done.add(current)
        if not done:  # it ended before its first case: do not start it again
            why = fatal or ('no output' if killed else f'exit {rc}')
            note(f'the benchmark child could not start: {why}')
            for i in pending:
                fail_records(CASES[i], 'CHILD_FAILED', why)
            return statuses + ['CHILD_FAILED']
        pending = [i for i in pending if i not in done]
    return statuses


def compile_times(a, timeout):
    tool = a.prewarm or os.path.join(os.path.dirname(a.lib), 'tools', 'ckjit-prewarm')
    if not os.access(tool, os.X_OK):
        return note(f'{tool}: no ckjit-prewarm, no compile times (--prewarm PATH)')
    p = subprocess.run([tool, '--all', '--list', '--json', '--arch', ARCH], capture_output=True,
                       text=True, timeout=60)
    specs = [x['spec'] for x in json.loads(p.stdout) if x['spec'].startswith('attention')]
    if not specs:
        return note('ckjit-prewarm --all --list names no attention spec')
    jobs, cache = os.cpu_count() or 1, tempfile.mkdtemp(prefix='ckjit-attention-compile-')
    try:
        p = subprocess.run([tool, '--json', '--arch', ARCH, '--cache-dir', cache, '-j', str(jobs),
                            '--'] + specs, capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    out = json.loads(p.stdout)
    jobs = out.get('workers', jobs)
    for it in out.get('items', []):
        ok = it.get('result') == 'compiled'
        emit(dict({'metric': f"{COMPILE_NAME} {it['spec']} {it['arch']}", 'unit': 'ms',
                   'value': it.get('ms') if ok else None, 'kind': 'attention_compile',
                   'impl': 'ckjit', 'jobs': jobs}, **{k: it.get(k) for k in (
                       ('spec', 'arch', 'result', 'code_size') if ok else
                       ('spec', 'arch', 'result', 'status', 'error'))}))
    s = out.get('summary', {})
    emit({'metric': f'{COMPILE_NAME} all default attention specs {ARCH}', 'unit': 'ms',
          'value': s.get('wall_ms'), 'kind': 'attention_compile_total', 'impl': 'ckjit',
          'specs': len(specs), 'compiled': s.get('compiled'), 'failed': s.get('failed'),
          'compile_ms': s.get('compile_ms'), 'jobs': jobs,
          'command': f'ckjit-prewarm --json --arch {ARCH} --cache-dir FRESH -j {jobs} SPEC...'})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--lib', default=os.path.join(ROOT, 'build-gpu', 'libckjit.so'))
    ap.add_argument('--prewarm', help='ckjit-prewarm (default: tools/ckjit-prewarm beside --lib)')
    ap.add_argument('--quick', action='store_true', help='fewer warm-up and timed runs')
    ap.add_argument('--only', action='append', metavar='SUBSTRING', help='only the cases whose '
                    'metric contains this (repeatable: "d256", "h32/8", "varlen", "compile", ...)')
    ap.add_argument('--budget', type=float, help='seconds; cases not started by then: SKIPPED')
    for flag, what in (('--no-flush-l2', 'no L2 flush before each run'), ('--no-lse',
                       'ckjit writes no LSE'), ('--check-layout', 'only check the ctypes structs')):
        ap.add_argument(flag, action='store_true', help=what)
    ap.add_argument('--child', help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.lib = os.path.abspath(a.lib)
    if a.child:
        return child(a, [int(i) for i in a.child.split(',')])
    bad, how = layout_check()
    if bad:
        return note(f'the ctypes mirror differs from ckjit.h, nothing run: {"; ".join(bad)}') or 1
    if a.check_layout:
        return print(f'layout ok: {how}') or 0
    log(f'struct layout: {how}')
    t0 = time.time()
    deadline = t0 + a.budget if a.budget else math.inf
    pending = [i for i, c in enumerate(CASES) if not a.only or any(s in c.base for s in a.only)]
    want_compile = not a.only or any(s in COMPILE_NAME for s in a.only)
    if pending and not os.path.exists(a.lib):
        return note(f'{a.lib}: no libckjit (--lib PATH); nothing timed') or 1
    if not pending and not want_compile:
        note(f'no case matches --only {a.only}')
    statuses = run_children(a, pending, deadline - COMPILE_KEEP * want_compile) if pending else []
    if want_compile:
        try:
            if deadline - time.time() < 15:
                note('no time left for the compile measurement (--budget)')
            else:
                compile_times(a, min(deadline - time.time() - 5, 300))
        except Exception as e:  # a timeout, no JSON: the timings above stand
            note(f'no compile times: {type(e).__name__}: {str(e)[:300]}')
    log(f'done in {time.time() - t0:.1f} s')
    return 2 if 'CHECK_FAILED' in statuses else int(
        any(s and s != 'CKJIT_ERROR_UNSUPPORTED' for s in statuses))


if __name__ == '__main__':
    sys.exit(main())
