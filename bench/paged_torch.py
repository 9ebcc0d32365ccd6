#!/usr/bin/env python3
"""Paged K/V attention (issue 18): ckjit_paged_attention and _kv_append vs copy, cuDNN, dense.

Against the same run's copy bandwidth, torch SDPA's cuDNN backend and ckjit_attention on
the same K/V stored contiguously.

usage: paged_torch.py [--lib PATH] [--quick] [--only SUBSTRING]... [--budget S]
                      [--no-flush-l2] [--no-lse] [--check-layout]
JSONL records on stdout for bench/make_results.py, whose "Paged attention" section of
RESULTS.md says how each number is made.  ckjit runs through ctypes over torch tensors
(.data_ptr(), torch's current stream); K and V live in page pools ([page][slot][head][dim],
ckjit_paged_strides_nhd) whose pages each sequence holds in a shuffled order (a random
permutation of the pool's page ids).  Records:
  paged decode bf16 bB hHQ/HKV skN d128 pageP vs copy|cudnn|dense (GB/s of K/V read)
  paged prefill bf16 bB hHQ/HKV sqM skN d128 pageP vs dense|cudnn|cudnn+gather (TFLOP/s)
  paged append bf16 bB hHKV newT d128 pageP vs copy            (GB/s read + written)
Each case is checked before it is timed (ckjit's output against torch SDPA's math backend
in float32 on sampled sequences; append: the pool bit for bit); a case whose check fails
is not timed ("check": "failed").  Cases run in a child process (a crash or hang costs only
its case).  Exit status 0 when every case was measured or CKJIT_ERROR_UNSUPPORTED, 2 when
a check failed, else 1.
CKJIT_BENCH_DECODE_SPLITS=2,3,...: decode cases also time ckjit (paged and dense) with
CKJIT_ATTENTION_DECODE_SPLITS set to each count, in the same alternating rounds (records:
ckjit_ms_by_splits, dense_ms_by_splits), for A/B of the split rule.
"""
import ctypes
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ is not a package
from paged_cudnn import API_SDPA, cudnn_peer, decode_ways, prefill_ways  # noqa: E402
from torch_bench_common import (  # noqa: E402  (the shared ctypes, timing and child runner)
    ATOL, ATTENTION_DESC_LAYOUT, BF16, I64, INT, FLT, MASK_CAUSAL, MASK_NONE, PTR, RTOL,
    SPIN_CYCLES, STRIDES_LAYOUT, AttentionDesc, BenchContext, CkjitFailed, Reporter, Strides,
    compare, exit_status, first_call_ms, import_torch, jnum, layout_check,
    layout_gate, parse_args, run_child, run_children, status_error, with_env)

ELEM = 2          # bytes of a bf16 element
FP8_E4M3 = 4      # ckjit_dtype of fp8 pages
torch = F = None  # imported by the child
REPORT = Reporter('paged_torch.py', 'paged')
log, emit, note = REPORT.log, REPORT.emit, REPORT.note


# ---- ctypes mirrors of include/ckjit/paged_attention.h (ckjit.h's: torch_bench_common) ---
class PagedStrides(ctypes.Structure):  # ckjit_paged_strides
    _fields_ = [('page', I64), ('slot', I64), ('head', I64), ('dim', I64)]


class PagedKV(ctypes.Structure):  # ckjit_paged_kv
    _fields_ = [('num_pages', I64), ('page_size', I64), ('k_pages', PTR), ('v_pages', PTR),
                ('k_strides', PagedStrides), ('v_strides', PagedStrides), ('block_table', PTR),
                ('max_pages_per_seq', I64), ('seqlens_k', PTR), ('kv_indptr', PTR),
                ('kv_page_indices', PTR), ('kv_last_page_len', PTR), ('error', PTR),
                ('max_seqlen_k', I64), ('page_dtype', INT), ('k_scale', PTR), ('v_scale', PTR),
                ('scale_stride', I64)]


class PagedAttentionDesc(ctypes.Structure):  # ckjit_paged_attention_desc (enums are int)
    _fields_ = [('dtype', INT), ('batch', I64), ('num_heads_q', I64), ('num_heads_kv', I64),
                ('head_dim_qk', I64), ('head_dim_v', I64), ('max_seqlen_q', I64),
                ('cu_seqlens_q', PTR), ('q', PTR), ('q_strides', Strides), ('o', PTR),
                ('o_strides', Strides), ('lse', PTR), ('lse_strides', Strides), ('kv', PagedKV),
                ('softmax_scale', FLT), ('mask', INT), ('window_left', I64),
                ('window_right', I64), ('softcap', FLT)]


