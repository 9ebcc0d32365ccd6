#!/usr/bin/env python3
"""Merges bench_ckjit and peers.py JSONL output into bench/results.json and
bench/RESULTS.md.

usage: make_results.py --ckjit CKJIT.jsonl [--ckjit ...] --peers PEERS.jsonl [--peers ...]
                       [--results bench/results.json] [--md bench/RESULTS.md]
                       [--card NAME] [--command CMD] [--date DATE]

results.json is a list of {"metric", "card", "ckjit", "peer", "peer_name",
"unit", "ratio", "run"} ("run": the date and command of the run that
measured it; RESULTS.md lists the runs behind its records).  `ratio` says how many times better ckjit is: peer/ckjit for
times (us, ms), ckjit/peer for rates (GB/s); null without a peer.  Records of
an existing results.json whose metric is not re-measured are kept (merged by
metric name); RESULTS.md is rewritten from the merged list.

Row-wise ops (kind "rows": bench_rows and `peers.py --only rows`) give
"OP bf16 RxC vs torch" (GB/s; the same bytes on both sides, so the ratio is
torch time / ckjit time), "OP bf16 RxC vs copy" (ckjit GB/s / the same run's
torch.clone GB/s at that shape: the fraction of copy bandwidth) and
"topk_softmax bf16 TxE kK vs torch" (us; ratio torch / ckjit).  These records
may also carry "note" (why ckjit or torch has no number, or a failed result
check) and "bytes_formula"; a case whose op failed is written with "ckjit":
null and its note, replacing an older number.

GEMM (kind "gemm": bench_gemm and `peers.py --only gemm`) gives "gemm DTYPE
SHAPE VARIANT vs PEER" in TFLOP/s (ratio ckjit / peer = peer time / ckjit
time): SHAPE is m x n x k ("grouped8" for the grouped case, whose problems
are in "problems"), VARIANT rr/rc/cr/cc (a_order b_order), bias_gelu or
batchN; PEER "cublas" (torch.matmul / torch.bmm), "torch unfused" (matmul,
+ bias, gelu: bias_gelu), "torch loop" (a Python loop of torch.matmul:
grouped) or "cupy" (cupy.matmul).  A ckjit record whose result check is not
"ok" counts as no number; a ratio is refused (peer kept, ratio null, a note)
when the two sides' "flops" or "l2_flush" differ.

Attention (bench/attention_torch.py, which measures both sides in one
process and writes ckjit's "value" and the peer's "peer_value" in one record)
gives "attention bf16 CASE vs cudnn|flash" (TFLOP/s, ratio ckjit / peer; a
record whose check is not "ok" has no ckjit number; "details" keeps the ms of
each side and how torch ran the case; "target" / "target_met": issue 17's
>= 1.0x cuDNN, >= 1.8x flash, >= 700 TFLOP/s for d256 non-causal), "attention
launch host time ... vs ckjit_gemm ..." (us, ratio gemm / attention) and
"attention compile SPEC ARCH" (ms, no peer; a run with "attention compile all
default attention specs ARCH" retires the rows of specs it did not compile).

Paged attention (bench/paged_torch.py, kind "paged", both sides in one record
as attention's) gives "paged decode bf16 CASE vs copy|cudnn|dense" (GB/s of K/V
read; vs copy: ckjit's K/V bytes per second / the same run's copy bandwidth
counted as bytes read + written, the fraction of copy), "paged prefill bf16
CASE vs dense|cudnn|cudnn+gather" (TFLOP/s of the exact causal work, ratio =
peer time / ckjit time) and "paged append bf16 CASE vs copy" (GB/s read +
written, ratio = copy time / ckjit time); a record whose check is not "ok"
has no ckjit number; "details" keeps each side's ms, the byte or flop count
and how torch ran the case; a "vs copy" record keeps its bandwidth
"definition" (also in its note).

FP8 GEMM (bench/fp8_torch.py, kind "gemm_fp8", both sides in one record as
attention's) gives "gemm fp8 MxNxK tensor|rowwise vs scaled_mm" (TFLOP/s of
ckjit_gemm_fp8 against torch._scaled_mm on the same e4m3 inputs and scales,
ratio ckjit / peer = peer time / ckjit time), "gemm fp8 MxNxK blockwise"
(1x128 / 128x128 block scales; no peer, ratio null), "gemm fp8 MxNxK blockwise
vs scaled_mm rowwise" (the peer is torch's row-wise GEMM at that shape, the
issue's reference for block scaling) and, where torch takes block scales, "gemm
fp8 MxNxK blockwise vs scaled_mm blockwise".  A record whose check is not "ok"
has no ckjit number; "details" keeps each side's ms, the shape, scaling, torch
version and the peer's kernels; "target" / "target_met": >= 1.0x scaled_mm for
tensor and rowwise, blockwise >= 0.95x row-wise and >= 1400 TFLOP/s at
4096x7168x16384 (target_met is worked out here again from the record's
"target_ratio" / "target_tflops" and the numbers kept).

Fused MoE (bench/fused_moe_torch.py, kind "fused_moe", both sides in one record
as attention's) gives "fused_moe bf16 TN EN kN HN IN vs torch loop|dense gemm"
(TFLOP/s of ckjit_fused_moe, 2*T*k*H*2I + 2*T*k*I*H; the peers: a torch loop over
the experts, and two dense torch.matmul of the same flops; ratio = peer time / ckjit
time), "fused_moe fp8 [rowwise] TN ... vs bf16" (FP8 weights, block or row scales,
against ckjit_fused_moe with the bf16 weights: ratio = bf16 time / fp8 time) and
"fused_moe decode TN ... vs copy" (GB/s of the weights of the experts used, against
the same run's copy bandwidth counted as bytes read + written; its "definition" is
kept).  A record whose check is not "ok" has no ckjit number; "details" keeps each
side's ms and the case.  (ckjit_moe_sort's record is bench/moe_fp8_torch.py's
"moe_sort ... vs torch stable sort", kind "host_time".)

Host time measured on both sides in one process (kind "host_time":
bench/multi_gpu.py's "two gpu launch host time vs one gpu" and
bench/python_host_time.py's "python OP host time vs torch") carries
"value" (ckjit, us) and "peer_value"; ratio = peer / ckjit.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

# Lower is better for these (a count: compiles, to be minimised): ratio = peer / ckjit.
TIME_UNITS = {'ns', 'us', 'ms', 's', 'count'}
RATE_UNITS = {'GB/s', 'GiB/s', 'TB/s', 'TFLOP/s', 'GFLOP/s'}


def log(msg):
    print(f'make_results.py: {msg}', file=sys.stderr, flush=True)


def read_jsonl(path):
    recs = []
    if not path:
        return recs
    if not os.path.exists(path):
        log(f'{path}: missing, ignored')
        return recs
    with open(path, encoding='utf-8', errors='replace') as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line.startswith('{'):
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                log(f'{path}:{n}: not JSON ({e}), ignored')
                continue
            if isinstance(rec, dict) and 'metric' in rec:
                recs.append(rec)
    return recs


def ratio_of(ckjit, peer, unit):
    if ckjit is None or peer is None:
        return None
    try:
        ckjit, peer = float(ckjit), float(peer)
    except (TypeError, ValueError):
        return None
    if ckjit <= 0 or peer <= 0:
        return None
    if unit in TIME_UNITS:
        return round(peer / ckjit, 3)
    if unit in RATE_UNITS:
        return round(ckjit / peer, 3)
    return None


def rnd(v):
    if v is None:
        return None
    v = float(v)
    if abs(v) >= 100:
        return round(v, 1)
    if abs(v) >= 1:
        return round(v, 3)
    return round(v, 5)


def record(metric, card, ckjit, peer, peer_name, unit):
    return {'metric': metric, 'card': card, 'ckjit': rnd(ckjit),
            'peer': rnd(peer), 'peer_name': peer_name, 'unit': unit,
            'ratio': ratio_of(ckjit, peer, unit)}


def find(recs, **kw):
    """The last record whose fields equal kw (later lines win)."""
    hit = None
    for r in recs:
        if all(r.get(k) == v for k, v in kw.items()) and r.get('value') is not None:
            hit = r
    return hit


def card_name(recs, override):
    if override:
        return override
    for impl in ('torch', 'ckjit'):
        r = next((r for r in recs if r.get('kind') == 'info' and r.get('metric') == 'device'
                  and r.get('impl') == impl and r.get('name')), None)
        if r:
            return r['name']
    try:
        out = subprocess.run(['nvidia-smi', '--query-gpu=name', '--format=csv,noheader'],
                             capture_output=True, text=True, timeout=20)
        name = out.stdout.strip().splitlines()[0].strip() if out.returncode == 0 else ''
        if name:
            return name
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    return 'unknown GPU'


PEER_LABEL = {'raw': 'raw driver', 'cupy': 'cupy', 'triton': 'triton', 'torch': 'torch'}


ROW_OPS = ('softmax', 'layernorm', 'rmsnorm', 'sum', 'rmsnorm_quant', 'smoothquant')
ROWS_METRIC = re.compile(r'^(%s) (\S+) (\d+x\d+) vs (torch|copy)$' % '|'.join(ROW_OPS))
TOPK_METRIC = re.compile(r'^topk_softmax (\S+) (\d+x\d+) k(\d+) vs torch$')
GEMM_METRIC = re.compile(r'^gemm (\S+) (\S+) (\S+(?: streamk)?) vs (.+)$')
ATTN_METRIC = re.compile(r'^attention (\S+) (.+) vs (cudnn|flash)$')
ATTN_KINDS = ('attention', 'attention_launch', 'attention_compile', 'attention_compile_total')
PAGED_METRIC = re.compile(r'^paged (decode|prefill|append) (\S+) (.+) '
                          r'vs (copy|dense|cudnn|cudnn\+gather)$')
FP8_METRIC = re.compile(r'^gemm fp8 (\d+x\d+x\d+) (tensor|rowwise|blockwise)'
                        r'((?: moe (?:contiguous|masked) E\d+ top\d+)?)'
                        r'(?: vs (scaled_mm(?: rowwise| blockwise)?|dense ckjit|dense scaled_mm))?$')
FUSED_MOE_METRIC = re.compile(r'^fused_moe (bf16|fp8|fp8 rowwise|decode) '
                              r'(T\d+ E\d+ k\d+ H\d+ I\d+(?: S\d+x\d+)?) '
                              r'vs (torch loop|dense gemm|bf16|copy)$')
ATTN_RATIO_TARGETS = {'cudnn': 1.0, 'flash': 1.8}  # issue 17
ATTN_TFLOPS_TARGET = 700.0                         # issue 17: d256, non-causal


def first_line(text, limit=160):
    text = str(text or '').strip().splitlines()
    text = text[0] if text else ''
    return text if len(text) <= limit else text[:limit - 3] + '...'


def why_missing(rec, who):
    """A short reason for a row-wise record without a value."""
    if rec is None:
        return f'no {who} record'
    status = rec.get('status') or 'no value'
    err = first_line(rec.get('error'))
    return f'{who}: {status}' + (f': {err}' if err else '')


def same_bytes(a, b):
    try:
        return abs(float(a) - float(b)) < 0.5
    except (TypeError, ValueError):
        return False


def build_rows(ck, peers, card):
    """Comparisons of the row-wise ops (kind "rows")."""
    out = []

    def key(r):
        return (r.get('op'), r.get('dtype'), r.get('shape'), r.get('k') or 0)

    def last_by_key(recs, impl):
        d = {}
        for r in recs:
            if r.get('kind') == 'rows' and r.get('impl') == impl:
                d[key(r)] = r  # later lines win, with or without a value
        return d

    cks = last_by_key(ck, 'ckjit')
    torch = last_by_key(peers, 'torch')
    # The "vs copy" reference: torch.clone at the same shape in the rows
    # section, else the bandwidth section's (8192x8192).
    clone = {(k[1], k[2]): r for k, r in torch.items()
             if k[0] == 'copy' and r.get('value') is not None}
    for r in peers:
        if r.get('kind') == 'bandwidth' and r.get('impl') == 'torch' and r.get('op') == 'copy' \
                and r.get('value') is not None:
            clone.setdefault((r.get('dtype'), r.get('shape')), r)

    for k, c in cks.items():
        op, dtype, shape, kk = k
        if op not in ROW_OPS and op != 'topk_softmax':
            log(f'rows: unknown op {op!r} ignored')
            continue
        t = torch.get(k)
        cv = c.get('value')
        tv = t.get('value') if t else None
        notes = []
        if cv is None:
            notes.append(why_missing(c, 'ckjit'))
        elif c.get('check') not in (None, 'ok'):
            notes.append(f"ckjit result check: {c.get('check')}")
        if tv is None:
            notes.append(why_missing(t, 'torch'))
        ratio_ok = True
        if cv is not None and tv is not None and not same_bytes(c.get('bytes'), t.get('bytes')):
            ratio_ok = False
            notes.append(f"bytes differ (ckjit {c.get('bytes')}, torch {t.get('bytes')}): "
                         'fix rows_bytes() in bench/peers.py')
            log(f'rows {op} {shape}: {notes[-1]}')
        if op == 'topk_softmax':
            metric = f'{op} {dtype} {shape} k{kk} vs torch'
        else:
            metric = f'{op} {dtype} {shape} vs torch'
        rec = record(metric, card, cv, tv if ratio_ok else None,
                     t.get('api', 'torch') if t else 'torch', c.get('unit'))
        if not ratio_ok:
            rec['peer'] = rnd(tv)
        if notes:
            rec['note'] = '; '.join(notes)
        if c.get('bytes_formula'):
            rec['bytes_formula'] = c['bytes_formula']
        out.append(rec)
        if op == 'topk_softmax':
            continue
        cl = clone.get((dtype, shape))
        if cl is None:
            log(f'no torch.clone at {dtype} {shape}: "{op} {dtype} {shape} vs copy" left out')
            continue
        rec = record(f'{op} {dtype} {shape} vs copy', card, cv, cl['value'],
                     f"{cl.get('api', 'torch.clone')} (same run)", c.get('unit'))
        cnotes = [n for n in notes if n.startswith('ckjit')]
        if cnotes:
            rec['note'] = '; '.join(cnotes)
        if c.get('bytes_formula'):
            rec['bytes_formula'] = c['bytes_formula']
        out.append(rec)
    for k, t in torch.items():
        if k[0] != 'copy' and k not in cks:
            log(f'rows: torch measured {k} but ckjit has no record of it: left out')
    return out


def gemm_peer_label(shape, variant):
    """What the torch peer of a GEMM case is, as its metric says it."""
    if variant == 'bias_gelu':
        return 'torch unfused'
    if str(shape).startswith('grouped'):
        return 'torch loop'
    return 'cublas'


UNSTEADY = 1.25  # bench_gemm.c and peers.py measure such a series twice


def unsteady(r):
    """Whether a GEMM timing's median is still over UNSTEADY x its min."""
    med, mn = (r or {}).get('median_ms'), (r or {}).get('min_ms')
    return bool(med and mn and med > UNSTEADY * mn)


