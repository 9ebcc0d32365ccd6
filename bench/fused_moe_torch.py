#!/usr/bin/env python3
"""Fused mixture-of-experts MLP: ckjit_fused_moe against a PyTorch loop over the experts,
dense bf16 GEMMs of the same flops, its own bf16 call (FP8 weights) and the copy
bandwidth (decode), on the same GPU, stream and inputs.

usage: fused_moe_torch.py [--lib PATH] [--json FILE] [--quick] [--only SUBSTRING]...
                          [--budget S] [--no-flush-l2] [--check-layout]
The library: --lib, else CKJIT_LIBRARY (the .so or a directory holding it), else
build-gpu/libckjit.so, else what the python package (python/ckjit) loads.  ckjit runs
through ctypes (the checked mirror python/ckjit/_structs.py's FusedMoeDesc, loaded by
path) over torch tensors (.data_ptr(), torch.cuda.current_stream().cuda_stream); its
workspace is one torch uint8 tensor of ckjit_fused_moe_workspace_size bytes per case.

The layer (a DeepSeek-like expert MLP): E 64 experts, top-8 routing, hidden H 4096,
inter I 1408, SiLU; x and y bf16 [T, H], w_gate_up [E][2I][H] and w_down [E][H][I]
(nn.Linear layout, normal values / sqrt(in_features)).  Routing: each token's 8
experts are the top-8 of random normal logits (distinct), topk_weights the softmax of
those 8 logits (f32), topk_ids int32.  FP8: the same weights quantized to e4m3,
block scaling (128 x 128 blocks, scales [E][ceil(2I/128)][ceil(H/128)] and
[E][ceil(H/128)][ceil(I/128)], amax / 448) or row scaling (one scale per output
channel).  The torch loop (the straightforward layer): argsort of the flattened ids,
the per-expert counts once to the host (.tolist()), then for each expert with tokens:
index_select of its tokens' rows, x @ W1_e^T, silu(gate) * up, @ W2_e^T, times the
routing weight, index_add_ into a zeroed y; timed with that host synchronization.

Records (JSON lines on stdout and in --json, kind "fused_moe", bench/make_results.py):
  fused_moe bf16 T4096 E64 k8 H4096 I1408 vs torch loop   (TFLOP/s; ratio = torch loop
                                                          time / ckjit time)
  fused_moe bf16 T4096 E64 k8 H4096 I1408 vs dense gemm   (TFLOP/s; the peer: torch.matmul
        of [T*k, H] x [H, 2I] and [T*k, I] x [I, H] into preallocated outputs)
  fused_moe fp8 T4096 E64 k8 H4096 I1408 vs bf16          (block scales; ratio = bf16
  fused_moe fp8 rowwise T4096 E64 k8 H4096 I1408 vs bf16   ckjit time / fp8 ckjit time)
  fused_moe decode T16 E64 k8 H4096 I1408 vs copy         (GB/s: weight bytes of the
  fused_moe decode T64 E64 k8 H4096 I1408 vs copy          experts that received tokens
        / time, against the same run's y.copy_(x) of 1 GiB, (read + written) / time)
  fused_moe bf16 T4096 E64 k8 H4096 I1408 S1x2816 vs dense gemm   (the layer with one
        shared expert of inter 2816 (DeepSeek-V2-Lite's two merged); TFLOP/s of routed +
        shared work; the peer: the dense GEMMs above plus [T, H] x [H, 5632] and [T, 2816]
        x [2816, H]; checked against the torch loop plus the shared MLP in torch)
TFLOP/s count the routed work, 2*T*k*H*2I + 2*T*k*I*H (plus the shared work where
named), the same for every side.
(ckjit_moe_sort has its own record in bench/moe_fp8_torch.py.)  Every case is checked
before it is timed: ||y_ckjit - y_ref|| / ||y_ref|| < 2e-2 for bf16 weights against the
torch loop, < 6e-2 for FP8 against the torch loop on the dequantized weights (bf16), and
no id counted invalid; a case that fails posts no number ("check": "bad: ...").  Timing:
one stream; rounds alternating the sides (the order rotating), each call between its own
CUDA events after a max(2 x L2, 256 MiB) buffer is overwritten (--no-flush-l2: events
around a loop of calls) and a ~0.5 ms GPU sleep opening each loop; medians.  Cases run
in child processes (a crash or hang costs only its case; torch_bench_common).  Exit
status 0 when every case was measured or CKJIT_ERROR_UNSUPPORTED, 2 when a check
failed, else 1 (also: no CUDA device, no library, a ctypes layout mismatch).
"""
import ctypes
import math
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/ is not a package
from torch_bench_common import (  # noqa: E402  (the shared child runner, timing context)
    INT, UNSTEADY, BenchContext, CkjitFailed, FileReporter, first_call_ms, import_cuda_torch,
    layout_check, layout_gate, load_structs, parse_library_args, run_child, run_parent)