class AppendDesc(ctypes.Structure):  # ckjit_paged_kv_append_desc
    _fields_ = [('dtype', INT), ('batch', I64), ('num_heads_kv', I64), ('head_dim_qk', I64),
                ('head_dim_v', I64), ('max_seqlen_new', I64), ('cu_seqlens_new', PTR),
                ('k_new', PTR), ('v_new', PTR), ('k_new_strides', Strides),
                ('v_new_strides', Strides), ('kv', PagedKV)]


# Offsets by hand, LP64 (int/enum/float 4 bytes, int64/pointer 8, aligned to size; the
# stride structs 32, aligned 8):
# paged_kv: num_pages 0, page_size 8, k_pages 16, v_pages 24, k_strides 32, v_strides 64,
# block_table 96, max_pages_per_seq 104, seqlens_k 112, kv_indptr 120, kv_page_indices
# 128, kv_last_page_len 136, error 144, max_seqlen_k 152, page_dtype 160 (+4), k_scale 168,
# v_scale 176, scale_stride 184: sizeof 192.
# paged_attention_desc: dtype 0 (+4), batch 8, num_heads_q 16, num_heads_kv 24,
# head_dim_qk 32, head_dim_v 40, max_seqlen_q 48, cu_seqlens_q 56, q 64, q_strides 72,
# o 104, o_strides 112, lse 144, lse_strides 152, kv 184 (192), softmax_scale 376, mask
# 380, window_left 384, window_right 392, softcap 400 (+4): sizeof 408.
# paged_kv_append_desc: dtype 0 (+4), batch 8, num_heads_kv 16, head_dim_qk 24,
# head_dim_v 32, max_seqlen_new 40, cu_seqlens_new 48, k_new 56, v_new 64, k_new_strides
# 72, v_new_strides 104, kv 136: sizeof 328.
# attention_strides, attention_desc: torch_bench_common.py.
# layout_check() also compares every offset with a C program built on the headers.
STRUCTS = {'ckjit_paged_strides': (PagedStrides, 32, 24),
           'ckjit_attention_strides': STRIDES_LAYOUT,
           'ckjit_paged_kv': (PagedKV, 192, 184),
           'ckjit_paged_attention_desc': (PagedAttentionDesc, 408, 400),
           'ckjit_paged_kv_append_desc': (AppendDesc, 328, 136),
           'ckjit_attention_desc': ATTENTION_DESC_LAYOUT}


# ---- cases and records -----------------------------------------------------------------
def visible_keys(sq, sk):
    """Sum over the sq query rows of the keys each sees under the bottom-right causal
    mask (row i sees keys j <= i + sk - sq): the causal work, exactly."""
    return sum(max(0, min(sk, i + sk - sq + 1)) for i in range(sq))


class Case:
    """op 'decode' (1 query per sequence, no mask: with one query bottom-right causal is
    every key), 'prefill' (sq new queries after sk - sq cached keys, causal bottom-right)
    or 'append' (new tokens' K/V written into the pool; sk: the length after it)."""

    def __init__(self, op, b, hq, hkv, sk, d, page, sq=1, new=0, fp8=False):
        self.op, self.b, self.hq, self.hkv, self.sk, self.d = op, b, hq, hkv, sk, d
        self.page, self.sq, self.new, self.fp8 = page, sq, new, fp8
        elem = 1 if fp8 else ELEM  # fp8 pages: e4m3 bytes (Q and O stay bf16)
        assert sk % page == 0, 'the cases fill whole pages'
        self.pps = sk // page               # pages per sequence
        self.num_pages = b * self.pps        # the pool: every sequence's pages, shuffled
        heads = f'h{hq}' if hq == hkv else f'h{hq}/{hkv}'
        self.unit, self.scale = ('TFLOP/s', 1e9) if op == 'prefill' else ('GB/s', 1e6)
        if op == 'decode':
            self.name = f'b{b} {heads} sk{sk} d{d} page{page}'
            # dense: ckjit_attention on the same keys stored contiguously (bf16 pools only)
            self.peers = ('copy', 'cudnn') + (() if fp8 else ('dense',))
            # K and V of every sequence's keys, once (Q, O and the page table not counted)
            self.amount = b * sk * hkv * d * elem * 2
            self.formula = f'b*sk*hkv*d*{elem} B*2 (K and V read once) = {self.amount}'
        elif op == 'prefill':
            self.name = f'b{b} {heads} sq{sq} sk{sk} d{d} page{page}'
            self.peers = ('dense', 'cudnn', 'cudnn+gather')
            self.amount = b * hq * 4 * d * visible_keys(sq, sk)
            self.formula = (f'sum over the b*sq rows of the keys each sees (j <= i + sk - sq) '
                            f'* 4*d * hq = {self.amount}')
        else:
            self.name = f'b{b} h{hkv} new{new} d{d} page{page}'
            self.peers = ('copy',)
            self.new_bytes = b * new * hkv * d * ELEM * 2       # the new tokens' K and V
            self.amount = 2 * self.new_bytes                      # read once, written once
            self.formula = f'2 * b*new*hkv*d*2 B*2 (new K and V read + written) = {self.amount}'
        self.base = f'paged {op} {"fp8" if fp8 else "bf16"} {self.name}'

    def peer_amount(self, peer):
        """What the peer's rate counts: copy (bytes read + bytes written) of a buffer of
        the K/V byte count for decode (so 2x), of the new tokens' K/V for append (the same
        bytes as ckjit's); the same flops / K/V bytes as ckjit for the others."""
        return 2 * self.amount if (self.op, peer) == ('decode', 'copy') else self.amount

    def rate(self, amount, ms):
        return amount / ms / self.scale