def build_gemm(ck, peers, card):
    """Comparisons of the GEMM cases (kind "gemm")."""
    out = []

    def key(r):
        return (r.get('dtype'), r.get('shape'), r.get('variant'))

    def last_by_key(recs, impl):
        d = {}
        for r in recs:
            if r.get('kind') == 'gemm' and r.get('impl') == impl:
                d[key(r)] = r  # later lines win, with or without a value
        return d

    cks = last_by_key(ck, 'ckjit')
    sides = {'torch': last_by_key(peers, 'torch'), 'cupy': last_by_key(peers, 'cupy')}
    for k, c in cks.items():
        dtype, shape, variant = k
        cv = c.get('value')
        notes = []
        if cv is None:
            notes.append(why_missing(c, 'ckjit'))
        elif c.get('check') != 'ok':  # a number that did not pass its check is no number
            notes.append(f"ckjit result check: {c.get('check')}: its number is not used")
            cv = None
        if not c.get('l2_flush', True):
            notes.append('no L2 flush between runs')
        for impl in ('torch', 'cupy'):
            p = sides[impl].get(k)
            if impl == 'cupy' and p is None:
                continue  # only some cases have a cupy peer
            label = gemm_peer_label(shape, variant) if impl == 'torch' else 'cupy'
            pv = p.get('value') if p else None
            pnotes = list(notes)
            if pv is None:
                pnotes.append(why_missing(p, impl))
            ratio_ok = True
            if cv is not None and pv is not None:
                if not same_bytes(c.get('flops'), p.get('flops')):
                    ratio_ok = False
                    pnotes.append(f"flops differ (ckjit {c.get('flops')}, {impl} "
                                  f"{p.get('flops')}): fix the cases in bench/peers.py")
                if bool(c.get('l2_flush', True)) != bool(p.get('l2_flush', True)):
                    ratio_ok = False
                    pnotes.append(f"L2 flush differs (ckjit {c.get('l2_flush')}, {impl} "
                                  f"{p.get('l2_flush')}): pass --no-flush-l2 to both or neither")
                if not ratio_ok:
                    log(f'gemm {dtype} {shape} {variant} vs {label}: {pnotes[-1]}')
            if p and p.get('note'):
                pnotes.append(f"{impl}: {first_line(p['note'], 200)}")
            for side, r in (('ckjit', c), (impl, p)):
                if unsteady(r):
                    pnotes.append(f"{side} timing unsteady even after a second series (median "
                                  f"{r['median_ms']:.4g} ms, min {r['min_ms']:.4g} ms): the ratio "
                                  "is doubtful")
            rec = record(f'gemm {dtype} {shape} {variant} vs {label}', card, cv,
                         pv if ratio_ok else None, p.get('api', impl) if p else impl, 'TFLOP/s')
            if not ratio_ok:
                rec['peer'] = rnd(pv)
            rec['l2_flush'] = bool(c.get('l2_flush', True))
            if c.get('problems'):
                rec['problems'] = c['problems']
            if pnotes:
                rec['note'] = '; '.join(pnotes)
            out.append(rec)
    for impl, recs in sides.items():
        for k, p in recs.items():
            if k not in cks:
                log(f'gemm: {impl} measured {k} but ckjit has no record of it: left out')
    return out