S = load_structs()
MoeDesc = S.FusedMoeDesc
BF16, FP8_E4M3, I32 = S.BF16_DT, S.FP8_E4M3_DT, S.I32_DT
SILU = S.UNARY_OPS['silu']
SCALING = {'block': S.FP8_SCALE_BLOCK, 'row': S.FP8_SCALE_ROW}
# Offsets by hand, LP64: tokens hidden inter 0 8 16, experts k 24 28, dtype 32 (+4), x 40,
# ldx 48, y 56, ldy 64, ids_dtype 72 (+4), topk_ids 80, topk_weights 88, weight_dtype 96
# (+4), w_gate_up 104, w_down 112, weight_scaling 120 (+4), scale_gate_up 128, scale_down
# 136, activation 144 (+4), workspace 152, workspace_bytes 160, invalid 168, expert_map
# 176, global_experts 184, shared_experts 188, shared_inter 192, w_shared_gate_up 200,
# w_shared_down 208, scale_shared_gate_up 216, scale_shared_down 224, shared_gate 232:
# sizeof 240.
STRUCTS = {'ckjit_fused_moe_desc': (MoeDesc, 240, 232)}

E, TOP, HID, INTER = 64, 8, 4096, 1408
PREFILL_T, DECODE_T = 4096, (16, 64)
SHARED_I = 2816  # the shared expert's inter (DeepSeek-V2-Lite: 2 x 1408, merged)
BLK, E4M3_MAX = 128, 448.0
TOL = {'bf16': 2e-2, 'fp8': 6e-2}  # ||y - ref|| / ||ref||
COPY_BYTES = 1 << 30               # the decode cases' copy peer: 1 GiB read, 1 GiB written
WEIGHT_ELEMS = 2 * INTER * HID + HID * INTER  # one expert's W1 and W2
torch = F = None  # imported by the child (import_torch)


REPORT = FileReporter('fused_moe_torch.py', 'fused_moe', 'CKJIT_FUSED_MOE_JSON')
log, emit, note = REPORT.log, REPORT.emit, REPORT.note


# ---- cases ---------------------------------------------------------------------------------
class Case:
    """kind 'bf16' (vs the torch loop and dense GEMMs), 'fp8' (scaling 'block' or 'row',
    vs ckjit with the bf16 weights), 'decode' (bf16, vs copy) or 'shared' (bf16 with one
    shared expert, vs dense GEMMs)."""

    def __init__(self, kind, tokens, scaling=None):
        self.kind, self.tokens, self.scaling = kind, tokens, scaling
        self.shape = f'T{tokens} E{E} k{TOP} H{HID} I{INTER}'
        self.flops = 2 * tokens * TOP * HID * 2 * INTER + 2 * tokens * TOP * INTER * HID
        self.shared_inter = SHARED_I if kind == 'shared' else 0
        self.flops += 2 * tokens * HID * 2 * self.shared_inter + 2 * tokens * self.shared_inter * HID
        if kind == 'shared':
            self.metrics = [f'fused_moe bf16 {self.shape} S1x{SHARED_I} vs dense gemm']
        elif kind == 'bf16':
            self.metrics = [f'fused_moe bf16 {self.shape} vs torch loop',
                            f'fused_moe bf16 {self.shape} vs dense gemm']
        elif kind == 'fp8':
            label = 'fp8' if scaling == 'block' else 'fp8 rowwise'
            self.metrics = [f'fused_moe {label} {self.shape} vs bf16']
        else:
            self.metrics = [f'fused_moe decode {self.shape} vs copy']
        self.base = self.metrics[0].rsplit(' vs ', 1)[0]


