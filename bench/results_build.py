"""The records of bench/results.json from the benchmarks' JSONL output
(read by bench/make_results.py; bench/results_md.py writes their
tables): one record per metric with both sides, their ratio (> 1: ckjit
better), the card and how it was measured."""
import sys

# Lower is better for these (a count: compiles, to be minimised): ratio = peer / ckjit.
TIME_UNITS = {'ns', 'us', 'ms', 's', 'count'}
RATE_UNITS = {'GB/s', 'GiB/s', 'TB/s', 'TFLOP/s', 'GFLOP/s'}
ROW_OPS = ('softmax', 'layernorm', 'rmsnorm', 'sum', 'rmsnorm_quant', 'smoothquant')


def rnd(v):
    if v is None:
        return None
    v = float(v)
    if abs(v) >= 100:
        return round(v, 1)
    if abs(v) >= 1:
        return round(v, 3)
    return round(v, 5)


def first_line(text, limit=160):
    text = str(text or '').strip().splitlines()
    text = text[0] if text else ''
    return text if len(text) <= limit else text[:limit - 3] + '...'


def log(msg):
    print(f'make_results.py: {msg}', file=sys.stderr, flush=True)


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


PEER_LABEL = {'raw': 'raw driver', 'cupy': 'cupy', 'triton': 'triton', 'torch': 'torch'}
ATTN_KINDS = ('attention', 'attention_launch', 'attention_compile', 'attention_compile_total')
ATTN_RATIO_TARGETS = {'cudnn': 1.0, 'flash': 1.8}  # issue 17
ATTN_TFLOPS_TARGET = 700.0                         # issue 17: d256, non-causal


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


def last_by_key(recs, kind, impl, key):
    """{key(r): r} of the records of `kind` by `impl`; a later line wins, with or
    without a value."""
    return {key(r): r for r in recs if r.get('kind') == kind and r.get('impl') == impl}


def build_rows(ck, peers, card):
    """Comparisons of the row-wise ops (kind "rows")."""
    out = []

    def key(r):
        return (r.get('op'), r.get('dtype'), r.get('shape'), r.get('k') or 0)

    cks = last_by_key(ck, 'rows', 'ckjit', key)
    torch = last_by_key(peers, 'rows', 'torch', key)
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
                         'fix rows_bytes() in bench/peers_rows.py')
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

    cks = last_by_key(ck, 'gemm', 'ckjit', key)
    sides = {impl: last_by_key(peers, 'gemm', impl, key) for impl in ('torch', 'cupy')}
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
                                  f"{p.get('flops')}): fix the cases in bench/peers_gemm.py")
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
    # bf16 GEMM through ctypes (bench/gemm_torch.py): ckjit_gemm vs torch.matmul, and its
    # cluster shapes against no clusters; records like the FP8 GEMM's.
    out += build_fp8(ck + peers, card, 'gemm_ctypes')
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