def attention_target(metric, peer, ckjit, ratio):
    """Issue 17's targets for an attention comparison, and whether this run
    meets them all (None: no number to tell)."""
    parts, met = [], []
    if peer in ATTN_RATIO_TARGETS:
        parts.append(f'>= {ATTN_RATIO_TARGETS[peer]:g}x {peer}')
        met.append(None if ratio is None else ratio >= ATTN_RATIO_TARGETS[peer])
    if ' d256 ' in metric + ' ' and ' causal' not in metric:
        parts.append(f'>= {ATTN_TFLOPS_TARGET:g} TFLOP/s')
        met.append(None if ckjit is None else ckjit >= ATTN_TFLOPS_TARGET)
    return '; '.join(parts), (None if None in met else all(met))


def build_attention(recs, card):
    """The attention records (bench/attention_torch.py): each carries both
    sides, so they are taken as they are; later lines win."""
    last = {}
    for r in recs:
        if r.get('kind') in ATTN_KINDS and r.get('metric'):
            last[r['metric']] = r
    out = []
    for metric, r in last.items():
        kind, cv, notes = r['kind'], r.get('value'), []
        if r.get('status'):
            notes.append(f"ckjit: {r['status']}" +
                         (f": {first_line(r['error'], 200)}" if r.get('error') else ''))
        if kind in ('attention', 'attention_launch') and cv is not None and r.get('check') != 'ok':
            notes.append(f"ckjit result check: {r.get('check')}: its number is not used")
            cv = None
        if r.get('note'):
            notes.append(first_line(r['note'], 300))
        for side in ('ckjit', 'peer'):
            med, mn = r.get(f'{side}_ms'), r.get(f'{side}_min_ms')
            if med and mn and med > UNSTEADY * mn:
                notes.append(f'{side} timing unsteady even after a second series (median '
                             f'{med:.4g} ms, min {mn:.4g} ms): the ratio is doubtful')
        rec = record(metric, card, cv, r.get('peer_value'), r.get('peer_name'), r.get('unit'))
        keys = {'attention': ('ckjit_ms', 'peer_ms', 'ckjit_min_ms', 'peer_min_ms', 'flops',
                              'mode', 'gqa_mode', 'varlen_mode', 'lengths', 'lse', 'max_abs_diff',
                              'ref_max_abs_diff', 'check_vs', 'first_call_ms', 'runs', 'warmup',
                              'remeasured', 'l2_flush'),
                'attention_launch': ('api', 'min_us', 'peer_min_us', 'calls', 'chunk',
                                     'repeats'),
                'attention_compile': ('result', 'code_size', 'jobs'),
                'attention_compile_total': ('specs', 'compiled', 'failed', 'compile_ms', 'jobs',
                                            'command')}[kind]
        details = {k: rnd(r[k]) if isinstance(r[k], float) else r[k] for k in keys
                   if r.get(k) is not None}
        if details:
            rec['details'] = details
        if kind in ('attention', 'attention_launch'):
            rec['check'] = r.get('check')
        if kind == 'attention':
            rec['target'], rec['target_met'] = attention_target(metric, r.get('peer'),
                                                                rec['ckjit'], rec['ratio'])
        if notes:
            rec['note'] = '; '.join(notes)
        out.append(rec)
    return out


def build_paged(recs, card):
    """The paged attention records (bench/paged_torch.py): as attention's, each
    carries both sides; later lines win."""
    last = {}
    for r in recs:
        if r.get('kind') == 'paged' and r.get('metric'):
            last[r['metric']] = r
    out = []
    for metric, r in last.items():
        cv, notes = r.get('value'), []
        if r.get('status'):
            notes.append(f"ckjit: {r['status']}" +
                         (f": {first_line(r['error'], 200)}" if r.get('error') else ''))
        if cv is not None and r.get('check') != 'ok':
            notes.append(f"ckjit result check: {r.get('check')}: its number is not used")
            cv = None
        if r.get('note'):
            notes.append(str(r['note'])[:1200])  # a "vs copy" note opens with its definition
        for side in ('ckjit', 'peer'):
            med, mn = r.get(f'{side}_ms'), r.get(f'{side}_min_ms')
            if med and mn and med > UNSTEADY * mn:
                notes.append(f'{side} timing unsteady even after a second series (median '
                             f'{med:.4g} ms, min {mn:.4g} ms): the ratio is doubtful')
        rec = record(metric, card, cv, r.get('peer_value'), r.get('peer_name'), r.get('unit'))
        keys = ('ckjit_ms', 'peer_ms', 'ckjit_min_ms', 'peer_min_ms', 'mode', 'bytes',
                'bytes_formula', 'flops', 'flops_formula', 'page_size', 'pages', 'page_order',
                'group', 'lse', 'check_vs', 'max_abs_diff', 'ref_max_abs_diff',
                'paged_vs_dense_max_abs_diff', 'first_call_ms', 'runs', 'warmup', 'remeasured',
                'l2_flush')
        details = {k: rnd(r[k]) if isinstance(r[k], float) else r[k] for k in keys
                   if r.get(k) is not None}
        if details:
            rec['details'] = details
        rec['check'] = r.get('check')
        if r.get('definition'):
            rec['definition'] = r['definition']
        if notes:
            rec['note'] = '; '.join(notes)
        out.append(rec)
    return out