CASES = [Case('bf16', PREFILL_T), Case('fp8', PREFILL_T, 'block'), Case('fp8', PREFILL_T, 'row')]
CASES += [Case('decode', t) for t in DECODE_T] + [Case('shared', PREFILL_T)]


def fail_records(case, status, error, extra=None):
    log(f'{case.base}: {status}: {error}')
    for metric in case.metrics:
        emit(dict(extra or {}, metric=metric, kind='fused_moe', impl='ckjit',
                  unit='GB/s' if case.kind == 'decode' else 'TFLOP/s', value=None,
                  status=status, error=str(error)[:600]))


# ---- the child -------------------------------------------------------------------------------
class Ctx(BenchContext):
    def __init__(self, a):
        global torch, F
        torch, F = import_cuda_torch()
        super().__init__(a, (('ckjit_fused_moe', MoeDesc),))
        self.lib.ckjit_fused_moe_workspace_size.argtypes = [ctypes.POINTER(MoeDesc)]
        self.lib.ckjit_fused_moe_workspace_size.restype = ctypes.c_size_t
        self.lib.ckjit_last_status.argtypes, self.lib.ckjit_last_status.restype = [], INT
        self.spin = getattr(torch.cuda, '_sleep', None)
        self.rounds, self.calls = (3, 3) if a.quick else (10, 5)
        self._weights = None

    def weights(self):
        """(w_gate_up [E, 2I, H], w_down [E, H, I]) bf16, made once per child."""
        if self._weights is None:
            g = torch.Generator(device='cuda').manual_seed(11)
            w1 = torch.empty(E, 2 * INTER, HID, dtype=torch.bfloat16, device='cuda')
            w2 = torch.empty(E, HID, INTER, dtype=torch.bfloat16, device='cuda')
            for e in range(E):  # an expert at a time: no f32 copy of all the weights
                w1[e] = torch.randn(2 * INTER, HID, generator=g, device='cuda') / math.sqrt(HID)
                w2[e] = torch.randn(HID, INTER, generator=g, device='cuda') / math.sqrt(INTER)
            self._weights = (w1, w2)
        return self._weights



def inputs(tokens, seed):
    """x [T, H] bf16, topk_ids [T, k] int32 (and the int64 topk gives), topk_weights f32."""
    g = torch.Generator(device='cuda').manual_seed(seed)
    x = torch.randn(tokens, HID, generator=g, device='cuda').to(torch.bfloat16)
    logits = torch.randn(tokens, E, generator=g, device='cuda')
    top, ids64 = logits.topk(TOP, dim=1)  # distinct experts per token
    weights = torch.softmax(top, dim=1).float().contiguous()
    return x, ids64.to(torch.int32).contiguous(), ids64.contiguous(), weights


def torch_moe(x, w1, w2, ids, topk_weights):
    """The straightforward PyTorch MoE layer (SiLU): entries sorted by expert once, the
    per-expert counts to the host once, then each expert's tokens gathered, through its
    gate-up and down GEMMs, weighted and added into y."""
    k, inter = ids.shape[1], w2.shape[2]
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=w1.shape[0]).tolist()  # the host sync
    token = order // k
    weight = topk_weights.flatten()[order].unsqueeze(1)
    y = torch.zeros_like(x)
    at = 0
    for e, n in enumerate(counts):
        if not n:
            continue
        t = token[at:at + n]
        gu = torch.matmul(x.index_select(0, t), w1[e].t())
        h = F.silu(gu[:, :inter]) * gu[:, inter:]
        o = torch.matmul(h, w2[e].t())
        o.mul_(weight[at:at + n])
        y.index_add_(0, t, o)
        at += n
    return y


def shared_mlp(x, w1, w2):
    """One shared expert (w1 [2I, H], w2 [H, I]) on every token, in torch."""
    inter = w2.shape[1]
    gu = torch.matmul(x, w1.t())
    return torch.matmul(F.silu(gu[:, :inter]) * gu[:, inter:], w2.t())


