"""Fused attention forward (FlashAttention-style): ckjit.attention.

Dense: q [batch, seqlen_q, heads_q, head_dim] (layout='bshd', the default, as
FlashAttention) or [batch, heads_q, seqlen_q, head_dim] (layout='bhsd', as
F.scaled_dot_product_attention); k and v likewise with heads_kv (a divisor of heads_q:
MHA, GQA, MQA) and seqlen_k.  Varlen: q [total_q, heads_q, head_dim] and k, v
[total_k, heads_kv, head_dim] packed, with cu_seqlens_q / cu_seqlens_k (int32,
batch + 1 offsets) and max_seqlen_q / max_seqlen_k, as flash_attn_varlen_func.

Strides: q, k, v, the bias and the output are all passed with their own strides (any
order, so a packed QKV's q/k/v views and transposed views need no copy); ckjit's
tensor-core kernels want a contiguous head dim and 16-byte aligned rows, other
layouts run on its SIMT kernel (correct, slower).

head_dim 64, 96, 128, 192 or 256 (v's may differ from q/k's: MLA's 192 / 128).  dtypes
float16, bfloat16 (tensor cores) or float32 (SIMT).  The output has q's layout and
dtype; the LSE (return_lse=True) is float32 [batch, heads_q, seqlen_q] (varlen:
[heads_q, total_q]).  Masks are bottom-right aligned for seqlen_q != seqlen_k, as
FlashAttention 2.  A fully masked row gives O = 0 and LSE = -inf.
"""
import threading

from . import _structs as S
from ._lib import error as _error, lib as _lib
from ._torch_env import (check_out as _check_out, check_tensor as _check_tensor,
                         fail_input as _fail_input)

_c_attention = _lib.ckjit_attention
_PACK = S.packer(S.AttentionDesc, 'dtype', 'softcap')[0].pack_into
_tls = threading.local()
LAYOUTS = {'bshd': (0, 2, 1, 3), 'bhsd': (0, 1, 2, 3)}  # dims of (batch, head, seq, dim)


def _bind(env):
    global _compiling, _raw_stream, _current_device, _guard, _FLOAT, _ops, _torch
    _compiling, _raw_stream, _current_device = env.compiling, env.raw_stream, env.current_device
    _guard, _FLOAT, _ops, _torch = env.device_guard, env.float_dtypes, env.ops, env.torch


def mask_fields(causal, window):
    """(ckjit_attention_mask, window_left, window_right) of FlashAttention's (causal,
    window_size): window (left, right), -1 unbounded; causal with a window keeps right 0."""
    left, right = (-1, -1) if window is None else (int(window[0]), int(window[1]))
    if left >= 0 or right >= 0:
        return S.MASK_WINDOW, left, 0 if causal else right
    return (S.MASK_CAUSAL if causal else S.MASK_NONE), -1, -1


def softmax_scale(op, scale):
    if scale is None:
        return 0.0  # ckjit's default: 1 / sqrt(head_dim_qk)
    if scale == 0.0:
        raise ValueError(f'ckjit.{op}: scale 0 is not supported (ckjit reads 0 as '
                         '"1/sqrt(head_dim)"; pass None for that)')
    return float(scale)


def strides4(t, dims):
    """(batch, head, seq, dim) strides of t for dims, a (batch, head, seq, dim) tuple of
    t's dim indices (None: a dim t lacks, stride 0)."""
    st = t.stride()
    return tuple(0 if d is None else st[d] for d in dims)


def output_shapes(q, v, layout, varlen):
    """(out shape, lse shape) of attention (the fake implementation uses this too)."""
    qs = tuple(q.shape)
    dv = v.shape[-1]
    out = qs[:-1] + (dv,)
    if varlen:
        return out, (qs[1], qs[0])
    b_, h_, s_, _ = LAYOUTS[layout]
    return out, (qs[b_], qs[h_], qs[s_])