def build_fp8(recs, card, kind='gemm_fp8'):
    """The FP8 GEMM records (bench/fp8_torch.py, kind "gemm_fp8"; build_fused_moe's
    kind "fused_moe" alike): as attention's, each carries both sides ("details" a dict,
    a "vs copy" record its "definition"); later lines win."""
    last = {}
    for r in recs:
        if r.get('kind') == kind and r.get('metric'):
            last[r['metric']] = r
    out = []
    for metric, r in last.items():
        cv, pv, notes = r.get('value'), r.get('peer_value'), []
        d = r['details'] if isinstance(r.get('details'), dict) else {}
        if r.get('status'):
            notes.append(f"ckjit: {r['status']}" +
                         (f": {first_line(r['error'], 200)}" if r.get('error') else ''))
        if cv is not None and r.get('check') != 'ok':
            notes.append(f"ckjit result check: {r.get('check')}: its number is not used")
            cv = None
        if r.get('note'):
            notes.append(str(r['note'])[:600])
        for side in ('ckjit', 'peer'):
            med, mn = d.get(f'{side}_ms'), d.get(f'{side}_min_ms')
            if med and mn and med > UNSTEADY * mn:
                notes.append(f'{side} timing unsteady (median {med:.4g} ms, min {mn:.4g} ms): '
                             'the ratio is doubtful')
        rec = record(metric, r.get('card') or card, cv, pv, r.get('peer_name'),
                     r.get('unit', 'TFLOP/s'))
        if d:
            rec['details'] = {k: rnd(v) if isinstance(v, float) else v for k, v in d.items()}
        rec['check'] = r.get('check')
        met = []  # from the unrounded numbers, with a failed check's number dropped
        if r.get('target_ratio') is not None:
            met.append(None if rec['ratio'] is None else float(cv) / float(pv) >= r['target_ratio'])
        if r.get('target_tflops') is not None:
            met.append(None if cv is None else float(cv) >= r['target_tflops'])
        if r.get('target'):
            rec['target'] = r['target']
            rec['target_met'] = None if not met or None in met else all(met)
        if r.get('definition'):
            rec['definition'] = r['definition']
        if notes:
            rec['note'] = '; '.join(notes)
        out.append(rec)
    return out


def build_fused_moe(recs, card):
    """The fused MoE records (bench/fused_moe_torch.py, kind "fused_moe"): as the FP8
    GEMM's, each carries both sides; later lines win."""
    return build_fp8(recs, card, 'fused_moe')


def build_host_time(recs, card):
    """Host-time comparisons that measure both sides in one process (kind
    "host_time": bench/multi_gpu.py, bench/python_host_time.py): "value" is
    ckjit's microseconds, "peer_value" the peer's; later lines win."""
    last = {}
    for r in recs:
        if r.get('kind') == 'host_time' and r.get('metric'):
            last[r['metric']] = r
    out = []
    for metric, r in last.items():
        cv = r.get('value')
        if cv is not None and r.get('check', 'ok') != 'ok':
            cv = None
        rec = record(metric, card, cv, r.get('peer_value'), r.get('peer_name'), r.get('unit', 'us'))
        if isinstance(r.get('details'), dict):
            rec['details'] = r['details']
        if r.get('note'):
            rec['note'] = str(r['note'])[:1200]
        out.append(rec)
    return out


def build(ck, peers, card):
    """The comparison records of this run, in a stable order."""
    out = []
    allrecs = ck + peers

    # Bandwidth: ckjit vs torch (same op, dtype, shape), and vs copy (the same
    # run's torch.clone bandwidth) for the elementwise ops.
    clone = {}
    for r in peers:
        if r.get('kind') == 'bandwidth' and r.get('impl') == 'torch' and r.get('op') == 'copy':
            clone[r.get('dtype')] = r
    for r in ck:
        if r.get('kind') != 'bandwidth' or r.get('impl') != 'ckjit' or r.get('value') is None:
            continue
        op, dtype, shape, unit = r.get('op'), r.get('dtype'), r.get('shape'), r.get('unit')
        base = f'{op} {dtype} {shape}'
        p = find(peers, kind='bandwidth', impl='torch', op=op, dtype=dtype, shape=shape)
        if p:
            out.append(record(f'{base} vs torch', card, r['value'], p['value'],
                              p.get('api', 'torch'), unit))
        else:
            log(f'no torch peer for {base}: comparison left out')
        c = clone.get(dtype)
        if op not in ('copy', 'transpose') and c and c.get('shape') == shape:
            out.append(record(f'{base} vs copy', card, r['value'], c['value'],
                              f"{c.get('api', 'torch.clone')} (same run)", unit))

    # Row-wise ops: softmax, norms, row sum, quantization, topk-softmax.
    out += build_rows(ck, peers, card)

    # GEMM: ckjit_gemm vs torch.matmul (cuBLAS) and friends.
    out += build_gemm(ck, peers, card)

    # Attention: ckjit_attention vs cuDNN and FlashAttention-2, its host time,
    # the compile time of its default specs.
    out += build_attention(ck + peers, card)

    # Paged attention: ckjit_paged_attention vs copy, cuDNN and dense ckjit_attention;
    # ckjit_paged_kv_append vs copy.
    out += build_paged(ck + peers, card)
    # FP8 GEMM: ckjit_gemm_fp8 vs torch._scaled_mm (tensor, row-wise, block-wise scales).
    out += build_fp8(ck + peers, card)
    # Fused MoE: ckjit_fused_moe vs a torch loop, dense GEMMs, its bf16 self (FP8), copy.
    out += build_fused_moe(ck + peers, card)
    out += build_host_time(ck + peers, card)

    # Launch host time: ckjit vs the raw driver, CuPy and Triton.
    lk = find(ck, kind='launch', impl='ckjit')
    if lk:
        for impl in ('raw', 'cupy', 'triton'):
            p = find(allrecs, kind='launch', impl=impl)
            if p and p.get('unit') == lk.get('unit'):
                out.append(record(f'launch host time vs {PEER_LABEL[impl]}', card, lk['value'],
                                  p['value'], p.get('api', impl), lk['unit']))
            else:
                log(f'no {impl} launch measurement: "launch host time vs {PEER_LABEL[impl]}" '
                    'left out')

    # GEMM launch host time: ckjit_gemm vs torch.matmul, shape by shape.
    for lk in ck:
        if lk.get('kind') != 'launch_gemm':
            continue
        p = find(peers, kind='launch_gemm', impl='torch', shape=lk.get('shape'))
        base = f"launch host time gemm {lk.get('dtype')} {lk.get('shape')}"
        if p and p.get('unit') == lk.get('unit'):
            out.append(record(f'{base} vs torch', card, lk['value'], p['value'],
                              p.get('api', 'torch'), lk['unit']))
        else:
            log(f'no torch launch measurement: "{base} vs torch" left out')

    # First call in a fresh process with the kernel in the disk cache.
    fk = find(ck, kind='first_call', impl='ckjit')
    if fk:
        for impl in ('cupy', 'triton'):
            p = find(peers, kind='first_call', impl=impl)
            if p and p.get('unit') == fk.get('unit'):
                out.append(record(f'first call from disk cache vs {impl}', card, fk['value'],
                                  p['value'], f'{impl} (fresh process, disk cache)',
                                  fk['unit']))
            else:
                log(f'no {impl} first-call measurement: comparison left out')

    # ckjit-only numbers (peer null).  (bench_ckjit before "complete" said
    # only in a note that its cold compile stopped at the time budget.)
    cold_stopped = any(n.get('kind') == 'note' and 'cold compile stopped' in str(n.get('note'))
                       for n in ck)
    for kind in ('first_call', 'first_call_init', 'first_call_compile', 'cold_compile',
                 'cold_compile_total'):
        for r in ck:
            if r.get('kind') == kind and r.get('impl', 'ckjit') == 'ckjit' \
                    and r.get('value') is not None:
                metric = r['metric']
                if kind == 'first_call':
                    metric = 'first call from disk cache'
                elif kind == 'first_call_init':
                    metric = 'first call incl. device init'
                elif kind == 'first_call_compile':
                    metric = 'first call with cold compile'
                elif kind == 'cold_compile_total' and (r.get('complete') is False or (
                        r.get('complete') is None and cold_stopped)):
                    # Stopped at its time budget: neither "all" nor a reason
                    # to retire the rows of the specs it did not reach.
                    metric = metric.replace('cold compile all default specs',
                                            f"cold compile of the first {r.get('specs')} default "
                                            "specs (time budget)")
                out.append(record(metric, card, r['value'], None, None, r.get('unit')))
    # Host-side tool numbers (prewarm scaling, verify): their own "card".
    for r in ck:
        if r.get('kind') == 'tool' and r.get('value') is not None:
            out.append(record(r['metric'], r.get('card', card), r['value'], None, None,
                              r.get('unit')))
    return out