CASES = [Case('decode', 64, 32, 8, 4096, 128, p) for p in (16, 1)]
CASES += [Case('decode', 8, 32, 8, 32768, 128, p) for p in (16, 1)]
CASES += [Case('decode', b, 32, 8, sk, 128, 16, fp8=True) for b, sk in ((64, 4096), (8, 32768))]
CASES += [Case('prefill', 16, 32, 8, 4096, 128, p, sq=2048) for p in (16, 128)]
CASES += [Case('append', 64, 32, 8, 4096, 128, 16, new=n) for n in (1, 2048)]

COPY_NOTE = {
    'decode': 'ckjit GB/s = K+V bytes read (b*sk*hkv*d*2 B*2; Q, O and the page table not '
              'counted) / time; copy GB/s = (bytes read + bytes written) / time of y.copy_(x), '
              'x and y each of that K+V byte count; ratio = the fraction of the bandwidth a '
              'copy reaches',
    'append': 'ckjit GB/s = (new K+V bytes read + the same bytes written into the pool) / '
              'time; copy GB/s = (bytes read + bytes written) / time of y.copy_(x), x and y '
              'each of the new K+V byte count (the same bytes): ratio = copy time / ckjit time'}


def fail_records(case, status, error, extra=None):
    log(f'{case.base}: {status}: {error}')
    for p in case.peers:
        emit(dict(extra or {}, metric=f'{case.base} vs {p}', kind='paged', op=case.op,
                  impl='ckjit', unit=case.unit, value=None, peer=p, peer_value=None,
                  case=case.name, page_size=case.page, status=status, error=error[:600]))


# ---- the child: torch and ckjit in one process ------------------------------------------
class CheckFailed(Exception):
    """args: (what differs,)."""


class Ctx(BenchContext):
    def __init__(self, a):
        global torch, F
        torch, F = import_torch()
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.cudnn = lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
        self.math = lambda: sdpa_kernel(SDPBackend.MATH)
        torch.backends.cuda.matmul.allow_tf32 = False  # the float32 reference stays float32
        super().__init__(a, (('ckjit_paged_attention', PagedAttentionDesc),
                             ('ckjit_paged_kv_append', AppendDesc),
                             ('ckjit_attention', AttentionDesc)))
        lib = self.lib
        lib.ckjit_paged_kv_check.argtypes = [ctypes.POINTER(PagedKV), I64, PTR]
        lib.ckjit_paged_kv_check.restype = INT
        lib.ckjit_paged_strides_nhd.argtypes = [I64, I64, I64]
        lib.ckjit_paged_strides_nhd.restype = PagedStrides  # returned by value
        # A GPU-side wait before each start event: the host enqueues the timed calls while
        # the GPU sleeps, so host launch overhead (ctypes, SDPA dispatch) is not timed.
        self.spin = getattr(torch.cuda, '_sleep', None)


def bshd(t):
    """ckjit_attention_strides of a [b, s, h, d] tensor (any strides)."""
    st = t.stride()
    return Strides(st[0], st[2], st[1], st[3])


