"""Attention over a paged K/V cache (paged_attention), appending new tokens to it
(paged_kv_append) and checking its tables (paged_kv_check).

The pools: k_cache and v_cache are [num_pages, page_size, heads_kv, head_dim]
(kv_layout='nhd', the default) or [num_pages, heads_kv, page_size, head_dim] ('hnd'),
read with their own strides (a pool shared by K and V, e.g. kv[:, 0] and kv[:, 1] of
[pages, 2, slots, heads, dim], needs no copy).  page_size: a power of two up to 1024.
float8_e4m3fn pools take k_scale / v_scale (float32, one element or one per K/V head;
the dequantized value is scale * x).

A sequence's pages come in one of two forms:
  padded: block_table int32 [batch, max_pages_per_seq] (contiguous rows) and seqlens_k
          int32 [batch] (its key count);
  CSR:    kv_indptr int32 [batch + 1], kv_page_indices int32 and kv_last_page_len int32
          [batch] (FlashInfer's form).
Tables live on the device and are checked there: a bad page id or length is never
read, and sets `error` (an int32 tensor, when given) to 1; paged_kv_check finds and
names it (it synchronizes).
"""
import threading

from . import _structs as S
from ._lib import error as _error, lib as _lib
from ._torch_env import (check_out as _check_out, check_tensor as _check_tensor,
                         fail_input as _fail_input)
from .attention import LAYOUTS, mask_fields, softmax_scale, strides4

_c_paged_attention = _lib.ckjit_paged_attention
_c_append = _lib.ckjit_paged_kv_append
_c_check = _lib.ckjit_paged_kv_check
_ATTN_PACK = S.packer(S.PagedAttentionDesc, 'dtype', 'softcap')[0].pack_into
_APPEND_PACK = S.packer(S.PagedKVAppendDesc, 'dtype', 'kv.scale_stride')[0].pack_into
_KV_PACK = S.packer(S.PagedKV, 'num_pages', 'scale_stride')[0].pack_into
KV_LAYOUTS = {'nhd': (0, 1, 2, 3), 'hnd': (0, 2, 1, 3)}  # pool dims of (page, slot, head, dim)
_tls = threading.local()


def _bind(env):
    global _compiling, _raw_stream, _current_device, _guard, _FLOAT, _CODE, _ops, _torch
    _compiling, _raw_stream, _current_device = env.compiling, env.raw_stream, env.current_device
    _guard, _FLOAT, _CODE, _ops, _torch = (env.device_guard, env.float_dtypes, env.dtype_code,
                                           env.ops, env.torch)


def _thread_desc(name, cls):
    try:
        return getattr(_tls, name)
    except AttributeError:
        d = cls()
        setattr(_tls, name, (d, S.ctypes.addressof(d)))
        return getattr(_tls, name)


def _int32_vector(op, name, t, dev, n=None):
    _check_tensor(op, name, t, dev, _torch.int32)
    if t.dim() != 1 or (t.shape[0] > 1 and t.stride()[0] != 1):
        raise ValueError(f'ckjit.{op}: {name} must be a contiguous 1-d int32 tensor')
    if n is not None and t.shape[0] != n:
        raise ValueError(f'ckjit.{op}: {name} has {t.shape[0]} entries; expected {n}')
    return t.data_ptr()