def merge(old, new):
    """The old records with the new ones in place.  A run that compiled every
    default spec for an arch ("cold compile all default specs ARCH") drops
    that arch's per-spec cold-compile rows it did not produce: specs that are
    no longer defaults must not linger beside the current ones.  Likewise
    "attention compile all default attention specs ARCH" for the "attention
    compile SPEC ARCH" rows."""
    new_metrics = {r.get('metric') for r in new}
    full = {prefix: {str(m).rsplit(' ', 1)[-1] for m in new_metrics
                     if str(m).startswith(total)}
            for prefix, total in (('cold compile ', 'cold compile all default specs '),
                                  ('attention compile ',
                                   'attention compile all default attention specs '))}

    def retired(r):
        m = str(r.get('metric', ''))
        return m not in new_metrics and any(m.startswith(prefix) and m.rsplit(' ', 1)[-1] in archs
                                            for prefix, archs in full.items())

    merged = [r for r in old if not retired(r)]
    index = {r.get('metric'): i for i, r in enumerate(merged)}
    for r in new:
        i = index.get(r['metric'])
        if i is None:
            index[r['metric']] = len(merged)
            merged.append(r)
        else:
            merged[i] = r
    return merged


def fmt(v):
    if v is None:
        return '—'
    if isinstance(v, float):
        return f'{v:g}' if abs(v) < 1e6 else f'{v:.4g}'
    return str(v)


def md_cell(s):
    return str(s).replace('|', '\\|')


def rows_md(rows):
    """The RESULTS.md sections of the row-wise ops, from results.json records."""
    if not rows:
        return []
    table = {}   # (op, dtype, shape) -> {'torch': rec, 'copy': rec}
    topk = []
    formulas = {}
    for r in rows:
        m = ROWS_METRIC.match(r['metric'])
        if m:
            op, dtype, shape, vs = m.groups()
            table.setdefault((op, dtype, shape), {})[vs] = r
            if r.get('bytes_formula'):
                formulas[op] = r['bytes_formula']
            continue
        m = TOPK_METRIC.match(r['metric'])
        if m:
            topk.append((m.group(2), int(m.group(3)), r))
            if r.get('bytes_formula'):
                formulas['topk_softmax'] = r['bytes_formula']
    lines = []
    if table:
        lines += ['', '## Row-wise ops: softmax, norms, row sum, rowwise int8 quant', '',
                  'bf16 input, bf16 output (int8 + f32 row scales for the quant ops); medians of '
                  'per-call event timings, the same warm-up and runs for ckjit '
                  '(`bench_rows`) and torch (`peers.py --only rows`). GB/s = bytes below / '
                  'median time, the same bytes for ckjit and torch, so `vs torch` = torch '
                  'time / ckjit time (> 1: ckjit faster; for the quant ops torch is the unfused '
                  'sequence). `fraction of copy` = ckjit GB/s / the same run\'s torch.clone '
                  'GB/s at that shape (2*R*C*e bytes; target >= 0.9). Each timed call is '
                  'launched onto an idle stream, so small cases (16x65536: 4 MB, which also '
                  'stays in L2 between calls) measure launch latency as much as bandwidth; '
                  'compare those with torch at the same shape.', '',
                  '| op | shape | card | ckjit GB/s | torch GB/s | vs torch | fraction of copy '
                  '| torch.clone GB/s | torch | note |',
                  '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |']
        order = {op: i for i, op in enumerate(ROW_OPS)}
        keys = sorted(table, key=lambda k: (order.get(k[0], 99), list(table).index(k)))
        for k in keys:
            vt, vc = table[k].get('torch'), table[k].get('copy')
            any_r = vt or vc
            notes = []
            for r in (vt, vc):
                if r and r.get('note') and r['note'] not in notes:
                    notes.append(r['note'])
            cells = [k[0], f'{k[1]} {k[2]}', any_r.get('card'),
                     fmt(any_r.get('ckjit')),
                     fmt(vt.get('peer')) if vt else '—',
                     fmt(vt.get('ratio')) if vt else '—',
                     fmt(vc.get('ratio')) if vc else '—',
                     fmt(vc.get('peer')) if vc else '—',
                     vt.get('peer_name') if vt else '—',
                     '; '.join(notes)]
            lines.append('| ' + ' | '.join(md_cell(c) for c in cells) + ' |')
    if topk:
        lines += ['', '## MoE gating: topk-softmax', '',
                  'bf16 logits, f32 weights, i32 indices (torch: i64), renormalize = 1; median '
                  'us per call; `vs torch` = torch time / ckjit time (> 1: ckjit faster).', '',
                  '| tokens x experts | k | card | ckjit us | torch us | vs torch | torch | note |',
                  '| --- | ---: | --- | ---: | ---: | ---: | --- | --- |']
        for shape, k, r in topk:
            cells = [shape, k, r.get('card'), fmt(r.get('ckjit')), fmt(r.get('peer')),
                     fmt(r.get('ratio')), r.get('peer_name'), r.get('note') or '']
            lines.append('| ' + ' | '.join(md_cell(c) for c in cells) + ' |')
    if formulas:
        lines += ['', 'Bytes read + written (R rows, C cols, e = 2 bytes; T tokens, E experts; '
                  'from rows_bytes() in bench/bench_rows.c):', '']
        for op in ROW_OPS + ('topk_softmax',):
            if op in formulas:
                lines.append(f'- {op}: {md_cell(formulas[op])}')
    return lines


def gemm_md(recs):
    """The RESULTS.md section of the GEMM cases, from results.json records."""
    if not recs:
        return []
    lines = ['', '## GEMM', '',
             'A and B in the dtype (tf32: f32 in and out, tf32 tensor cores allowed on both '
             'sides; f32: not allowed), D in the same dtype, f32 accumulation. Shape m x n x k; '
             'rr/rc/cr/cc = the orders of A and B (r row-major, c column-major; torch gets a '
             'column-major operand as a `.t()` view); bias_gelu = rr with a per-column bias and '
             'gelu_tanh (ckjit: one fused call; torch: matmul, add and gelu as three kernels); '
             'batchN = strided batch (torch.bmm); "rr streamk" = rr with split_k = '
             'CKJIT_GEMM_STREAM_K (Stream-K forced; the plain rr rows are the automatic '
             'choice); grouped8 = the 8 problems listed below in one '
             '`ckjit_gemm_grouped` launch vs a Python loop of torch.matmul. TFLOP/s = '
             '2*m*n*k*batch (grouped: summed) / median time, the same flops for both sides, so '
             '`ratio` = peer time / ckjit time (> 1: ckjit faster). Timing (`bench_gemm`, '
             '`peers.py --only gemm`): warm-up calls, then the median of per-call CUDA-event '
             'timings (50 runs), each call alone and synchronized, with a max(2 x L2, 256 MiB) '
             'buffer overwritten before each run (cold L2) unless the note says otherwise. '
             'ckjit posts a number only after 256 sampled outputs matched a host f64 '
             'reference.', '',
             '| op | shape | card | ckjit TFLOP/s | peer TFLOP/s | ratio | peer | note |',
             '| --- | --- | --- | ---: | ---: | ---: | --- | --- |']
    problems = None
    for r in recs:
        m = GEMM_METRIC.match(r['metric'])
        dtype, shape, variant, vs = m.groups()
        if r.get('problems'):
            problems = r['problems']
        cells = [f'{dtype} {variant}', shape, r.get('card'), fmt(r.get('ckjit')),
                 fmt(r.get('peer')), fmt(r.get('ratio')), f"{vs}: {r.get('peer_name')}",
                 r.get('note') or '']
        lines.append('| ' + ' | '.join(md_cell(c) for c in cells) + ' |')
    if problems:
        lines += ['', f"grouped8 problems (m x n x k, row-major): "
                      f"{md_cell(problems.replace(',', ', '))}."]
    return lines


