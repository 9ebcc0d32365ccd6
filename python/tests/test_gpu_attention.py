"""attention, paged_attention and paged_kv_append against a float64 reference on every
visible GPU: masks, soft-cap, ALiBi, bias, GQA, layouts, varlen, decode, paged pools in
both table forms and layouts, fp8 pools."""
import itertools
import math

import pytest

from gpu_util import MARKS, ckjit, close, rand, torch

pytestmark = MARKS
ATOL = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 2.5e-2}


def reference(q, k, v, causal=False, window=(-1, -1), softcap=0.0, scale=None, alibi=None,
              bias=None):
    """(O [b, sq, hq, dv], LSE [b, hq, sq]) in float64 of BSHD q, k, v, as ckjit.h defines
    them (bottom-right aligned masks; fully masked rows: O 0, LSE -inf)."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    qd = q.double().permute(0, 2, 1, 3)
    kd = k.double().permute(0, 2, 1, 3).repeat_interleave(hq // hkv, 1)
    vd = v.double().permute(0, 2, 1, 3).repeat_interleave(hq // hkv, 1)
    s = qd @ kd.mT * (scale if scale is not None else 1 / math.sqrt(d))
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if bias is not None:
        s = s + bias.double()
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(sk, device=q.device)[None, :]
    diag = i + sk - sq
    if alibi is not None:  # [hq] or [b, hq] slopes
        slopes = alibi.double().reshape(-1, hq)[:, :, None, None]
        s = s - slopes * (diag - j).abs()
    masked = torch.zeros(sq, sk, dtype=torch.bool, device=q.device)
    left, right = window
    if left >= 0 or right >= 0:
        right = 0 if causal else right
        if left >= 0:
            masked |= j < diag - left
        if right >= 0:
            masked |= j > diag + right
    elif causal:
        masked |= j > diag
    s = s.masked_fill(masked, -math.inf)
    m = s.amax(-1, keepdim=True)
    m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(s - m_safe)
    ell = p.sum(-1, keepdim=True)
    o = torch.where(ell > 0, (p @ vd) / ell.clamp_min(1e-300), torch.zeros_like(p @ vd))
    lse = torch.where(ell[..., 0] > 0, (m_safe + ell.log())[..., 0],
                      torch.full_like(ell[..., 0], -math.inf))
    return o.permute(0, 2, 1, 3), lse


def offsets(lengths, device):
    """int32 [0, l0, l0 + l1, ...]: cu_seqlens / kv_indptr."""
    return torch.tensor(list(itertools.accumulate(lengths, initial=0)), dtype=torch.int32,
                        device=device)


def qkv(b, sq, sk, hq, hkv, d, dtype, device, dv=None, seed=0):
    return (rand((b, sq, hq, d), dtype, device, seed=seed),
            rand((b, sk, hkv, d), dtype, device, seed=seed + 1),
            rand((b, sk, hkv, dv or d), dtype, device, seed=seed + 2))


def check(got, ref, dtype, what):
    (o, lse), (o_ref, lse_ref) = got, ref
    close(o, o_ref, rtol=ATOL[dtype], atol=ATOL[dtype], what=f'{what}: O')
    close(lse, lse_ref, rtol=1e-4, atol=2e-3, what=f'{what}: LSE')


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize('d', [64, 128])
@pytest.mark.parametrize('sq,sk', [(37, 53), (64, 64), (1, 100), (100, 1)])
def test_attention_masks(device, dtype, d, sq, sk):
    q, k, v = qkv(2, sq, sk, 4, 2, d, dtype, device)
    for kw in ({}, {'causal': True}, {'window': (16, 4)}, {'causal': True, 'window': (8, -1)},
               {'softcap': 5.0, 'scale': 0.3}):
        got = ckjit.attention(q, k, v, return_lse=True, **kw)
        check(got, reference(q, k, v, **kw), dtype, str(kw))


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_attention_bias_alibi_layouts_and_head_dims(device, dtype):
    q, k, v = qkv(2, 40, 70, 4, 4, 128, dtype, device, seed=3)
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625], device=device)
    check(ckjit.attention(q, k, v, alibi_slopes=slopes, causal=True, return_lse=True),
          reference(q, k, v, causal=True, alibi=slopes), dtype, 'alibi [h]')
    per_batch = torch.stack([slopes, slopes * 2])
    check(ckjit.attention(q, k, v, alibi_slopes=per_batch, return_lse=True),
          reference(q, k, v, alibi=per_batch), dtype, 'alibi [b, h]')
    bias = rand((1, 4, 40, 70), torch.float32, device, seed=4)
    check(ckjit.attention(q, k, v, bias=bias, return_lse=True), reference(q, k, v, bias=bias),
          dtype, 'f32 bias broadcast over batch')
    bias_dt = rand((40, 70), dtype, device, seed=5)
    check(ckjit.attention(q, k, v, bias=bias_dt, return_lse=True),
          reference(q, k, v, bias=bias_dt), dtype, 'dtype bias broadcast over b, h')
    ref = reference(q, k, v, causal=True)
    o = ckjit.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True,
                        layout='bhsd')
    assert o.shape == (2, 4, 40, 128)
    close(o.transpose(1, 2), ref[0], rtol=ATOL[dtype], atol=ATOL[dtype], what='bhsd views')
    qkv_packed = torch.stack([q, k[:, :40], v[:, :40]], dim=2)  # [b, s, 3, h, d]
    pq, pk, pv = qkv_packed.unbind(2)
    check(ckjit.attention(pq, pk, pv, causal=True, return_lse=True),
          reference(pq, pk, pv, causal=True), dtype, 'packed QKV views')
    q2, k2, v2 = qkv(1, 33, 33, 8, 1, 192, dtype, device, dv=128, seed=6)  # MQA, MLA dims
    check(ckjit.attention(q2, k2, v2, causal=True, return_lse=True),
          reference(q2, k2, v2, causal=True), dtype, 'MQA, d 192 / dv 128')
    for d in (96, 256):
        q3, k3, v3 = qkv(1, 20, 30, 2, 2, d, dtype, device, seed=d)
        check(ckjit.attention(q3, k3, v3, return_lse=True), reference(q3, k3, v3), dtype, f'd{d}')


def test_attention_empty_and_out(device):
    dtype = torch.bfloat16
    q, k, v = qkv(2, 5, 0, 2, 2, 64, dtype, device)
    o, lse = ckjit.attention(q, k, v, return_lse=True)  # no keys: O 0, LSE -inf
    assert torch.equal(o, torch.zeros_like(o)) and bool(torch.isneginf(lse).all())
    q, k, v = qkv(0, 5, 5, 2, 2, 64, dtype, device)
    assert ckjit.attention(q, k, v).shape == (0, 5, 2, 64)
    q, k, v = qkv(1, 16, 16, 2, 2, 64, dtype, device, seed=9)
    out = torch.empty_like(q)
    lse_out = torch.empty(1, 2, 16, device=device)
    got = ckjit.attention(q, k, v, out=out, lse_out=lse_out, return_lse=True)
    assert got[0] is out and got[1] is lse_out
    check(got, reference(q, k, v), dtype, 'out=')


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_attention_varlen(device, dtype):
    lens_q, lens_k = [5, 0, 37, 1], [9, 4, 37, 64]
    hq, hkv, d = 4, 2, 128
    qs = [rand((1, n, hq, d), dtype, device, seed=10 + i) for i, n in enumerate(lens_q)]
    ks = [rand((1, n, hkv, d), dtype, device, seed=20 + i) for i, n in enumerate(lens_k)]
    vs = [rand((1, n, hkv, d), dtype, device, seed=30 + i) for i, n in enumerate(lens_k)]
    cu_q, cu_k = offsets(lens_q, device), offsets(lens_k, device)
    q, k, v = (torch.cat([t[0] for t in ts]) for ts in (qs, ks, vs))
    o, lse = ckjit.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True,
                             max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k),
                             return_lse=True)
    assert o.shape == q.shape and lse.shape == (hq, q.shape[0])
    start = 0
    for i, n in enumerate(lens_q):
        if n:
            o_ref, lse_ref = reference(qs[i], ks[i], vs[i], causal=True)
            close(o[start:start + n], o_ref[0], rtol=ATOL[dtype], atol=ATOL[dtype],
                  what=f'sequence {i}: O')
            close(lse[:, start:start + n], lse_ref[0], rtol=1e-4, atol=2e-3,
                  what=f'sequence {i}: LSE')
        start += n


# ---- paged ---------------------------------------------------------------------------------
def build_pool(ks, vs, page, layout, dtype, device, extra_pages=3, seed=0):
    """A shuffled page pool holding each sequence's keys/values, and its tables: (k_pool,
    v_pool, block_table, seqlens, kv_indptr, kv_page_indices, kv_last_page_len)."""
    counts = [max(1, -(-k.shape[0] // page)) for k in ks]
    n_pages = sum(counts) + extra_pages
    hkv, d, dv = ks[0].shape[1], ks[0].shape[2], vs[0].shape[2]
    ids = torch.randperm(n_pages, generator=torch.Generator().manual_seed(seed))
    shape = (n_pages, page, hkv) if layout == 'nhd' else (n_pages, hkv, page)
    k_pool = torch.zeros(*shape, d, dtype=dtype, device=device)
    v_pool = torch.zeros(*shape, dv, dtype=dtype, device=device)
    table = torch.zeros(len(ks), max(counts), dtype=torch.int32)
    at = 0
    for b, (k, v) in enumerate(zip(ks, vs)):
        for p in range(counts[b]):
            pid = int(ids[at])
            at += 1
            table[b, p] = pid
            chunk = slice(p * page, min((p + 1) * page, k.shape[0]))
            n = chunk.stop - chunk.start
            if n <= 0:
                continue
            if layout == 'nhd':
                k_pool[pid, :n], v_pool[pid, :n] = k[chunk], v[chunk]
            else:
                k_pool[pid, :, :n], v_pool[pid, :, :n] = k[chunk].transpose(0, 1), \
                    v[chunk].transpose(0, 1)
    lens = torch.tensor([k.shape[0] for k in ks], dtype=torch.int32)
    indptr = offsets(counts, 'cpu')
    indices = torch.cat([table[b, :c] for b, c in enumerate(counts)])
    last = torch.tensor([(n - 1) % page + 1 if n else page for n in lens.tolist()],
                        dtype=torch.int32)
    to = dict(device=device)
    return (k_pool, v_pool, table.to(**to), lens.to(**to), indptr.to(**to), indices.to(**to),
            last.to(**to))


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
@pytest.mark.parametrize('page', [1, 16])
@pytest.mark.parametrize('layout', ['nhd', 'hnd'])
def test_paged_attention(device, dtype, page, layout):
    hq, hkv, d = 8, 2, 128
    lens_k, sq = [1, 17, 64, 100], 4
    ks = [rand((n, hkv, d), dtype, device, seed=40 + i) for i, n in enumerate(lens_k)]
    vs = [rand((n, hkv, d), dtype, device, seed=50 + i) for i, n in enumerate(lens_k)]
    k_pool, v_pool, table, lens, indptr, indices, last = build_pool(ks, vs, page, layout,
                                                                    dtype, device)
    q = rand((len(ks), sq, hq, d), dtype, device, seed=60)
    error = torch.zeros(1, dtype=torch.int32, device=device)
    o, lse = ckjit.paged_attention(q, k_pool, v_pool, block_table=table, seqlens_k=lens,
                                   kv_layout=layout, causal=True, return_lse=True, error=error)
    o_csr = ckjit.paged_attention(q, k_pool, v_pool, kv_indptr=indptr, kv_page_indices=indices,
                                  kv_last_page_len=last, kv_layout=layout, causal=True)
    for b in range(len(ks)):
        # sequence 0 has 1 key for 4 queries: its first 3 rows see none (O 0, LSE -inf)
        o_ref, lse_ref = reference(q[b:b + 1], ks[b][None], vs[b][None], causal=True)
        check((o[b:b + 1], lse[b:b + 1]), (o_ref, lse_ref), dtype, f'sequence {b}')
        close(o_csr[b:b + 1], o_ref, rtol=ATOL[dtype], atol=ATOL[dtype], what=f'CSR {b}')
    assert int(error) == 0
    ckjit.paged_kv_check(k_pool, v_pool, block_table=table, seqlens_k=lens, kv_layout=layout)
    bad = table.clone()
    bad[1, 0] = 10_000
    with pytest.raises(ValueError):
        ckjit.paged_kv_check(k_pool, v_pool, block_table=bad, seqlens_k=lens, kv_layout=layout)


@pytest.mark.parametrize('scales', [None, 'pool', 'head'])
def test_paged_kv_append_then_attention(device, scales):
    fp8 = scales is not None
    dtype, hq, hkv, d, page = torch.bfloat16, 4, 2, 64, 16
    lens_old, lens_new = [0, 15, 40], [3, 1, 30]
    full = [n + m for n, m in zip(lens_old, lens_new)]
    ks = [rand((n, hkv, d), dtype, device, seed=70 + i) for i, n in enumerate(full)]
    vs = [rand((n, hkv, d), dtype, device, seed=80 + i) for i, n in enumerate(full)]
    # tables sized for the full lengths, pool filled with the old tokens only
    k_pool, v_pool, table, _, *_ = build_pool(ks, vs, page, 'nhd', dtype, device)
    k_pool.zero_(), v_pool.zero_()
    lens_after = torch.tensor(full, dtype=torch.int32, device=device)
    k_scale = v_scale = None
    if fp8:  # one scale for the pool, or one per K/V head (both tensors alike)
        k_scale = torch.tensor([0.02, 0.03] if scales == 'head' else [0.02], device=device)
        v_scale = torch.tensor([0.025, 0.015] if scales == 'head' else [0.025], device=device)
        k_pool = k_pool.to(torch.float8_e4m3fn)
        v_pool = v_pool.to(torch.float8_e4m3fn)
    # first the old tokens, then the new ones, both through paged_kv_append
    for lens_b, part in ((lens_old, lambda t, n, m: t[:n]), (lens_new, lambda t, n, m: t[n:])):
        new_k = torch.cat([part(k, n, m) for k, n, m in zip(ks, lens_old, lens_new)])
        new_v = torch.cat([part(v, n, m) for v, n, m in zip(vs, lens_old, lens_new)])
        cu = offsets(lens_b, device)
        upto = lens_old if lens_b is lens_old else full
        ckjit.paged_kv_append(new_k, new_v, cu, k_pool, v_pool, block_table=table,
                              seqlens_k=torch.tensor(upto, dtype=torch.int32, device=device),
                              max_seqlen_new=max(lens_b), k_scale=k_scale, v_scale=v_scale)
    # the pool now holds every token: gathered back, it equals the inputs (quantized)
    raw_k = k_pool.view(torch.uint8) if fp8 else k_pool  # (indexing float8 directly: not
    raw_v = v_pool.view(torch.uint8) if fp8 else v_pool  # in every torch)
    for b, n in enumerate(full):
        pages = table[b, :-(-n // page)].long()
        got_k = raw_k[pages].reshape(-1, hkv, d)[:n]
        got_v = raw_v[pages].reshape(-1, hkv, d)[:n]
        if fp8:
            want_k = (ks[b].float() / k_scale[None, :, None]).to(torch.float8_e4m3fn)
            want_v = (vs[b].float() / v_scale[None, :, None]).to(torch.float8_e4m3fn)
            assert torch.equal(got_k, want_k.view(torch.uint8)), f'K {b}'
            assert torch.equal(got_v, want_v.view(torch.uint8)), f'V {b}'
        else:
            assert torch.equal(got_k, ks[b]) and torch.equal(got_v, vs[b]), f'sequence {b}'
    q = rand((3, 2, hq, d), dtype, device, seed=90)
    o = ckjit.paged_attention(q, k_pool, v_pool, block_table=table, seqlens_k=lens_after,
                              causal=True, k_scale=k_scale, v_scale=v_scale)
    for b in range(3):
        kb, vb = ks[b], vs[b]
        if fp8:  # the reference sees the dequantized pool values
            kb = (kb.float() / k_scale[None, :, None]).to(torch.float8_e4m3fn).double() * \
                k_scale[None, :, None].double()
            vb = (vb.float() / v_scale[None, :, None]).to(torch.float8_e4m3fn).double() * \
                v_scale[None, :, None].double()
        o_ref, _ = reference(q[b:b + 1], kb[None], vb[None], causal=True)
        close(o[b:b + 1], o_ref, rtol=ATOL[dtype], atol=ATOL[dtype], what=f'sequence {b}')