def attention(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, scale=None,
              alibi_slopes=None, bias=None, cu_seqlens_q=None, cu_seqlens_k=None,
              max_seqlen_q=None, max_seqlen_k=None, layout='bshd', return_lse=False,
              out=None, lse_out=None):
    """softmax(q k^T * scale + masks) v per head (see the module doc for layouts).

    causal: bottom-right aligned causal mask.  window: (left, right) sliding window as
    FlashAttention's window_size (-1: unbounded).  softcap > 0: softcap *
    tanh(s / softcap) on the scores.  scale: None is 1/sqrt(head_dim).  alibi_slopes:
    float32 [heads_q] or [batch, heads_q].  bias: additive, float32 or q's dtype,
    broadcastable to [batch, heads_q, seqlen_q, seqlen_k] (read through zero strides,
    not expanded).  Returns out, or (out, lse) with return_lse=True.
    """
    if _compiling():
        return _ops.attention(q, k, v, causal, window, softcap, scale, alibi_slopes, bias,
                              cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, layout,
                              return_lse, out, lse_out)
    op = 'attention'
    dt = _FLOAT.get(getattr(q, 'dtype', None))
    dev = q.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'q', q, _FLOAT)
    for name, t in (('k', k), ('v', v)):
        if getattr(t, 'dtype', None) is not q.dtype or t.get_device() != dev:
            _check_tensor(op, name, t, dev, q.dtype)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return attention(q, k, v, causal=causal, window=window, softcap=softcap,
                             scale=scale, alibi_slopes=alibi_slopes, bias=bias,
                             cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                             max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                             layout=layout, return_lse=return_lse, out=out, lse_out=lse_out)
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen:
        b, sq, sk, dims = _varlen(op, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                  max_seqlen_k, dev)
    else:
        dims = LAYOUTS.get(layout)
        if dims is None:
            raise ValueError(f"ckjit.{op}: layout {layout!r} is not 'bshd' or 'bhsd'")
        if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
            raise ValueError(f'ckjit.{op}: q, k, v must be 4-d ({layout}) without cu_seqlens; '
                             f'got {q.dim()}, {k.dim()}, {v.dim()} dims')
        b, sq, sk = q.shape[dims[0]], q.shape[dims[2]], k.shape[dims[2]]
        if k.shape[dims[0]] != b or v.shape[dims[0]] != b or v.shape[dims[2]] != sk:
            raise ValueError(f'ckjit.{op}: q {tuple(q.shape)}, k {tuple(k.shape)} and v '
                             f'{tuple(v.shape)} disagree on batch or seqlen_k ({layout})')
    hq, hkv, dqk, dv = q.shape[dims[1]], k.shape[dims[1]], q.shape[-1], v.shape[-1]
    if k.shape[-1] != dqk or v.shape[dims[1]] != hkv:
        raise ValueError(f'ckjit.{op}: k {tuple(k.shape)} must have q\'s head_dim ({dqk}) and '
                         f'v {tuple(v.shape)} k\'s heads ({hkv})')
    if hkv == 0 or hq % hkv:
        raise ValueError(f'ckjit.{op}: heads_q ({hq}) must be a multiple of heads_kv ({hkv})')
    oshape, lshape = output_shapes(q, v, layout, varlen)
    if out is None:
        o = q.new_empty(oshape)
    else:
        _check_out(op, out, oshape, q.dtype, dev)
        o = out
    lse = None
    if return_lse or lse_out is not None:
        if lse_out is None:
            lse = q.new_empty(lshape, dtype=_torch.float32)
        else:
            _check_out(op, lse_out, lshape, _torch.float32, dev, 'lse_out')
            lse = lse_out
    mask, wl, wr = mask_fields(causal, window)
    keep = []
    bias_fields = _bias_fields(op, bias, b, hq, sq, sk, q.dtype, dt, dev, keep)
    alibi = (0, 0)
    if alibi_slopes is not None:
        _check_tensor(op, 'alibi_slopes', alibi_slopes, dev, _torch.float32)
        sh = tuple(alibi_slopes.shape)
        if sh not in ((hq,), (b, hq)) or alibi_slopes.stride()[-1] != 1:
            raise ValueError(f'ckjit.{op}: alibi_slopes has shape {sh}; expected ({hq},) or '
                             f'({b}, {hq}) with a contiguous last dim')
        alibi = (alibi_slopes.data_ptr(), alibi_slopes.stride()[0] if len(sh) == 2 else 0)
    lse_strides = (0, 0, 0, 0)
    if lse is not None:
        lse_strides = strides4(lse, (None, 0, 1, None) if varlen else (0, 1, 2, None))
    o_dims = dims
    try:
        d, addr = _tls.desc
    except AttributeError:
        d = S.AttentionDesc()
        _tls.desc = d, S.ctypes.addressof(d)
        addr = _tls.desc[1]
    _PACK(d, 0, dt, b, hq, hkv, sq, sk, dqk, dv,
          q.data_ptr(), *strides4(q, dims), k.data_ptr(), *strides4(k, dims),
          v.data_ptr(), *strides4(v, dims), o.data_ptr(), *strides4(o, o_dims),
          0 if lse is None else lse.data_ptr(), *lse_strides,
          0 if cu_seqlens_q is None else cu_seqlens_q.data_ptr(),
          0 if cu_seqlens_k is None else cu_seqlens_k.data_ptr(),
          softmax_scale(op, scale), mask, wl, wr, *bias_fields, *alibi, float(softcap))
    if b and sq and hq and o.numel():
        st = _c_attention(addr, s)
        if st:
            raise _error(st, 'ckjit_attention')
    return (o, lse) if return_lse else o