def attention_md(recs):
    """The RESULTS.md section of the attention records."""
    if not recs:
        return []
    cmp_rows, other = [], []
    for r in recs:
        (cmp_rows if ATTN_METRIC.match(r['metric']) else other).append(r)
    lines = ['', '## Attention', '',
             'Fused attention forward (`ckjit_attention`), bf16, BSHD tensors (q: [b, s, h, d]), '
             'softmax scale 1/sqrt(d), ckjit also writing the LSE; `bench/attention_torch.py` '
             'calls ckjit through ctypes over torch tensors on torch\'s current stream and, on '
             'the same inputs and stream, `F.scaled_dot_product_attention` on `.transpose(1, 2)` '
             'views under `sdpa_kernel(SDPBackend.CUDNN_ATTENTION)` ("cudnn") and '
             '`sdpa_kernel(SDPBackend.FLASH_ATTENTION)` ("flash", FlashAttention-2). Timing: '
             'warm-up, then runs alternating ckjit, cudnn, flash, ckjit, ... (50), each call '
             'alone between two CUDA events and synchronized, a max(2 x L2, 256 MiB) buffer '
             'overwritten before each (cold L2); medians (a series whose median is over 1.25 x '
             'its min is measured again). TFLOP/s = 4*b*h*sq*sk*d / time, halved for causal '
             '(varlen: summed over the sequences), the same flops for both sides, so ratio = '
             'peer time / ckjit time (> 1: ckjit faster). GQA (h32/8): torch with '
             'enable_gqa=True, or with K/V expanded before timing where the backend refuses it '
             '(the mode is in "details"). varlen16: 16 sequences of 100..8000 tokens (fixed '
             'seed), ckjit with cu_seqlens, torch as a Python loop of per-sequence calls. '
             'Before timing, ckjit\'s O is checked against cuDNN\'s (flash\'s where cuDNN '
             'refuses) and a float64 reference on sampled rows, |diff| <= 2e-2 + 1e-2 |ref|; '
             'a case that fails posts no number. Targets (issue 17, not asserted): >= 1.0x '
             'cuDNN, >= 1.8x flash, >= 700 TFLOP/s at d256 non-causal.', '',
             '| case | vs | card | ckjit TFLOP/s | peer TFLOP/s | ratio | ckjit ms | peer ms '
             '| target | peer | note |',
             '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |']
    for r in cmp_rows:
        dtype, case, vs = ATTN_METRIC.match(r['metric']).groups()
        d = r.get('details') or {}
        met = {True: 'met', False: 'not met'}.get(r.get('target_met'), '?')
        cells = [f'{dtype} {case}', vs, r.get('card'), fmt(r.get('ckjit')), fmt(r.get('peer')),
                 fmt(r.get('ratio')), fmt(rnd(d.get('ckjit_ms'))), fmt(rnd(d.get('peer_ms'))),
                 f"{r.get('target')}: {met}" if r.get('target') else '',
                 r.get('peer_name') or '', r.get('note') or '']
        lines.append('| ' + ' | '.join(md_cell(c) for c in cells) + ' |')
    if other:
        lines += ['', 'Host time of one call (us, a loop of calls synchronized every 1000, '
                  'ratio = ckjit_gemm / ckjit_attention) and compile time of each default '
                  'attention spec (ms, `ckjit-prewarm --json --arch sm_90` into a fresh cache '
                  'directory, one worker per core; the total is the wall time).', '',
                  '| metric | card | ckjit | peer | unit | ratio | note |',
                  '| --- | --- | ---: | ---: | --- | ---: | --- |']
        for r in other:
            lines.append('| ' + ' | '.join(md_cell(fmt(r.get(k))) if k != 'note' else
                                           md_cell(r.get('note') or '') for k in
                                           ('metric', 'card', 'ckjit', 'peer', 'unit', 'ratio',
                                            'note')) + ' |')
    return lines


def paged_md(recs):
    """The RESULTS.md section of the paged attention records."""
    if not recs:
        return []
    lines = ['', '## Paged attention', '',
             'Attention over a paged K/V cache (`ckjit_paged_attention`) and appending to it '
             '(`ckjit_paged_kv_append`), bf16, d128, GQA 32/8 (h32/8: 32 query heads, 8 K/V '
             'heads); `bench/paged_torch.py` calls ckjit through ctypes over torch tensors on '
             'torch\'s current stream and runs its peers in the same process, on the same inputs '
             'and stream. K and V live in page pools [page][slot][head][dim] '
             '(`ckjit_paged_strides_nhd`), each sequence\'s pages at a random permutation of the '
             'pool\'s page ids (padded block table). Timing: warm-up, then runs alternating ckjit '
             'and each peer (50), each group of calls (1; 20 for new1) between two CUDA events, '
             'after a max(2 x L2, 256 MiB) buffer is overwritten (cold L2) and a ~0.5 ms GPU '
             'sleep (host launch overhead is not timed); medians per call (a series whose '
             'median is over 1.25 x its min is measured again).', '',
             '- **decode** (1 query per sequence over its sk cached keys; ckjit also writes the '
             'LSE): GB/s = K and V bytes read, b*sk*hkv*d*2 B*2 (Q, O and the page table not '
             'counted) / time; `paged decode fp8`: the pools hold fp8 e4m3 with per-head f32 '
             'scales (kv.page_dtype), 1 byte an element, and cuDNN reads the same dequantized '
             'values as bf16 (twice the bytes). `vs copy`: the peer is the same run\'s torch `y.copy_(x)`, x and '
             'y each of that K+V byte count, its GB/s counted as (bytes read + bytes written) / '
             'time, so the ratio is the fraction of the bandwidth a copy reaches. `vs cudnn`: '
             '`F.scaled_dot_product_attention` under `sdpa_kernel(SDPBackend.CUDNN_ATTENTION)` '
             'on the same K/V stored contiguously (BSHD, `.transpose(1, 2)` views), '
             'enable_gqa=True (K/V expanded before timing where cuDNN refuses it; "mode" in '
             'details), the same bytes counted: ratio = cuDNN time / ckjit time. `vs dense` '
             '(bf16 pools): `ckjit_attention` (the same decode kernel without pages) on those '
             'contiguous K/V, the same bytes counted: ratio = dense time / paged time.',
             '- **prefill** (sq new queries per sequence after sk - sq cached keys, causal '
             'bottom-right): TFLOP/s = the exact causal work, sum over query rows of the keys '
             'each sees * 4*d*hq, / time, the same flops for every side (ratio = peer time / '
             'ckjit time). `vs dense`: `ckjit_attention` on the same K/V stored contiguously. '
             '`vs cudnn`: torch\'s cuDNN path takes is_causal as top-left only, so the faster '
             'of an additive bottom-right attn_mask (cuDNN then computes every key of every '
             'row) and two calls of the cuDNN op, the cached prefix without a mask and the new '
             'keys causal, merged by their LSEs ("mode" in details). `vs cudnn+gather`: the '
             'same plus `torch.index_select` of K and V from the pools into contiguous buffers '
             'inside the timed call.',
             '- **append** (new1: one token per sequence, a decode step; new2048: a prefill): '
             'GB/s = (new K and V bytes read + the same bytes written into the pool) / time; '
             '`vs copy`: `y.copy_(x)` of the new K+V bytes, (bytes read + written) / time: '
             'ratio = copy time / ckjit time.', '',
             'Before timing, ckjit\'s O is checked against torch SDPA\'s math backend in float32 '
             'on sampled sequences and rows (|diff| <= 2e-2 + 1e-2 |ref|) and against the first '
             'peer that agreed with that reference, every element; the tables must pass '
             '`ckjit_paged_kv_check` and leave kv.error 0; append: both pools bit for bit. A '
             'case that fails posts no number; a peer way that fails is not timed (note).', '',
             '| case | vs | card | ckjit | peer | unit | ratio | ckjit ms | peer ms | peer '
             '| note |',
             '| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | --- | --- |']
    for r in recs:
        op, dtype, case, vs = PAGED_METRIC.match(r['metric']).groups()
        d = r.get('details') or {}
        note = str(r.get('note') or '')
        if r.get('definition'):  # said above
            note = note.replace(r['definition'], '').strip('; ')
        peer = r.get('peer_name') or ''
        if d.get('mode'):
            peer += f" (mode: {d['mode']})"
        cells = [f'{op} {dtype} {case}', vs, r.get('card'), fmt(r.get('ckjit')),
                 fmt(r.get('peer')), r.get('unit'), fmt(r.get('ratio')),
                 fmt(rnd(d.get('ckjit_ms'))), fmt(rnd(d.get('peer_ms'))), peer, note]
        lines.append('| ' + ' | '.join(md_cell(c) for c in cells) + ' |')
    return lines