def kv_fields(op, k_cache, v_cache, dtype, dev, block_table, seqlens_k, kv_indptr,
              kv_page_indices, kv_last_page_len, kv_layout, k_scale, v_scale, error,
              max_seqlen_k=0):
    """(the ckjit_paged_kv field values in order, batch, heads_kv, head_dim_qk, head_dim_v)
    of a pool pair and its tables, checked.  dtype: the call's (q's or the new tokens')."""
    dims = KV_LAYOUTS.get(kv_layout)
    if dims is None:
        raise ValueError(f"ckjit.{op}: kv_layout {kv_layout!r} is not 'nhd' or 'hnd'")
    for name, t in (('k_cache', k_cache), ('v_cache', v_cache)):
        _check_tensor(op, name, t, dev)
        if t.dim() != 4:
            raise ValueError(f'ckjit.{op}: {name} must be 4-d ({kv_layout}); got shape '
                             f'{tuple(t.shape)}')
    if v_cache.dtype is not k_cache.dtype:
        raise TypeError(f'ckjit.{op}: k_cache and v_cache have dtypes {k_cache.dtype} and '
                        f'{v_cache.dtype}')
    page_code = _CODE.get(k_cache.dtype)
    fp8 = page_code == S.FP8_E4M3_DT
    if not fp8 and k_cache.dtype is not dtype:
        raise TypeError(f'ckjit.{op}: the pools have dtype {k_cache.dtype}; expected the '
                        f'call\'s {dtype} or torch.float8_e4m3fn')
    pages, slots, heads = (k_cache.shape[dims[i]] for i in range(3))
    if tuple(v_cache.shape[dims[i]] for i in range(3)) != (pages, slots, heads):
        raise ValueError(f'ckjit.{op}: k_cache {tuple(k_cache.shape)} and v_cache '
                         f'{tuple(v_cache.shape)} differ in pages, page size or heads')
    scales = (0, 0, 0)
    if fp8:
        if k_scale is None or v_scale is None:
            raise ValueError(f'ckjit.{op}: float8 pools need k_scale and v_scale')
        for name, t in (('k_scale', k_scale), ('v_scale', v_scale)):
            _check_tensor(op, name, t, dev, _torch.float32)
            if t.numel() not in (1, heads) or (t.numel() > 1 and not t.is_contiguous()):
                raise ValueError(f'ckjit.{op}: {name} must hold 1 or heads_kv ({heads}) '
                                 'contiguous float32 scales')
        if k_scale.numel() != v_scale.numel():  # ckjit_paged_kv has one scale_stride for both
            raise ValueError(f'ckjit.{op}: k_scale and v_scale must both hold one scale or '
                             f'both one per K/V head; got {k_scale.numel()} and '
                             f'{v_scale.numel()}')
        scales = (k_scale.data_ptr(), v_scale.data_ptr(), 0 if k_scale.numel() == 1 else 1)
    if kv_indptr is not None:
        if kv_page_indices is None or kv_last_page_len is None:
            raise ValueError(f'ckjit.{op}: the CSR form needs kv_indptr, kv_page_indices and '
                             'kv_last_page_len')
        batch = kv_indptr.shape[0] - 1
        table = (0, 0, 0, _int32_vector(op, 'kv_indptr', kv_indptr, dev),
                 _int32_vector(op, 'kv_page_indices', kv_page_indices, dev),
                 _int32_vector(op, 'kv_last_page_len', kv_last_page_len, dev, batch))
    else:
        if block_table is None or seqlens_k is None:
            raise ValueError(f'ckjit.{op}: give block_table and seqlens_k (padded form) or '
                             'kv_indptr, kv_page_indices and kv_last_page_len (CSR form)')
        _check_tensor(op, 'block_table', block_table, dev, _torch.int32)
        if block_table.dim() != 2 or not block_table.is_contiguous():
            raise ValueError(f'ckjit.{op}: block_table must be a contiguous 2-d int32 tensor '
                             '[batch, max_pages_per_seq]')
        batch = block_table.shape[0]
        table = (block_table.data_ptr(), block_table.shape[1],
                 _int32_vector(op, 'seqlens_k', seqlens_k, dev, batch), 0, 0, 0)
    err = 0
    if error is not None:
        _check_tensor(op, 'error', error, dev, _torch.int32)
        err = error.data_ptr()
    fields = ((pages, slots, k_cache.data_ptr(), v_cache.data_ptr())
              + strides4(k_cache, dims) + strides4(v_cache, dims) + table
              + (err, int(max_seqlen_k), page_code if fp8 else 0) + scales)
    return fields, batch, heads, k_cache.shape[-1], v_cache.shape[-1]