def make_pool(ctx, case):
    """K and V [b, sk, hkv, d] contiguous (the dense and cuDNN side), the same keys in
    pools [num_pages, page, hkv, d] at a random permutation of page ids, and the block
    table [b, pages per sequence] (int32) that names them."""
    k, v = (torch.randn(case.b, case.sk, case.hkv, case.d, device='cuda', dtype=torch.bfloat16,
                        generator=ctx.gen) for _ in range(2))
    stored = (k, v)
    if case.fp8:  # per-head scales; the pools hold e4m3(x / scale), the peers the values
        case.scales = [torch.rand(case.hkv, device='cuda', generator=ctx.gen) * 0.01 + 0.02
                       for _ in range(2)]
        stored = [(t.float() / s.view(1, 1, -1, 1)).to(torch.float8_e4m3fn).view(torch.uint8)
                  for t, s in zip((k, v), case.scales)]
        k, v = (dequantize(t, s).to(torch.bfloat16) for t, s in zip(stored, case.scales))
    perm = torch.randperm(case.num_pages, device='cuda', generator=ctx.gen)
    pools = []
    for t in stored:
        pool = torch.empty(case.num_pages, case.page, case.hkv, case.d, device='cuda',
                           dtype=t.dtype)
        pool.view(case.num_pages, -1).index_copy_(0, perm, t.reshape(case.num_pages, -1))
        pools.append(pool)
    table = perm.view(case.b, case.pps).to(torch.int32).contiguous()
    return k, v, pools[0], pools[1], table


def dequantize(t, scale):
    """e4m3 bytes [..., hkv, d] as float32 values times their head's scale."""
    return t.view(torch.float8_e4m3fn).float() * scale.view(-1, 1)


def paged_kv(ctx, case, kpool, vpool, table, seqlens, err):
    kv = PagedKV(num_pages=case.num_pages, page_size=case.page, k_pages=kpool.data_ptr(),
                 v_pages=vpool.data_ptr(), block_table=table.data_ptr(),
                 max_pages_per_seq=case.pps, seqlens_k=seqlens.data_ptr(), error=err.data_ptr())
    st = ctx.lib.ckjit_paged_strides_nhd(case.page, case.hkv, case.d)
    got = (st.page, st.slot, st.head, st.dim)
    if got != kpool.stride() or got != vpool.stride():
        raise CheckFailed(f'ckjit_paged_strides_nhd({case.page}, {case.hkv}, {case.d}) = {got}, '
                          f'the pool tensor\'s strides {kpool.stride()}')
    kv.k_strides = kv.v_strides = st
    if case.fp8:
        kv.page_dtype, kv.scale_stride = FP8_E4M3, 1
        kv.k_scale, kv.v_scale = (s.data_ptr() for s in case.scales)
    return kv


def table_check(ctx, case, kv):
    """ckjit_paged_kv_check of the tables (synchronous): CkjitFailed when it objects."""
    st = ctx.lib.ckjit_paged_kv_check(ctypes.byref(kv), case.b, ctx.stream)
    if st:
        raise CkjitFailed(*status_error(ctx.lib, st))