def fp8_md(recs):
    """The RESULTS.md section of the FP8 GEMM records."""
    if not recs:
        return []
    lines = ['', '## FP8 GEMM', '',
             '`ckjit_gemm_fp8` against `torch._scaled_mm` (`bench/fp8_torch.py`: ckjit through '
             'ctypes over torch tensors, on torch\'s current stream, the same inputs and scales '
             'for both): A [m, k] and B [k, n] float8_e4m3fn (random normal values), B '
             'column-major (a `.t()` view of a row-major [n, k] tensor, K-major as the FP8 tensor '
             'cores read it), D bf16, f32 scales: one per tensor (tensor), per row of A and '
             'column of B (rowwise), DeepSeek-style 1x128 blocks of A and 128x128 blocks of B '
             '(blockwise), use_fast_accum=False on the torch side. TFLOP/s = 2*m*n*k / median '
             'time, the same flops for both sides, so ratio = peer time / ckjit time (> 1: ckjit '
             'faster). Timing: warm-up, then rounds alternating ckjit and torch, each a loop of '
             'calls after a ~0.5 ms GPU sleep (launch overhead not timed): with the L2 flush '
             '(the default) every call between its own CUDA events after a max(2 x L2, 256 MiB) '
             'buffer is overwritten, else the events around the whole loop. `blockwise vs '
             'scaled_mm rowwise`: torch has no like-for-like peer before its DeepSeek-style '
             'block scaling (cuBLASLt 12.9, sm_90), so the reference is its row-wise GEMM at '
             'the same shape (target >= 0.95x). Torch may serve row-wise scaling with its own '
             'CUTLASS kernel rather than cuBLASLt: the kernels it ran are in details.'
             'peer_kernels. Before timing, ckjit\'s D is checked against an f32 matmul of the '
             'dequantized inputs on the first and last 256 rows and (tensor, rowwise) against '
             'torch every element, |diff| <= 2e-2 x the row\'s max |ref|; a case that fails '
             'posts no number.', '',
             '| shape | scaling | vs | card | ckjit TFLOP/s | peer TFLOP/s | ratio | ckjit ms '
             '| peer ms | target | check | peer | note |',
             '| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- |']
    for r in recs:
        shape, scaling, moe, vs = FP8_METRIC.match(r['metric']).groups()
        scaling += moe  # grouped: 'blockwise moe contiguous E64 top8' (bench/moe_fp8_torch.py)
        d = r.get('details') or {}
        met = {True: 'met', False: 'not met'}.get(r.get('target_met'), '?')
        cells = [shape, scaling, vs or '—', r.get('card'), fmt(r.get('ckjit')),
                 fmt(r.get('peer')), fmt(r.get('ratio')), fmt(rnd(d.get('ckjit_ms'))),
                 fmt(rnd(d.get('peer_ms'))), f"{r.get('target')}: {met}" if r.get('target')
                 else '', first_line(r.get('check') or '', 120), r.get('peer_name') or '',
                 r.get('note') or '']
        lines.append('| ' + ' | '.join(md_cell(c) for c in cells) + ' |')
    return lines


def fused_moe_md(recs):
    """The RESULTS.md section of the fused MoE records."""
    if not recs:
        return []
    lines = ['', '## Fused MoE', '',
             '`ckjit_fused_moe` (`bench/fused_moe_torch.py`: ckjit through ctypes over torch '
             'tensors, on torch\'s current stream, the same inputs for every side): a '
             'DeepSeek-like expert MLP, T tokens routed to the top-k of E experts (top-k of '
             'random normal logits, '
             'distinct experts; softmax of those k logits as the f32 routing weights), hidden H, '
             'inter I, SiLU, x and y bf16, w_gate_up [E][2I][H] and w_down [E][H][I]. TFLOP/s = '
             '(2*T*k*H*2I + 2*T*k*I*H) / median time, the same flops for every side, so ratio = '
             'peer time / ckjit time. `vs torch loop`: the straightforward PyTorch layer (argsort '
             'of the ids, the per-expert counts to the host once, then per expert: index_select, '
             'matmul, silu(gate) * up, matmul, times the routing weight, index_add_), its host '
             'synchronization timed. `vs dense gemm`: torch.matmul of [T*k, H] x [H, 2I] and '
             '[T*k, I] x [I, H] into preallocated outputs (no routing, no gather). `fp8 [rowwise] '
             'vs bf16`: e4m3 weights with 128x128 block scales (rowwise: one per output channel), '
             'the activations quantized by ckjit, against the same call with the bf16 weights: '
             'ratio = bf16 time / fp8 time. `decode vs copy`: GB/s = bytes of both matrices of the '
             'experts that received tokens / time, against the same run\'s `y.copy_(x)` counted '
             'as bytes read + written (the fraction of copy bandwidth). `S1xN`: the layer with '
             'one shared expert of inter N, its flops counted on every side, against the dense '
             'GEMMs plus the shared expert\'s two. Timing: rounds alternating '
             'the sides, each call between its own CUDA events after a max(2 x L2, 256 MiB) buffer '
             'is overwritten, medians. Before timing, ckjit\'s y is checked against the torch '
             'loop (FP8: on the dequantized weights): ||diff|| / ||ref|| < 2e-2 (bf16), < 6e-2 '
             '(fp8); a case that fails posts no number.', '',
             '| case | weights | vs | card | ckjit | peer | unit | ratio | ckjit ms | peer ms '
             '| check | peer | note |',
             '| --- | --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | --- | --- | --- |']
    for r in recs:
        weights, case, vs = FUSED_MOE_METRIC.match(r['metric']).groups()
        d = r.get('details') or {}
        note = str(r.get('note') or '')
        if r.get('definition'):  # said above
            note = note.replace(r['definition'], '').strip('; ')
        cells = [case, 'bf16 (decode)' if weights == 'decode' else weights, vs, r.get('card'),
                 fmt(r.get('ckjit')), fmt(r.get('peer')), r.get('unit'), fmt(r.get('ratio')),
                 fmt(rnd(d.get('ckjit_ms'))), fmt(rnd(d.get('peer_ms'))),
                 first_line(r.get('check') or '', 120), r.get('peer_name') or '', note]
        lines.append('| ' + ' | '.join(md_cell(c) for c in cells) + ' |')
    return lines