def paged_attention(q, k_cache, v_cache, *, block_table=None, seqlens_k=None, kv_indptr=None,
                    kv_page_indices=None, kv_last_page_len=None, cu_seqlens_q=None,
                    max_seqlen_q=None, max_seqlen_k=0, kv_layout='nhd', causal=False,
                    window=(-1, -1), softcap=0.0, scale=None, k_scale=None, v_scale=None,
                    error=None, return_lse=False, out=None, lse_out=None):
    """Attention of each sequence's new queries over its paged keys (options as
    ckjit.attention).  q: [batch, seqlen_q, heads_q, head_dim] (BSHD) or, with
    cu_seqlens_q (int32 [batch + 1]) and max_seqlen_q, [total_q, heads_q, head_dim].
    Sequence b's queries are the last ones of its keys (bottom-right masks).
    max_seqlen_k: a hint (0: unknown) for how decode splits the keys.  Returns out
    (q's shape, head_dim of v) or (out, lse) with lse float32 [batch, heads_q, seqlen_q]
    (varlen: [heads_q, total_q])."""
    if _compiling():
        return _ops.paged_attention(q, k_cache, v_cache, block_table, seqlens_k, kv_indptr,
                                    kv_page_indices, kv_last_page_len, cu_seqlens_q,
                                    max_seqlen_q, max_seqlen_k, kv_layout, causal, window,
                                    softcap, scale, k_scale, v_scale, error, return_lse, out,
                                    lse_out)
    op = 'paged_attention'
    dt = _FLOAT.get(getattr(q, 'dtype', None))
    dev = q.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'q', q, _FLOAT)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return paged_attention(
                q, k_cache, v_cache, block_table=block_table, seqlens_k=seqlens_k,
                kv_indptr=kv_indptr, kv_page_indices=kv_page_indices,
                kv_last_page_len=kv_last_page_len, cu_seqlens_q=cu_seqlens_q,
                max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, kv_layout=kv_layout,
                causal=causal, window=window, softcap=softcap, scale=scale, k_scale=k_scale,
                v_scale=v_scale, error=error, return_lse=return_lse, out=out, lse_out=lse_out)
    kv, batch, hkv, dqk, dv = kv_fields(op, k_cache, v_cache, q.dtype, dev, block_table,
                                        seqlens_k, kv_indptr, kv_page_indices,
                                        kv_last_page_len, kv_layout, k_scale, v_scale, error,
                                        max_seqlen_k)
    varlen = cu_seqlens_q is not None
    if varlen:
        if q.dim() != 3 or max_seqlen_q is None:
            raise ValueError(f'ckjit.{op}: with cu_seqlens_q, q is [total_q, heads, head_dim] '
                             'and max_seqlen_q is required')
        _int32_vector(op, 'cu_seqlens_q', cu_seqlens_q, dev, batch + 1)
        dims, sq = (None, 1, 0, 2), int(max_seqlen_q)
        lshape, ldims = (q.shape[1], q.shape[0]), (None, 0, 1, None)
    else:
        if q.dim() != 4 or q.shape[0] != batch:
            raise ValueError(f'ckjit.{op}: q must be [batch ({batch}), seqlen_q, heads, '
                             f'head_dim]; got {tuple(q.shape)}')
        dims, sq = LAYOUTS['bshd'], q.shape[1]
        lshape, ldims = (batch, q.shape[2], sq), (0, 1, 2, None)
    hq = q.shape[dims[1]]
    if q.shape[-1] != dqk or hkv == 0 or hq % hkv:
        raise ValueError(f'ckjit.{op}: q {tuple(q.shape)} must have the pools\' head_dim '
                         f'({dqk}) and a multiple of their {hkv} heads')
    oshape = tuple(q.shape[:-1]) + (dv,)
    if out is None:
        o = q.new_empty(oshape)
    else:
        _check_out(op, out, oshape, q.dtype, dev)
        o = out
    lse, lse_fields = None, (0, 0, 0, 0, 0)
    if return_lse or lse_out is not None:
        if lse_out is None:
            lse = q.new_empty(lshape, dtype=_torch.float32)
        else:
            _check_out(op, lse_out, lshape, _torch.float32, dev, 'lse_out')
            lse = lse_out
        lse_fields = (lse.data_ptr(),) + strides4(lse, ldims)
    mask, wl, wr = mask_fields(causal, window)
    d, addr = _thread_desc('attention', S.PagedAttentionDesc)
    _ATTN_PACK(d, 0, dt, batch, hq, hkv, dqk, dv, sq,
               cu_seqlens_q.data_ptr() if varlen else 0,
               q.data_ptr(), *strides4(q, dims), o.data_ptr(), *strides4(o, dims),
               *lse_fields, *kv, softmax_scale(op, scale), mask, wl, wr, float(softcap))
    if batch and sq and hq and o.numel():
        st = _c_paged_attention(addr, s)
        if st:
            raise _error(st, 'ckjit_paged_attention')
    return (o, lse) if return_lse else o