def rel_err(got, ref):
    """||got - ref|| / ||ref|| (f32); inf for NaN, inf or a zero reference."""
    g, r = got.float(), ref.float()
    den = float(r.norm())
    err = float((g - r).norm()) / den if den > 0 else math.inf
    return err if math.isfinite(err) else math.inf


def quantize(w, scaling):
    """(e4m3 [E, N, K], f32 scales, bf16 dequantized) of w [E, N, K]: block scales
    [E, ceil(N/128), ceil(K/128)] or row scales [E, N], amax / 448 (1 for a zero block
    or row), one expert at a time."""
    ne, n, k = w.shape
    nb, kb = math.ceil(n / BLK), math.ceil(k / BLK)
    q = torch.empty(w.shape, dtype=torch.float8_e4m3fn, device='cuda')
    deq = torch.empty_like(w)
    s = torch.empty((ne, nb, kb) if scaling == 'block' else (ne, n), dtype=torch.float32,
                    device='cuda')
    for e in range(ne):
        we = w[e].float()
        if scaling == 'block':
            pad = torch.zeros(nb * BLK, kb * BLK, device='cuda')
            pad[:n, :k] = we
            amax = pad.view(nb, BLK, kb, BLK).abs().amax(dim=(1, 3))
        else:
            amax = we.abs().amax(dim=1)
        se = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
        full = (se.repeat_interleave(BLK, 0)[:n].repeat_interleave(BLK, 1)[:, :k]
                if scaling == 'block' else se.unsqueeze(1))
        qe = (we / full).clamp_(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
        q[e], s[e] = qe, se
        deq[e] = (qe.float() * full).to(w.dtype)
    return q, s, deq


def make_desc(ctx, x, y, ids, tw, w1, w2, invalid, scaling=None, s1=None, s2=None):
    d = MoeDesc()
    ctx.lib.ckjit_fused_moe_desc_init(ctypes.byref(d))
    d.tokens, d.hidden, d.inter, d.experts, d.k = x.shape[0], HID, INTER, E, TOP
    d.dtype, d.ids_dtype, d.activation = BF16, I32, SILU
    d.x, d.ldx, d.y, d.ldy = x.data_ptr(), x.stride(0), y.data_ptr(), y.stride(0)
    d.topk_ids, d.topk_weights = ids.data_ptr(), tw.data_ptr()
    d.w_gate_up, d.w_down = w1.data_ptr(), w2.data_ptr()
    if scaling:
        d.weight_dtype, d.weight_scaling = FP8_E4M3, SCALING[scaling]
        d.scale_gate_up, d.scale_down = s1.data_ptr(), s2.data_ptr()
    else:
        d.weight_dtype = BF16
    d.invalid = invalid.data_ptr()
    return d


def workspace(ctx, descs):
    """One uint8 tensor of the largest ckjit_fused_moe_workspace_size of descs, set in
    each (the calls run one after another on one stream), and the sizes asked for."""
    sizes = [int(ctx.lib.ckjit_fused_moe_workspace_size(ctypes.byref(d))) for d in descs]
    if 0 in sizes:  # 0: sizes out of the limits (ckjit_last_error) or no workspace needed
        err = (ctx.lib.ckjit_last_error() or b'').decode(errors='replace').strip()
        log(f'ckjit_fused_moe_workspace_size gave 0 ({err or "no error set"}); the call decides')
    n = max(max(sizes), 256)
    raw = torch.empty(n + 256, dtype=torch.uint8, device='cuda')  # torch's blocks are
    at = -raw.data_ptr() % 256                                      # 512-aligned: at is 0
    ws = raw[at:at + n]                                             # (the header asks 256)
    for d in descs:
        d.workspace, d.workspace_bytes = ws.data_ptr(), ws.numel()
    return ws, sizes


def routing_details(ids64):
    counts = torch.bincount(ids64.flatten(), minlength=E)
    return {'counts_min_max': [int(counts.min()), int(counts.max())],
            'distinct_experts': int((counts > 0).sum())}


def common_details(ctx, case, ws_sizes, first_ms):
    return {'tokens': case.tokens, 'experts': E, 'k': TOP, 'hidden': HID, 'inter': INTER,
            'activation': 'silu', 'dtype': 'bf16', 'ids_dtype': 'int32',
            'routing': 'top-8 of random normal logits (distinct), softmax of the 8 (f32)',
            'workspace_bytes': ws_sizes, 'first_call_ms': first_ms,
            'torch_version': torch.__version__, 'torch_cuda': torch.version.cuda,
            'l2_flush': bool(ctx.flush_bytes), 'flush_bytes': ctx.flush_bytes,
            'rounds': ctx.rounds, 'calls_per_round': ctx.calls}


def verdict(errs, invalid):
    """'ok' or 'bad: ...' of {what: (rel err, tolerance)} and the invalid count."""
    bad = [f'{what}: ||diff|| / ||ref|| {err:.3g} (tolerance {tol:g})'
           for what, (err, tol) in errs.items() if not err < tol]
    if invalid:
        bad.append(f'{invalid} ids counted invalid (none is)')
    return 'ok' if not bad else 'bad: ' + '; '.join(bad)


def unsteady_note(res):
    names = [s for s, (med, mn) in res.items() if med > UNSTEADY * mn]
    return f'timing unsteady (median > {UNSTEADY} x min): {", ".join(names)}' if names else None


def bf16_layer(ctx, case):
    """The case's layer with the bf16 weights, called once (the first call timed) and its y
    checked against the torch loop: a namespace holding the call, the loop, the check and
    every tensor the descriptor points at; None (failure records posted) if the call fails."""
    L = types.SimpleNamespace()
    L.w1, L.w2 = ctx.weights()
    L.x, L.ids, L.ids64, L.tw = inputs(case.tokens, 9000 + case.tokens)
    L.y = torch.full_like(L.x, math.nan)
    L.invalid = torch.zeros(1, dtype=torch.int32, device='cuda')
    L.desc = make_desc(ctx, L.x, L.y, L.ids, L.tw, L.w1, L.w2, L.invalid)
    L.ws, L.sizes = workspace(ctx, [L.desc])
    L.ck = ctx.call(ctx.lib.ckjit_fused_moe, L.desc)
    try:
        L.first_ms = first_call_ms(L.ck)
    except CkjitFailed as e:
        fail_records(case, *e.args)
        return None
    L.loop = lambda: torch_moe(L.x, L.w1, L.w2, L.ids64, L.tw)
    L.err = rel_err(L.y, L.loop())
    L.check = verdict({'vs the torch loop': (L.err, TOL['bf16'])}, int(L.invalid.item()))
    return L


def run_bf16(ctx, case):
    """The prefill layer with bf16 weights against the torch loop and dense GEMMs."""
    L = bf16_layer(ctx, case)
    if L is None:
        return
    w1, w2, ids64, ck, loop = L.w1, L.w2, L.ids64, L.ck, L.loop
    sizes, first_ms, err, check = L.sizes, L.first_ms, L.err, L.check
    details = dict(common_details(ctx, case, sizes, first_ms), weight_dtype='bf16',
                   rel_err=err, tolerance=TOL['bf16'], **routing_details(ids64))
    base = {'kind': 'fused_moe', 'impl': 'ckjit', 'unit': 'TFLOP/s', 'flops': case.flops,
            'card': torch.cuda.get_device_name(), 'check': check}
    if check != 'ok':
        return fail_records(case, 'CHECK_FAILED', check, dict(base, details=details))
    rows = case.tokens * TOP
    g = torch.Generator(device='cuda').manual_seed(31)
    a1 = torch.randn(rows, HID, generator=g, device='cuda').to(torch.bfloat16)
    a2 = torch.randn(rows, INTER, generator=g, device='cuda').to(torch.bfloat16)
    c1 = torch.empty(rows, 2 * INTER, dtype=torch.bfloat16, device='cuda')
    c2 = torch.empty(rows, HID, dtype=torch.bfloat16, device='cuda')
    b1, b2 = w1[0].t(), w2[0].t()  # [H, 2I] and [I, H], column-major views

    def dense():
        torch.matmul(a1, b1, out=c1)
        torch.matmul(a2, b2, out=c2)
    res = ctx.time_sides({'ckjit': ck, 'torch loop': loop, 'dense gemm': dense})
    ck_ms, ck_min = res['ckjit']
    details.update(ckjit_ms=ck_ms, ckjit_min_ms=ck_min, torch_loop_ms=res['torch loop'][0],
                   dense_gemm_ms=res['dense gemm'][0])
    peers = {'torch loop': 'torch loop over the experts (argsort, counts .tolist(), per-expert '
                           'matmuls, silu*up, index_add_)',
             'dense gemm': f'torch.matmul [{rows}, {HID}] x [{HID}, {2 * INTER}] + '
                           f'[{rows}, {INTER}] x [{INTER}, {HID}] (dense, same flops)'}
    for metric in case.metrics:
        side = metric.rsplit(' vs ', 1)[1]
        p_ms, p_min = res[side]
        rec = dict(base, metric=metric, value=case.flops / ck_ms / 1e9,
                   peer_value=case.flops / p_ms / 1e9, peer_name=peers[side],
                   details=dict(details, peer_ms=p_ms, peer_min_ms=p_min),
                   note=unsteady_note({'ckjit': res['ckjit'], side: res[side]}))
        log(f"{metric}: ckjit {ck_ms:.4f} ms = {rec['value']:.1f} TFLOP/s, {side} {p_ms:.4f} ms "
            f"= {rec['peer_value']:.1f} TFLOP/s")
        emit(rec)


def run_fp8(ctx, case):
    """The prefill layer with FP8 weights against the same call with the bf16 weights."""
    w1, w2 = ctx.weights()
    x, ids, ids64, tw = inputs(case.tokens, 9000 + case.tokens)
    q1, s1, deq1 = quantize(w1, case.scaling)
    q2, s2, deq2 = quantize(w2, case.scaling)
    y8, y16 = torch.full_like(x, math.nan), torch.full_like(x, math.nan)
    invalid = torch.zeros(2, dtype=torch.int32, device='cuda')
    d8 = make_desc(ctx, x, y8, ids, tw, q1, q2, invalid[0:1], case.scaling, s1, s2)
    d16 = make_desc(ctx, x, y16, ids, tw, w1, w2, invalid[1:2])
    ws, sizes = workspace(ctx, [d8, d16])
    ck8, ck16 = ctx.call(ctx.lib.ckjit_fused_moe, d8), ctx.call(ctx.lib.ckjit_fused_moe, d16)
    try:
        first_ms = first_call_ms(ck8)
        first_ms16 = first_call_ms(ck16)
    except CkjitFailed as e:
        return fail_records(case, *e.args)
    err8 = rel_err(y8, torch_moe(x, deq1, deq2, ids64, tw))
    deq1 = deq2 = None  # 2.2 GB
    err16 = rel_err(y16, torch_moe(x, w1, w2, ids64, tw))
    check = verdict({'fp8 vs the torch loop on the dequantized weights': (err8, TOL['fp8']),
                     'bf16 vs the torch loop': (err16, TOL['bf16'])}, int(invalid.sum()))
    label = 'block 128x128' if case.scaling == 'block' else 'row (per output channel)'
    details = dict(common_details(ctx, case, sizes, first_ms), weight_dtype='fp8_e4m3',
                   weight_scaling=label, bf16_first_call_ms=first_ms16, rel_err=err8,
                   bf16_rel_err=err16, fp8_vs_bf16_rel_err=rel_err(y8, y16),
                   tolerance=TOL['fp8'], **routing_details(ids64))
    base = {'kind': 'fused_moe', 'impl': 'ckjit', 'unit': 'TFLOP/s', 'flops': case.flops,
            'card': torch.cuda.get_device_name(), 'check': check}
    if check != 'ok':
        return fail_records(case, 'CHECK_FAILED', check, dict(base, details=details))
    res = ctx.time_sides({'ckjit fp8': ck8, 'ckjit bf16': ck16})
    ck_ms, ck_min = res['ckjit fp8']
    p_ms, p_min = res['ckjit bf16']
    details.update(ckjit_ms=ck_ms, ckjit_min_ms=ck_min, peer_ms=p_ms, peer_min_ms=p_min)
    rec = dict(base, metric=case.metrics[0], value=case.flops / ck_ms / 1e9,
               peer_value=case.flops / p_ms / 1e9,
               peer_name='ckjit_fused_moe with the bf16 weights (same run)', details=details,
               note=unsteady_note(res))
    log(f"{rec['metric']}: fp8 {ck_ms:.4f} ms = {rec['value']:.1f} TFLOP/s, bf16 {p_ms:.4f} ms "
        f"= {rec['peer_value']:.1f} TFLOP/s")
    emit(rec)


def run_decode(ctx, case):
    """A decode step (few tokens): the weight bytes of the experts used per second
    against the same run's copy bandwidth."""
    L = bf16_layer(ctx, case)
    if L is None:
        return
    w1, ids64, ck, loop = L.w1, L.ids64, L.ck, L.loop
    sizes, first_ms, err, check = L.sizes, L.first_ms, L.err, L.check
    route = routing_details(ids64)
    wbytes = route['distinct_experts'] * WEIGHT_ELEMS * w1.element_size()
    definition = ('GB/s = bytes of w_gate_up and w_down of the experts that received tokens '
                  f'(distinct experts in topk_ids x (2*I*H + H*I) x 2 B) / time; the peer: '
                  f'y.copy_(x) of {COPY_BYTES >> 20} MiB, (bytes read + bytes written) / time, '
                  'so the ratio is the fraction of copy bandwidth')
    details = dict(common_details(ctx, case, sizes, first_ms), weight_dtype='bf16',
                   rel_err=err, tolerance=TOL['bf16'], weight_bytes=wbytes, **route)
    base = {'kind': 'fused_moe', 'impl': 'ckjit', 'unit': 'GB/s', 'bytes': wbytes,
            'card': torch.cuda.get_device_name(), 'check': check, 'definition': definition}
    if check != 'ok':
        return fail_records(case, 'CHECK_FAILED', check, dict(base, details=details))
    src = torch.ones(COPY_BYTES // 2, dtype=torch.bfloat16, device='cuda')
    dst = torch.empty_like(src)
    res = ctx.time_sides({'ckjit': ck, 'copy': lambda: dst.copy_(src), 'torch loop': loop})
    ck_ms, ck_min = res['ckjit']
    p_ms, p_min = res['copy']
    details.update(ckjit_ms=ck_ms, ckjit_min_ms=ck_min, peer_ms=p_ms, peer_min_ms=p_min,
                   copy_bytes=2 * COPY_BYTES, torch_loop_ms=res['torch loop'][0],
                   torch_loop_gbps=wbytes / res['torch loop'][0] / 1e6)
    rec = dict(base, metric=case.metrics[0], value=wbytes / ck_ms / 1e6,
               peer_value=2 * COPY_BYTES / p_ms / 1e6,
               peer_name=f'torch y.copy_(x), {COPY_BYTES >> 20} MiB (same run)', details=details,
               note=unsteady_note({'ckjit': res['ckjit'], 'copy': res['copy']}))
    log(f"{rec['metric']}: ckjit {ck_ms:.4f} ms = {rec['value']:.0f} GB/s of weights, copy "
        f"{p_ms:.4f} ms = {rec['peer_value']:.0f} GB/s, torch loop {res['torch loop'][0]:.4f} ms")
    emit(rec)


def run_shared(ctx, case):
    """The prefill layer with one shared expert, against dense GEMMs of the same flops."""
    w1, w2 = ctx.weights()
    g = torch.Generator(device='cuda').manual_seed(13)
    si = case.shared_inter
    sw1 = (torch.randn(2 * si, HID, generator=g, device='cuda') / math.sqrt(HID)).to(torch.bfloat16)
    sw2 = (torch.randn(HID, si, generator=g, device='cuda') / math.sqrt(si)).to(torch.bfloat16)
    x, ids, ids64, tw = inputs(case.tokens, 9000 + case.tokens)
    y = torch.full_like(x, math.nan)
    invalid = torch.zeros(1, dtype=torch.int32, device='cuda')
    desc = make_desc(ctx, x, y, ids, tw, w1, w2, invalid)
    desc.shared_experts, desc.shared_inter = 1, si
    desc.w_shared_gate_up, desc.w_shared_down = sw1.data_ptr(), sw2.data_ptr()
    ws, sizes = workspace(ctx, [desc])
    ck = ctx.call(ctx.lib.ckjit_fused_moe, desc)
    try:
        first_ms = first_call_ms(ck)
    except CkjitFailed as e:
        return fail_records(case, *e.args)
    err = rel_err(y, torch_moe(x, w1, w2, ids64, tw) + shared_mlp(x, sw1, sw2))
    check = verdict({'vs the torch loop + shared MLP': (err, TOL['bf16'])}, int(invalid.item()))
    details = dict(common_details(ctx, case, sizes, first_ms), weight_dtype='bf16', shared_experts=1,
                   shared_inter=si, rel_err=err, tolerance=TOL['bf16'], **routing_details(ids64))
    base = {'kind': 'fused_moe', 'impl': 'ckjit', 'unit': 'TFLOP/s', 'flops': case.flops,
            'card': torch.cuda.get_device_name(), 'check': check}
    if check != 'ok':
        return fail_records(case, 'CHECK_FAILED', check, dict(base, details=details))
    rows, T = case.tokens * TOP, case.tokens
    g = torch.Generator(device='cuda').manual_seed(31)
    ops = [(torch.randn(r, kk, generator=g, device='cuda').to(torch.bfloat16), b,
            torch.empty(r, b.shape[1], dtype=torch.bfloat16, device='cuda'))
           for r, kk, b in ((rows, HID, w1[0].t()), (rows, INTER, w2[0].t()),
                            (T, HID, sw1.t()), (T, si, sw2.t()))]

    def dense():
        for a_, b_, c_ in ops:
            torch.matmul(a_, b_, out=c_)
    res = ctx.time_sides({'ckjit': ck, 'dense gemm': dense})
    (ck_ms, ck_min), (p_ms, p_min) = res['ckjit'], res['dense gemm']
    metric = case.metrics[0]
    rec = dict(base, metric=metric, value=case.flops / ck_ms / 1e9, peer_value=case.flops / p_ms / 1e9,
               peer_name=f'torch.matmul: the routed layer\'s dense GEMMs ([{rows}, {HID}] x [{HID}, '
                         f'{2 * INTER}], [{rows}, {INTER}] x [{INTER}, {HID}]) and the shared '
                         f'expert\'s ([{T}, {HID}] x [{HID}, {2 * si}], [{T}, {si}] x [{si}, {HID}])',
               details=dict(details, ckjit_ms=ck_ms, ckjit_min_ms=ck_min, peer_ms=p_ms, peer_min_ms=p_min),
               note=unsteady_note(res))
    log(f"{metric}: ckjit {ck_ms:.4f} ms = {rec['value']:.1f} TFLOP/s, dense {p_ms:.4f} ms "
        f"= {rec['peer_value']:.1f} TFLOP/s")
    emit(rec)


def run_case(ctx, case):
    {'bf16': run_bf16, 'fp8': run_fp8, 'decode': run_decode, 'shared': run_shared}[case.kind](ctx, case)


# ---- the parent ------------------------------------------------------------------------------
def parse_args(argv=None):
    return parse_library_args(__doc__, '"bf16", "fp8", "decode", "rowwise", "T16 "', 'moe.h', argv)


def main():
    a = parse_args()
    if a.child:
        return run_child(a, [int(i) for i in a.child.split(',')], Ctx, CASES, run_case,
                         fail_records, REPORT)
    status = layout_gate(a, layout_check(STRUCTS, ['ckjit/ckjit.h', 'ckjit/moe.h'],
                                         'fused-moe'), 'moe.h', REPORT)
    if status is not None:
        return status
    return run_parent(a, __file__, CASES, 'CKJIT_FUSED_MOE_JSON', fail_records, REPORT)


if __name__ == '__main__':
    sys.exit(main())
