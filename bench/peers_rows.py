"""peers.py's section "rows": the torch peers of bench/bench_rows.c (see peers.py's
docstring), the same cases and bytes."""
from peers_common import emit, emit_torch_device, log, note, rand_tensor, timed, timing_plan

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
    bench/bench_rows_cases.c, the one definition (see the comment in
    bench_rows_cases.h); make_results.py refuses a comparison whose two
    "bytes" differ.  'copy' (torch.clone) is the reference: 2*R*C*e."""
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