def paged_kv_append(k_new, v_new, cu_seqlens_new, k_cache, v_cache, *, block_table=None,
                    seqlens_k=None, kv_indptr=None, kv_page_indices=None,
                    kv_last_page_len=None, max_seqlen_new=None, kv_layout='nhd',
                    k_scale=None, v_scale=None, error=None):
    """Writes each sequence's new tokens into its pages (in place; returns None).

    k_new [total_new, heads_kv, head_dim_qk] and v_new [total_new, heads_kv, head_dim_v]
    (any strides), cu_seqlens_new int32 [batch + 1].  New token i of sequence b goes to
    position sk_b - n_b + i, sk_b being the sequence's length after the append as the
    tables give it: run it before the attention of the same step, with the same tables.
    max_seqlen_new: the most new tokens of a sequence (sizes the grid); None uses
    total_new (correct, more blocks).  float8 pools store e4m3(x / scale)."""
    if _compiling():
        return _ops.paged_kv_append(k_new, v_new, cu_seqlens_new, k_cache, v_cache,
                                    block_table, seqlens_k, kv_indptr, kv_page_indices,
                                    kv_last_page_len, max_seqlen_new, kv_layout, k_scale,
                                    v_scale, error)
    op = 'paged_kv_append'
    dt = _FLOAT.get(getattr(k_new, 'dtype', None))
    dev = k_new.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'k_new', k_new, _FLOAT)
    if getattr(v_new, 'dtype', None) is not k_new.dtype or v_new.get_device() != dev:
        _check_tensor(op, 'v_new', v_new, dev, k_new.dtype)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return paged_kv_append(
                k_new, v_new, cu_seqlens_new, k_cache, v_cache, block_table=block_table,
                seqlens_k=seqlens_k, kv_indptr=kv_indptr, kv_page_indices=kv_page_indices,
                kv_last_page_len=kv_last_page_len, max_seqlen_new=max_seqlen_new,
                kv_layout=kv_layout, k_scale=k_scale, v_scale=v_scale, error=error)
    kv, batch, hkv, dqk, dv = kv_fields(op, k_cache, v_cache, k_new.dtype, dev, block_table,
                                        seqlens_k, kv_indptr, kv_page_indices,
                                        kv_last_page_len, kv_layout, k_scale, v_scale, error)
    cu = _int32_vector(op, 'cu_seqlens_new', cu_seqlens_new, dev, batch + 1)
    if k_new.dim() != 3 or v_new.dim() != 3 or k_new.shape[0] != v_new.shape[0] or \
            k_new.shape[1:] != (hkv, dqk) or v_new.shape[1:] != (hkv, dv):
        raise ValueError(f'ckjit.{op}: k_new {tuple(k_new.shape)} / v_new {tuple(v_new.shape)} '
                         f'must be [tokens, {hkv}, {dqk}] / [tokens, {hkv}, {dv}] as the pools')
    tokens = k_new.shape[0]
    max_new = tokens if max_seqlen_new is None else int(max_seqlen_new)
    d, addr = _thread_desc('append', S.PagedKVAppendDesc)
    dims = (None, 1, 0, 2)
    _APPEND_PACK(d, 0, dt, batch, hkv, dqk, dv, max_new, cu, k_new.data_ptr(),
                 v_new.data_ptr(), *strides4(k_new, dims), *strides4(v_new, dims), *kv)
    if batch and tokens and max_new:
        st = _c_append(addr, s)
        if st:
            raise _error(st, 'ckjit_paged_kv_append')


def paged_kv_check(k_cache, v_cache, *, block_table=None, seqlens_k=None, kv_indptr=None,
                   kv_page_indices=None, kv_last_page_len=None, kv_layout='nhd',
                   k_scale=None, v_scale=None):
    """Checks the tables on the device and waits for the answer: returns None, or raises
    ckjit.InvalidArgumentError (a ValueError) naming the first bad entry."""
    op = 'paged_kv_check'
    code = _CODE.get(getattr(k_cache, 'dtype', None))
    dev = k_cache.get_device() if code is not None else -1
    if dev < 0:
        _fail_input(op, 'k_cache', k_cache, _CODE)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return paged_kv_check(k_cache, v_cache, block_table=block_table,
                                  seqlens_k=seqlens_k, kv_indptr=kv_indptr,
                                  kv_page_indices=kv_page_indices,
                                  kv_last_page_len=kv_last_page_len, kv_layout=kv_layout,
                                  k_scale=k_scale, v_scale=v_scale)
    kv, batch = kv_fields(op, k_cache, v_cache, k_cache.dtype, dev, block_table, seqlens_k,
                          kv_indptr, kv_page_indices, kv_last_page_len, kv_layout, k_scale,
                          v_scale, None)[:2]
    d, addr = _thread_desc('kv', S.PagedKV)
    _KV_PACK(d, 0, *kv)
    st = _c_check(addr, batch, s)
    if st:
        raise _error(st, 'ckjit_paged_kv_check')