def section_of(r):
    """Which table of RESULTS.md a record goes to."""
    m = str(r.get('metric', ''))
    if FP8_METRIC.match(m):  # before GEMM_METRIC, which its names also match
        return 'gemm fp8'
    if FUSED_MOE_METRIC.match(m):
        return 'fused moe'
    if m.startswith('attention '):
        return 'attention'
    if PAGED_METRIC.match(m):
        return 'paged'
    if m.startswith('cold compile'):
        return 'cold compile'
    if ROWS_METRIC.match(m) or TOPK_METRIC.match(m):
        return 'row ops'
    if GEMM_METRIC.match(m):
        return 'gemm'
    return 'ops, launch and tools'


def runs_md(results):
    """One line per run whose records the tables show (newest first): its
    date and command, and how many records of each table it left."""
    runs = {}
    for r in results:
        counts, section = runs.setdefault(r.get('run') or '', {}), section_of(r)
        counts[section] = counts.get(section, 0) + 1
    lines = ['- Runs behind these records (newest first):']
    for run in sorted(runs, reverse=True):
        what = ', '.join(f'{n} {sec}' for sec, n in sorted(runs[run].items()))
        if run:
            date, _, command = run.partition(' | ')
            lines.append(f'  - {date}: `{command}`: {what}')
        else:
            lines.append(f'  - earlier runs (before the run of each record was kept): {what}')
    return lines


def write_md(path, results, card, date, notes, info):
    lines = ['# ckjit benchmark results', '',
             f'- Date: {date}',
             f'- Card: {card}']
    for k, v in info:
        lines.append(f'- {k}: {v}')
    lines += runs_md(results)
    lines += ['',
              '`ratio` = how many times better ckjit is: peer/ckjit for times, ckjit/peer '
              'for rates (GB/s, bytes read + written); > 1 means ckjit wins. Records of earlier '
              'runs that were not re-measured are kept; their card is in the card column.', '',
              '| metric | card | ckjit | peer | peer name | unit | ratio |',
              '| --- | --- | ---: | ---: | --- | --- | ---: |']
    cold = []
    rows = []
    gemm = []
    attn = []
    paged = []
    fp8 = []
    fused = []
    for r in results:
        section = section_of(r)
        if section != 'ops, launch and tools':
            {'cold compile': cold, 'row ops': rows, 'gemm': gemm,
             'attention': attn, 'paged': paged, 'gemm fp8': fp8,
             'fused moe': fused}[section].append(r)
            continue
        lines.append('| ' + ' | '.join(md_cell(fmt(r.get(k))) for k in
                                       ('metric', 'card', 'ckjit', 'peer', 'peer_name', 'unit',
                                        'ratio')) + ' |')
    lines += rows_md(rows)
    lines += gemm_md(gemm)
    lines += fp8_md(fp8)
    lines += fused_moe_md(fused)
    lines += attention_md(attn)
    lines += paged_md(paged)
    if cold:
        lines += ['', '## Cold compile (empty cache, per spec)', '',
                  'The first compile of a run includes loading and initializing the runtime '
                  'compiler.', '',
                  '| metric | card | ckjit | unit |', '| --- | --- | ---: | --- |']
        for r in cold:
            lines.append('| ' + ' | '.join(md_cell(fmt(r.get(k))) for k in
                                           ('metric', 'card', 'ckjit', 'unit')) + ' |')
    if notes:
        lines += ['', '## Notes from this run', '']
        lines += [f'- {md_cell(n)}' for n in notes]
    lines.append('')
    with open(path + '.tmp', 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines))
    os.replace(path + '.tmp', path)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ckjit', action='append', default=[],
                    help='bench_ckjit / bench_rows / bench_gemm JSONL output (repeatable)')
    ap.add_argument('--peers', action='append', default=[],
                    help='peers.py JSONL output (repeatable)')
    ap.add_argument('--results', default=os.path.join(here, 'results.json'))
    ap.add_argument('--md', default=os.path.join(here, 'RESULTS.md'))
    ap.add_argument('--card', help='card name (default: from the JSONL, else nvidia-smi)')
    ap.add_argument('--command', default='bash scripts/gpu-check.sh',
                    help='the command that produced the numbers (for RESULTS.md)')
    ap.add_argument('--date', help='when the numbers were measured (default: now, UTC)')
    a = ap.parse_args()

    ck = [r for path in a.ckjit for r in read_jsonl(path)]
    peers = [r for path in a.peers for r in read_jsonl(path)]
    card = card_name(peers + ck, a.card)
    new = build(ck, peers, card)
    date = a.date or datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    for r in new:  # which run measured it, for RESULTS.md's list of runs
        r['run'] = f'{date} | {a.command}'

    old = []
    if os.path.exists(a.results):
        try:
            with open(a.results, encoding='utf-8') as f:
                old = json.load(f)
            if not isinstance(old, list):
                log(f'{a.results}: not a list, replaced')
                old = []
        except (OSError, json.JSONDecodeError) as e:
            log(f'{a.results}: unreadable ({e}), replaced')
            old = []
    merged = merge(old, new)
    with open(a.results + '.tmp', 'w', encoding='utf-8') as f:
        json.dump(merged, f, indent=2)
        f.write('\n')
    os.replace(a.results + '.tmp', a.results)

    notes = [f"{r.get('impl', '?')}: {r.get('note')}" for r in ck + peers
             if r.get('kind') == 'note']
    info = []
    dev = next((r for r in ck if r.get('kind') == 'info' and r.get('metric') == 'device'), None)
    if dev:
        drv = dev.get('cuda_driver_version')
        drv_s = f'{drv // 1000}.{drv % 1000 // 10}' if isinstance(drv, int) else '?'
        info.append(('ckjit', f"{dev.get('ckjit_version', '?')}, arch {dev.get('arch', '?')}, "
                              f"compiler {dev.get('compiler') or '?'}, CUDA driver API {drv_s}"))
    tdev = next((r for r in peers if r.get('kind') == 'info' and r.get('impl') == 'torch'), None)
    versions = []
    if tdev:
        versions.append(f"torch {tdev.get('torch_version')} (CUDA {tdev.get('torch_cuda')})")
    for impl in ('cupy', 'triton'):
        v = next((r for r in peers if r.get('kind') == 'info' and r.get('impl') == impl), None)
        if v:
            versions.append(f"{impl} {v.get('version')}")
    if versions:
        info.append(('Peers', ', '.join(versions)))
    at = next((r for r in ck + peers if r.get('kind') == 'info'
               and r.get('metric') == 'attention settings'), None)
    if at:
        info.append(('Attention peers', f"torch {at.get('torch_version')}, cuDNN "
                                        f"{at.get('cudnn_version')} (torch.backends.cudnn."
                                        "version()), FlashAttention-2 as built into torch"))
    pg = next((r for r in ck + peers if r.get('kind') == 'info'
               and r.get('metric') == 'paged settings'), None)
    if pg:
        info.append(('Paged attention peers', f"torch {pg.get('torch_version')}, cuDNN "
                                              f"{pg.get('cudnn_version')} (torch.backends."
                                              "cudnn.version())"))
    f8 = next((r for r in ck + peers if r.get('kind') == 'info'
               and r.get('metric') == 'gemm_fp8 settings'), None)
    if f8:
        info.append(('FP8 GEMM peers', f"torch {f8.get('torch_version')} (torch._scaled_mm)"))
    fm = next((r for r in ck + peers if r.get('kind') == 'info'
               and r.get('metric') == 'fused_moe settings'), None)
    if fm:
        info.append(('Fused MoE peers', f"torch {fm.get('torch_version')} (torch.matmul: the "
                                        "torch loop over the experts and the dense GEMMs)"))
    write_md(a.md, merged, card, date, notes, info)
    log(f'{len(new)} records from this run, {len(merged)} in {a.results}; wrote {a.md}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