def _varlen(op, q, k, v, cu_q, cu_k, max_q, max_k, dev):
    """(batch, max_seqlen_q, max_seqlen_k, dims) of a varlen call, checked."""
    if cu_q is None or cu_k is None:
        raise ValueError(f'ckjit.{op}: give both cu_seqlens_q and cu_seqlens_k, or neither')
    if max_q is None or max_k is None:
        raise ValueError(f'ckjit.{op}: varlen needs max_seqlen_q and max_seqlen_k (the '
                         'longest sequences; reading them from the device would synchronize)')
    for name, t in (('cu_seqlens_q', cu_q), ('cu_seqlens_k', cu_k)):
        _check_tensor(op, name, t, dev, _torch.int32)
        if t.dim() != 1 or t.stride()[0] != 1 or t.shape[0] < 1:
            raise ValueError(f'ckjit.{op}: {name} must be a contiguous 1-d int32 tensor of '
                             'batch + 1 offsets')
    if cu_q.shape[0] != cu_k.shape[0]:
        raise ValueError(f'ckjit.{op}: cu_seqlens_q and cu_seqlens_k have {cu_q.shape[0]} and '
                         f'{cu_k.shape[0]} entries; both are batch + 1')
    if q.dim() != 3 or k.dim() != 3 or v.dim() != 3:
        raise ValueError(f'ckjit.{op}: varlen q, k, v are [tokens, heads, head_dim]; got '
                         f'{q.dim()}, {k.dim()}, {v.dim()} dims')
    if k.shape[0] != v.shape[0]:
        raise ValueError(f'ckjit.{op}: k and v have {k.shape[0]} and {v.shape[0]} tokens')
    return cu_q.shape[0] - 1, int(max_q), int(max_k), (None, 1, 0, 2)


def _bias_fields(op, bias, b, hq, sq, sk, dtype, dt, dev, keep):
    """(pointer, ckjit_dtype, 4 strides) of the additive score bias."""
    if bias is None:
        return 0, dt, 0, 0, 0, 0
    code = _FLOAT.get(bias.dtype)
    if bias.dtype is not dtype and code != S.F32_DT:
        raise TypeError(f'ckjit.{op}: bias has dtype {bias.dtype}; expected float32 or '
                        f'{dtype}')
    _check_tensor(op, 'bias', bias, dev)
    if bias.dim() > 4:
        raise ValueError(f'ckjit.{op}: bias has {bias.dim()} dims; it broadcasts to '
                         f'[batch, heads_q, seqlen_q, seqlen_k]')
    try:
        view = bias.expand(b, hq, sq, sk)
    except RuntimeError:
        raise ValueError(f'ckjit.{op}: bias of shape {tuple(bias.shape)} does not broadcast to '
                         f'{(b, hq, sq, sk)}') from None
    keep.append(view)
    return (view.data_ptr(), code) + tuple(view.stride())