def reference(ctx, case, q, kpool, vpool, table, seq, rows):
    """Sequence seq's attention for query rows `rows` ([R, hq, d], float32): torch SDPA
    under the math backend in float32 on K/V gathered from the pool through the block
    table (the independent reading of the pages), K/V heads expanded, the bottom-right
    causal mask explicit (prefill)."""
    ids = table[seq].long()
    rows_of = [p[ids].reshape(case.pps * case.page, case.hkv, case.d)[:case.sk] for p in (kpool, vpool)]
    if case.fp8:
        rows_of = [dequantize(t, s) for t, s in zip(rows_of, case.scales)]
    k, v = (t.float().repeat_interleave(case.hq // case.hkv, 1).transpose(0, 1)[None]
            for t in rows_of)
    qf = q[seq, rows].float().transpose(0, 1)[None]  # [1, hq, R, d]
    mask = None
    if case.op == 'prefill':
        mask = torch.arange(case.sk, device=q.device)[None] <= rows[:, None] + case.sk - case.sq
    with ctx.math():
        out = F.scaled_dot_product_attention(qf, k, v, attn_mask=mask, scale=1 / math.sqrt(case.d))
    return out[0].transpose(0, 1)


def sampled(case):
    """(sequences, query rows) the float32 reference covers."""
    dev = 'cuda'
    if case.op == 'decode':
        return (0, case.b // 2, case.b - 1), torch.tensor([0], device=dev)
    n = case.sq
    rows = sorted(set(range(min(64, n))) | set(range(n // 2 - 32, n // 2 + 32)) |
                  set(range(max(0, n - 64), n)))
    return (0, case.b - 1), torch.tensor(rows, device=dev)


class Refs:
    """The float32 references of the sampled sequences and rows; check(o) compares a
    BSHD output [b, sq, hq, d] with them: (max diff, elements out of tolerance)."""

    def __init__(self, ctx, case, q, kpool, vpool, table):
        self.seqs, self.rows = sampled(case)
        self.ref = [reference(ctx, case, q, kpool, vpool, table, s, self.rows) for s in self.seqs]

    def check(self, o):
        worst, bad = 0.0, 0
        for s, r in zip(self.seqs, self.ref):
            w, b = compare(o[s, self.rows], r)
            worst, bad = (max(worst, w) if math.isfinite(worst) else worst), bad + b
        return worst, bad


# ---- the cases ----------------------------------------------------------------------------
def paged_desc(ctx, case, q, o, lse, kv):
    d = PagedAttentionDesc()
    ctx.lib.ckjit_paged_attention_desc_init(ctypes.byref(d))
    d.dtype, d.batch, d.num_heads_q, d.num_heads_kv = BF16, case.b, case.hq, case.hkv
    d.head_dim_qk = d.head_dim_v = case.d
    d.max_seqlen_q = case.sq  # cu_seqlens_q NULL: sq queries per sequence at batch stride
    d.q, d.q_strides, d.o, d.o_strides = q.data_ptr(), bshd(q), o.data_ptr(), bshd(o)
    if lse is not None:  # [b, hq, sq]
        d.lse, d.lse_strides = lse.data_ptr(), Strides(*lse.stride(), 1)
    d.kv = kv
    d.softmax_scale = 1.0 / math.sqrt(case.d)
    d.mask = MASK_CAUSAL if case.op == 'prefill' else MASK_NONE
    return d  # (desc_init left window -1, softcap 0)


def dense_desc(ctx, case, q, k, v, o, lse):
    d = AttentionDesc()
    ctx.lib.ckjit_attention_desc_init(ctypes.byref(d))
    d.dtype, d.batch, d.num_heads_q, d.num_heads_kv = BF16, case.b, case.hq, case.hkv
    d.seqlen_q, d.seqlen_k, d.head_dim_qk, d.head_dim_v = case.sq, case.sk, case.d, case.d
    for name, t in (('q', q), ('k', k), ('v', v), ('o', o)):
        setattr(d, name, t.data_ptr())
        setattr(d, name + '_strides', bshd(t))
    if lse is not None:
        d.lse, d.lse_strides = lse.data_ptr(), Strides(*lse.stride(), 1)
    d.softmax_scale, d.mask = 1.0 / math.sqrt(case.d), MASK_CAUSAL
    return d


def append_desc(ctx, case, knew, vnew, cu, kv):
    """knew, vnew: packed tokens [b * new, hkv, d]; cu: cu_seqlens_new [b + 1]."""
    d = AppendDesc()
    ctx.lib.ckjit_paged_kv_append_desc_init(ctypes.byref(d))
    d.dtype, d.batch, d.num_heads_kv = BF16, case.b, case.hkv
    d.head_dim_qk = d.head_dim_v = case.d
    d.max_seqlen_new, d.cu_seqlens_new = case.new, cu.data_ptr()
    d.k_new, d.v_new = knew.data_ptr(), vnew.data_ptr()
    for name, t in (('k_new', knew), ('v_new', vnew)):  # batch stride unused
        setattr(d, name + '_strides', Strides(0, t.stride(1), t.stride(0), t.stride(2)))
    d.kv = kv
    return d


def first_call(ck, err):
    """The first call (may compile or load), synchronized: its ms; a set kv.error flag is a
    failed check."""
    ms = first_call_ms(ck)
    if err is not None and int(err.item()):
        raise CheckFailed('kv.error was set on tables that are all valid')
    return ms


def records(ctx, case, res, base, peer_keys, peer_names, notes, modes):
    """One record per peer from the timings res; peer_keys[p]: the timing keys of p's
    ways (the fastest is reported)."""
    ck_med, ck_min, again = res['ckjit']
    for p in case.peers:
        rec = dict(base, metric=f'{case.base} vs {p}', peer=p,
                   value=case.rate(case.amount, ck_med), ckjit_ms=ck_med, ckjit_min_ms=ck_min,
                   remeasured=again, peer_value=None, peer_name=peer_names.get(p, p))
        keys = [k for k in peer_keys.get(p, ()) if k in res]
        if keys:
            key = min(keys, key=lambda k: res[k][0])
            med, mn, _ = res[key]
            rec.update(peer_value=case.rate(case.peer_amount(p), med), peer_ms=med, peer_min_ms=mn,
                       peer_name=peer_names.get(key, peer_names.get(p, p)))
            if key in modes:
                rec['mode'] = modes[key]
        if p == 'copy':  # the definition also alone, for make_results.py's table
            rec['definition'] = COPY_NOTE[case.op]
        rec['note'] = '; '.join(([COPY_NOTE[case.op]] if p == 'copy' else []) +
                                notes.get(p, [])) or None
        log(f"{rec['metric']}: ckjit {ck_med:.4f} ms, {p} {rec.get('peer_ms', math.nan):.4f} ms")
        emit(rec)


def base_record(ctx, case, first_ms, check_vs, diffs):
    ref_diff, peer_diff = diffs
    return {'kind': 'paged', 'op': case.op, 'impl': 'ckjit', 'unit': case.unit,
            'case': case.name, 'page_size': case.page, 'batch': case.b, 'heads_q': case.hq,
            'heads_kv': case.hkv, 'seqlen_q': case.sq, 'seqlen_k': case.sk, 'head_dim': case.d,
            'new_tokens': case.new or None, 'pages': case.num_pages, 'page_order': 'shuffled',
            ('flops' if case.op == 'prefill' else 'bytes'): case.amount,
            ('flops_formula' if case.op == 'prefill' else 'bytes_formula'): case.formula,
            'first_call_ms': first_ms, 'check': 'ok', 'check_vs': check_vs,
            'max_abs_diff': jnum(peer_diff), 'ref_max_abs_diff': jnum(ref_diff),
            'tolerance': f'|diff| <= {ATOL} + {RTOL} |ref|' if case.op != 'append' else 'exact',
            'lse': ctx.lse if case.op != 'append' else None, 'warmup': ctx.warmup,
            'runs': ctx.runs, 'group': 1, 'l2_flush': bool(ctx.flush_bytes),
            'flush_bytes': ctx.flush_bytes, 'spin_cycles': SPIN_CYCLES if ctx.spin else 0}


def run_attention(ctx, case):
    """decode and prefill: ckjit_paged_attention against its peers."""
    k, v, kpool, vpool, table = make_pool(ctx, case)
    q = torch.randn(case.b, case.sq, case.hq, case.d, device='cuda', dtype=torch.bfloat16,
                    generator=ctx.gen)
    o = torch.full_like(q, math.nan)
    lse = torch.empty(case.b, case.hq, case.sq, device='cuda', dtype=torch.float32) \
        if ctx.lse else None
    seqlens = torch.full((case.b,), case.sk, device='cuda', dtype=torch.int32)
    err = torch.zeros(1, device='cuda', dtype=torch.int32)
    kv = paged_kv(ctx, case, kpool, vpool, table, seqlens, err)
    table_check(ctx, case, kv)
    desc = paged_desc(ctx, case, q, o, lse, kv)
    ck = ctx.call(ctx.lib.ckjit_paged_attention, desc)
    first_ms = first_call(ck, err)
    refs = Refs(ctx, case, q, kpool, vpool, table)
    ref_diff, ref_bad = refs.check(o)
    scale, notes, fns, keys, names, modes = 1 / math.sqrt(case.d), {}, {'ckjit': ck}, {}, {}, {}
    outs = []  # (what, BSHD output) of the peers that agree with the reference
    if 'dense' in case.peers:
        od = torch.full_like(q, math.nan)
        lsed = torch.empty_like(lse) if lse is not None else None
        dense = ctx.call(ctx.lib.ckjit_attention, dense_desc(ctx, case, q, k, v, od, lsed))
        try:
            dense()
            torch.cuda.synchronize()
            dd, db = refs.check(od)
            if db:
                notes['dense'] = [f'ckjit_attention (dense) differs from the float32 reference '
                                  f'(max |diff| {dd:.4g}, {db} out of tolerance): not timed']
            else:
                fns['dense'], keys['dense'] = dense, ['dense']
                outs.append(('ckjit_attention (dense)', od))
        except CkjitFailed as e:
            notes['dense'] = [f'ckjit_attention (dense): {e.args[0]}: {e.args[1][:300]}']
        names['dense'] = ('ckjit_attention via ctypes on the same K/V stored contiguously '
                          '(BSHD), causal bottom-right')
    if case.op == 'prefill':
        kflat, vflat = kpool.view(case.num_pages, -1), vpool.view(case.num_pages, -1)
        ids = table.view(-1).long()
        kbuf, vbuf = torch.empty_like(k), torch.empty_like(v)

        def gather():  # the pool's pages of every sequence, in table order -> [b, sk, hkv, d]
            torch.index_select(kflat, 0, ids, out=kbuf.view(case.num_pages, -1))
            torch.index_select(vflat, 0, ids, out=vbuf.view(case.num_pages, -1))
            return kbuf, vbuf
        groups = prefill_ways(case, q, scale)
    else:
        gather, groups = None, decode_ways(case, q, scale)
    with ctx.cudnn():
        ways, cnotes = cudnn_peer(ctx, case, groups, k, v, refs, gather)
    if not ways:
        cnotes.insert(0, 'cuDNN ran no way of this case')
    notes['cudnn'] = cnotes
    if case.fp8:
        cnotes.append('fp8 pages: ckjit reads e4m3 K/V with per-head scales; cuDNN reads the same '
                      'dequantized values as bf16 (twice the bytes)')
    if case.op == 'prefill':
        notes['cudnn+gather'] = list(cnotes) + [
            'counts torch.index_select of K and V from the pools into contiguous buffers '
            '(and the K/V expansion where the mode has one) before the cuDNN call']
    for label, fn, gfn, api, out in ways:
        fns[f'cudnn|{label}'] = fn
        keys.setdefault('cudnn', []).append(f'cudnn|{label}')
        names[f'cudnn|{label}'], modes[f'cudnn|{label}'] = api, label
        outs.append((f'cudnn ({label})', out))
        if gfn:
            fns[f'gather|{label}'] = gfn
            keys.setdefault('cudnn+gather', []).append(f'gather|{label}')
            names[f'gather|{label}'] = f'index_select gather of K/V from the pools + {api}'
            modes[f'gather|{label}'] = label
    names.setdefault('cudnn', API_SDPA + ' (ran no way of this case)')
    peer_diff, peer_bad, vs = 0.0, 0, 'no peer ran; '
    if outs:  # every element against the first peer that agreed with the reference
        vs = f'{outs[0][0]} every element, '
        peer_diff, peer_bad = compare(o, outs[0][1])
    base = base_record(ctx, case, first_ms, vs + 'float32 SDPA (math backend) on sampled '
                       'sequences and rows', (ref_diff, peer_diff))
    if 'dense' in fns:  # the same kernels on contiguous K/V
        base['paged_vs_dense_max_abs_diff'] = jnum(compare(o, od)[0])
    outs = refs = ways = out = None  # the peers' outputs are not kept through the timing
    if ref_bad or peer_bad:
        base['check'] = 'failed'
        return fail_records(case, 'CHECK_FAILED', (
            f'ckjit O vs float32 sampled rows: max |diff| {ref_diff:.4g}, {ref_bad} elements out '
            f'of tolerance; vs the peer: max |diff| {peer_diff:.4g}, {peer_bad} out'), base)
    if case.op == 'decode':
        x = torch.randn(case.amount // ELEM, device='cuda', dtype=torch.bfloat16, generator=ctx.gen)
        y = torch.empty_like(x)
        fns['copy'], keys['copy'] = (lambda: y.copy_(x)), ['copy']
        names['copy'] = f'torch y.copy_(x), x and y bf16 of {case.amount} bytes each (same run)'
    splits = split_variants(case, fns)
    with ctx.cudnn():  # SDPA's backend choice only; ckjit and the copy are not affected
        res = ctx.measure(fns)
    for side in ('ckjit', 'dense'):
        by = {n: res[f'{side} splits={n}'][0] for n in splits if f'{side} splits={n}' in res}
        if by:
            base[f'{side}_ms_by_splits'] = by
            log(f'{case.base}: {side} as planned {res[side][0]:.4f} ms; by split count: ' +
                ', '.join(f'{n}: {ms:.4f}' for n, ms in by.items()))
    records(ctx, case, res, base, keys, names, notes, modes)


def split_variants(case, fns):
    """The counts of CKJIT_BENCH_DECODE_SPLITS (decode cases): ckjit and dense with
    CKJIT_ATTENTION_DECODE_SPLITS at each, added to fns."""
    env = os.environ.get('CKJIT_BENCH_DECODE_SPLITS', '')
    counts = [int(x) for x in env.split(',') if x.strip()] if case.op == 'decode' else []
    for n in counts:
        for side in ('ckjit', 'dense'):
            if side in fns:
                fns[f'{side} splits={n}'] = with_env('CKJIT_ATTENTION_DECODE_SPLITS', str(n),
                                                     fns[side])
    return counts


def run_append(ctx, case):
    """ckjit_paged_kv_append of `new` tokens per sequence (positions sk - new .. sk - 1)
    against a copy of the same bytes."""
    _, _, kpool, vpool, table = make_pool(ctx, case)
    n = case.b * case.new
    knew, vnew = (torch.randn(n, case.hkv, case.d, device='cuda', dtype=torch.bfloat16,
                              generator=ctx.gen) for _ in range(2))
    cu = (torch.arange(case.b + 1, device='cuda', dtype=torch.int32) * case.new).contiguous()
    seqlens = torch.full((case.b,), case.sk, device='cuda', dtype=torch.int32)
    err = torch.zeros(1, device='cuda', dtype=torch.int32)
    kv = paged_kv(ctx, case, kpool, vpool, table, seqlens, err)
    table_check(ctx, case, kv)
    d = append_desc(ctx, case, knew, vnew, cu, kv)
    # The expected pools: the new tokens in their slots, every other slot as it was.
    pos = torch.arange(case.sk - case.new, case.sk, device='cuda')
    pages, slots = table[:, pos // case.page].long(), (pos % case.page)[None]
    want = []
    for pool, new in ((kpool, knew), (vpool, vnew)):
        w = pool.clone()
        w[pages, slots] = new.view(case.b, case.new, case.hkv, case.d)
        want.append(w)
    ck = ctx.call(ctx.lib.ckjit_paged_kv_append, d)
    first_ms = first_call(ck, err)
    # (slot, head) rows that differ from the expected pools, K and V
    bad = [0 if torch.equal(p, w) else int((p != w).any(-1).sum())
           for p, w in zip((kpool, vpool), want)]
    want = None
    base = base_record(ctx, case, first_ms, 'every slot of both pools bit for bit: the new '
                       'tokens in theirs, the others unchanged', (0.0, 0.0))
    base['group'] = 20 if case.new == 1 else 1
    if any(bad):
        base['check'] = 'failed'
        return fail_records(case, 'CHECK_FAILED', f'(slot, head) rows that differ from the '
                            f'expected pool: K {bad[0]}, V {bad[1]}', base)
    x = torch.randn(case.new_bytes // ELEM, device='cuda', dtype=torch.bfloat16, generator=ctx.gen)
    y = torch.empty_like(x)
    # 1 token per sequence moves 256 KiB: groups of 20 calls per event pair (such data
    # stays in L2 anyway) instead of one.
    res = ctx.measure({'ckjit': ck, 'copy': lambda: y.copy_(x)}, group=base['group'])
    names = {'copy': f'torch y.copy_(x), x and y bf16 of {case.new_bytes} bytes each (same run)'}
    records(ctx, case, res, base, {'copy': ['copy']}, names, {}, {})


def run_case(ctx, case):
    ctx.gen.manual_seed(1800 + CASES.index(case))
    try:
        (run_append if case.op == 'append' else run_attention)(ctx, case)
    except CkjitFailed as e:
        fail_records(case, *e.args)
    except CheckFailed as e:
        fail_records(case, 'CHECK_FAILED', e.args[0], {'check': 'failed'})


def main():
    a = parse_args(__doc__.split('\n')[0],
                   '"decode", "prefill", "append", "page1 ", "sk32768", ...')
    if a.child:
        return run_child(a, [int(i) for i in a.child.split(',')], Ctx, CASES, run_case,
                         fail_records, REPORT)
    status = layout_gate(a, layout_check(STRUCTS, ['ckjit/ckjit.h', 'ckjit/paged_attention.h'],
                                         'paged'), 'the headers', REPORT)
    if status is not None:
        return status
    t0 = time.time()
    deadline = t0 + a.budget if a.budget else math.inf
    # A case matches on any of its records' metrics (so "vs cudnn" selects cases too).
    pending = [i for i, c in enumerate(CASES) if not a.only or any(
        s in f'{c.base} vs {p}' for s in a.only for p in c.peers)]
    if not pending:
        note(f'no case matches --only {a.only}')
        return 0
    if not os.path.exists(a.lib):
        return note(f'{a.lib}: no libckjit (--lib PATH); nothing timed') or 1
    statuses = run_children(a, __file__, CASES, pending, deadline, fail_records, REPORT)
    log(f'done in {time.time() - t0:.1f} s')
    return exit_status(statuses)


if __name__ == '__main__':
    sys.exit(main())
