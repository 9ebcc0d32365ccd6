"""RESULTS.md from the records of bench/results.json (made by
bench/results_build.py, for bench/make_results.py): one section per
benchmark family, each with how its numbers are made, and the runs behind
the records."""
import os
import re

from results_build import ROW_OPS, first_line, rnd

ROWS_METRIC = re.compile(r'^(%s) (\S+) (\d+x\d+) vs (torch|copy)$' % '|'.join(ROW_OPS))
TOPK_METRIC = re.compile(r'^topk_softmax (\S+) (\d+x\d+) k(\d+) vs torch$')
GEMM_METRIC = re.compile(r'^gemm (\S+) (\S+) (\S+(?: streamk)?) vs (.+)$')
ATTN_METRIC = re.compile(r'^attention (\S+) (.+) vs (cudnn|flash)$')
PAGED_METRIC = re.compile(r'^paged (decode|prefill|append) (\S+) (.+) '
                          r'vs (copy|dense|cudnn|cudnn\+gather)$')


FP8_METRIC = re.compile(r'^gemm fp8 (\d+x\d+x\d+) (tensor|rowwise|blockwise)'
                        r'((?: moe (?:contiguous|masked) E\d+ top\d+)?)'
                        r'(?: vs (scaled_mm(?: rowwise| blockwise)?|dense ckjit|dense scaled_mm))?$')


FUSED_MOE_METRIC = re.compile(r'^fused_moe (bf16|fp8|fp8 rowwise|decode) '
                              r'(T\d+ E\d+ k\d+ H\d+ I\d+(?: S\d+x\d+)?) '
                              r'vs (torch loop|dense gemm|bf16|copy)$')


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
                  'from rows_bytes() in bench/bench_rows_cases.c):', '']
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
             'reference. "vs cublas (ctypes)" rows: `bench/gemm_torch.py`, ckjit through ctypes '
             'on torch\'s stream against torch.matmul(out=) in the same process, rounds '
             'alternating the sides (cold L2), medians, checked against torch and an f32 matmul; '
             'its "cluster 2x1|1x2 vs 1x1 (ctypes)" rows in the first table time '
             'CKJIT_GEMM_CLUSTER\'s shapes against no clusters.', '',
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
