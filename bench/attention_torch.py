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
import ctypes
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ is not a package
from torch_bench_common import (  # noqa: E402  (the shared ctypes, timing and child runner)
    ATOL, ATTENTION_DESC_LAYOUT, BF16, GEMM_DESC_LAYOUT, MASK_CAUSAL, MASK_NONE, RTOL,
    AttentionDesc, BenchContext, CkjitFailed, GemmDesc, Reporter, Strides, capture, compare,
    exit_status, first_call_ms, import_torch, jnum, layout_check, layout_gate, parse_args,
    run_child, run_children)

ARCH = 'sm_90'
CHUNK = 1000       # launch_us: calls between synchronizations
COMPILE_KEEP = 30  # seconds of --budget kept for the compile measurement (last)
PEERS = ('cudnn', 'flash')
COMPILE_NAME = 'attention compile'
torch = F = None  # imported by the child
REPORT = Reporter('attention_torch.py', 'attention')
log, emit, note = REPORT.log, REPORT.emit, REPORT.note


# ---- ctypes mirrors (torch_bench_common: ckjit_attention_desc, ckjit_gemm_desc) ---------
STRUCTS = {'ckjit_attention_desc': ATTENTION_DESC_LAYOUT, 'ckjit_gemm_desc': GEMM_DESC_LAYOUT}


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
class Ctx(BenchContext):
    def __init__(self, a):
        global torch, F
        torch, F = import_torch()
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.sdpa_kernel, self.backends = sdpa_kernel, {
            'cudnn': SDPBackend.CUDNN_ATTENTION, 'flash': SDPBackend.FLASH_ATTENTION}
        super().__init__(a, (('ckjit_attention', AttentionDesc), ('ckjit_gemm', GemmDesc)))


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
    try:
        first_ms = first_call_ms(ck)
    except CkjitFailed as e:
        return fail_records(case, *e.args)
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


def run_one(ctx, case):
    (run_launch if case.launch else run_case)(ctx, case)


# ---- the parent: compile times (the cases run in children: torch_bench_common) ---------
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
    a = parse_args(__doc__.split('\n')[0], '"d256", "h32/8", "varlen", "compile", ...',
                   lambda ap: ap.add_argument('--prewarm', help='ckjit-prewarm (default: '
                                              'tools/ckjit-prewarm beside --lib)'))
    if a.child:
        return run_child(a, [int(i) for i in a.child.split(',')], Ctx, CASES, run_one,
                         fail_records, REPORT)
    status = layout_gate(a, layout_check(STRUCTS, ['ckjit/ckjit.h'], 'attention',
                                         hand_message_names_last=False), 'ckjit.h', REPORT)
    if status is not None:
        return status
    t0 = time.time()
    deadline = t0 + a.budget if a.budget else math.inf
    pending = [i for i, c in enumerate(CASES) if not a.only or any(s in c.base for s in a.only)]
    want_compile = not a.only or any(s in COMPILE_NAME for s in a.only)
    if pending and not os.path.exists(a.lib):
        return note(f'{a.lib}: no libckjit (--lib PATH); nothing timed') or 1
    if not pending and not want_compile:
        note(f'no case matches --only {a.only}')
    statuses = run_children(a, __file__, CASES, pending, deadline - COMPILE_KEEP * want_compile,
                            fail_records, REPORT) if pending else []
    if want_compile:
        try:
            if deadline - time.time() < 15:
                note('no time left for the compile measurement (--budget)')
            else:
                compile_times(a, min(deadline - time.time() - 5, 300))
        except Exception as e:  # a timeout, no JSON: the timings above stand
            note(f'no compile times: {type(e).__name__}: {str(e)[:300]}')
    log(f'done in {time.time() - t0:.1f} s')
    return exit_status(statuses)


if __name__ == '__main__':
    sys.exit(main())
