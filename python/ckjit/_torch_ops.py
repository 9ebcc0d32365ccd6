"""torch.library custom ops ("ckjit::<name>") so that torch.compile(fullgraph=True) and
torch.export trace through ckjit, and the compile-path wrappers the public functions
call while torch.compiler.is_compiling() is true.

Why two paths: an eager call through the dispatcher (torch.ops.ckjit.X) costs several
microseconds of host time, more than the C launch itself, so the public functions call
ctypes directly in eager mode and reach the registered op only while being compiled.
Each op's real implementation is that same eager function; its fake (meta)
implementation computes the output shapes, dtypes and (contiguous) strides.

The registered ops are functional: they never alias or write their inputs, except
ckjit::paged_kv_append, which declares the pools (and the error flag) as mutated, and
ckjit::paged_attention, which declares its optional error flag as mutated.
out= / residual_out= given to a public function while compiling are filled with
.copy_() from the functional result (inductor usually fuses or elides the copy).

Imported only when torch imports (ckjit/__init__.py).
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from . import elementwise as _ew, gemm as _gemm, gemm_fp8 as _fp8, paged as _paged
from . import reduce as _reduce
from . import rows as _rows
# (ckjit.attention is the function once the package is imported; take the module's names)
from .attention import attention as _attention_fn, output_shapes as _attention_shapes

_custom_op = torch.library.custom_op
OPS = {}  # name -> OpOverload (torch.ops.ckjit.<name>.default)


def _register(name, fn, fake, mutates_args=()):
    """Registers ckjit::<name> (or reuses it: a second import of this module in one
    process, e.g. a reload, must not fail)."""
    try:
        op = _custom_op(f'ckjit::{name}', fn, mutates_args=mutates_args)
        op.register_fake(fake)
    except RuntimeError:
        if not hasattr(torch.ops.ckjit, name):
            raise
    OPS[name] = getattr(torch.ops.ckjit, name).default


def _into(out, y):
    if out is None:
        return y
    out.copy_(y)
    return out


def _empty0(x, dtype=None):
    return x.new_empty((0,), dtype=dtype or x.dtype)


# ---- row ops ----------------------------------------------------------------------------------
def _softmax_impl(x: Tensor, dim: int, scale: float, valid_cols: Optional[Tensor],
                  log: bool) -> Tensor:
    return _rows._softmax(x, dim, scale, valid_cols, None, 1 if log else 0,
                          'log_softmax' if log else 'softmax').contiguous()


def _softmax_fake(x, dim, scale, valid_cols, log):
    return x.new_empty(x.shape)


def _layer_norm_impl(x: Tensor, normalized_shape: List[int], weight: Optional[Tensor],
                     bias: Optional[Tensor], eps: float,
                     residual: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    r = _rows._norm(_rows._c_layernorm, 'layer_norm', x, normalized_shape, weight, bias, eps,
                    residual, None, None)
    return (r, _empty0(x)) if residual is None else r


def _layer_norm_fake(x, normalized_shape, weight, bias, eps, residual):
    return x.new_empty(x.shape), (_empty0(x) if residual is None else x.new_empty(x.shape))


def _rms_norm_impl(x: Tensor, normalized_shape: List[int], weight: Optional[Tensor],
                   eps: Optional[float], residual: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    r = _rows._norm(_rows._c_rmsnorm, 'rms_norm', x, normalized_shape, weight, None, eps,
                    residual, None, None)
    return (r, _empty0(x)) if residual is None else r


def _rms_norm_fake(x, normalized_shape, weight, eps, residual):
    return x.new_empty(x.shape), (_empty0(x) if residual is None else x.new_empty(x.shape))


def _rms_norm_quant_impl(x: Tensor, normalized_shape: List[int], weight: Optional[Tensor],
                         eps: Optional[float], residual: Optional[Tensor],
                         quant_dtype: Optional[torch.dtype]) -> Tuple[Tensor, Tensor, Tensor]:
    r = _rows.rms_norm_quant(x, normalized_shape, weight, eps, residual,
                             quant_dtype=quant_dtype)
    return r + (_empty0(x),) if residual is None else r


def _rms_norm_quant_fake(x, normalized_shape, weight, eps, residual, quant_dtype):
    nd = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    q = x.new_empty(x.shape, dtype=quant_dtype or torch.int8)
    scale = x.new_empty(x.shape[:x.dim() - nd], dtype=torch.float32)
    return q, scale, (_empty0(x) if residual is None else x.new_empty(x.shape))


def _smoothquant_impl(x: Tensor, smooth_scale: Tensor,
                      quant_dtype: Optional[torch.dtype]) -> Tuple[Tensor, Tensor]:
    return _rows.smoothquant(x, smooth_scale, quant_dtype=quant_dtype)


def _smoothquant_fake(x, smooth_scale, quant_dtype):
    return (x.new_empty(x.shape, dtype=quant_dtype or torch.int8),
            x.new_empty(x.shape[:-1], dtype=torch.float32))


def _topk_softmax_impl(x: Tensor, k: int, renormalize: bool,
                       index_dtype: Optional[torch.dtype]) -> Tuple[Tensor, Tensor]:
    return _rows.topk_softmax(x, k, renormalize, index_dtype=index_dtype)


def _topk_softmax_fake(x, k, renormalize, index_dtype):
    shape = tuple(x.shape[:-1]) + (k,)
    return (x.new_empty(shape, dtype=torch.float32),
            x.new_empty(shape, dtype=index_dtype or torch.int64))


# ---- reductions, elementwise -----------------------------------------------------------------
def _reduce_op(name, code):
    def impl(x: Tensor, dim: Optional[int], keepdim: bool,
             dtype: Optional[torch.dtype]) -> Tensor:
        return _reduce._reduce(code, name, x, dim, keepdim, dtype, None)

    def fake(x, dim, keepdim, dtype):
        shape, ydtype, _ = _reduce.output_spec(code, x, dim, keepdim, dtype)
        return x.new_empty(shape, dtype=ydtype)
    return impl, fake


def _unary_op(name, code):
    def impl(x: Tensor, scale: float, bias: float) -> Tensor:
        return _ew._unary(code, name, x, scale, bias, None)

    def fake(x, scale, bias):
        return x.new_empty(x.shape)
    return impl, fake


def _binary_op(name, code):
    def impl(a: Tensor, b: Tensor, scale: float, bias: float) -> Tensor:
        return _ew._binary(code, name, a, b, scale, bias, None)

    def fake(a, b, scale, bias):
        return a.new_empty(torch.broadcast_shapes(a.shape, b.shape))
    return impl, fake


def _copy_impl(x: Tensor) -> Tensor:
    return _ew.copy(x)


def _copy_fake(x):
    return x.new_empty(x.shape)


def _transpose_impl(x: Tensor, dim0: int, dim1: int) -> Tensor:
    return _ew.transpose(x, dim0, dim1)


def _transpose_fake(x, dim0, dim1):
    return x.new_empty(tuple(x.shape[:-2]) + (x.shape[-1], x.shape[-2]))


# ---- GEMM ------------------------------------------------------------------------------------
def _matmul_impl(a: Tensor, b: Tensor, bias: Optional[Tensor], activation: Optional[str],
                 out_dtype: Optional[torch.dtype], alpha: float, beta: float,
                 c: Optional[Tensor], d0: Optional[Tensor], d1: Optional[Tensor],
                 bias_per_row: bool, split_k: int, allow_tf32: bool) -> Tensor:
    return _gemm.matmul(a, b, bias, activation, out_dtype, alpha=alpha, beta=beta, c=c, d0=d0,
                        d1=d1, bias_per_row=bias_per_row, split_k=split_k,
                        allow_tf32=allow_tf32)


def _matmul_fake(a, b, bias, activation, out_dtype, alpha, beta, c, d0, d1, bias_per_row,
                 split_k, allow_tf32):
    return a.new_empty(_gemm.output_shape('matmul', a.shape, b.shape),
                       dtype=out_dtype or a.dtype)


def _grouped_matmul_impl(a: List[Tensor], b: List[Tensor], bias: List[Tensor],
                         activation: Optional[str], out_dtype: Optional[torch.dtype],
                         alpha: float) -> List[Tensor]:
    return _gemm.grouped_matmul(a, b, bias or None, activation, out_dtype, alpha=alpha)


def _grouped_matmul_fake(a, b, bias, activation, out_dtype, alpha):
    return [x.new_empty((x.shape[0], y.shape[1]), dtype=out_dtype or x.dtype)
            for x, y in zip(a, b)]


def _scaled_mm_impl(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor,
                    out_dtype: Optional[torch.dtype], bias: Optional[Tensor],
                    activation: Optional[str], alpha: float, scaling: Optional[str]) -> Tensor:
    return _fp8.scaled_mm(a, b, scale_a, scale_b, out_dtype=out_dtype, bias=bias,
                          activation=activation, alpha=alpha, scaling=scaling)


def _scaled_mm_fake(a, b, scale_a, scale_b, out_dtype, bias, activation, alpha, scaling):
    return a.new_empty(_fp8.output_shape('scaled_mm', a.shape, b.shape),
                       dtype=out_dtype or torch.bfloat16)


# ---- attention -----------------------------------------------------------------------------
def _attention_impl(q: Tensor, k: Tensor, v: Tensor, causal: bool, window_left: int,
                    window_right: int, softcap: float, scale: Optional[float],
                    alibi_slopes: Optional[Tensor], bias: Optional[Tensor],
                    cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
                    max_seqlen_q: Optional[int], max_seqlen_k: Optional[int], layout: str,
                    return_lse: bool) -> Tuple[Tensor, Tensor]:
    r = _attention_fn(
        q, k, v, causal=causal, window=(window_left, window_right), softcap=softcap,
        scale=scale, alibi_slopes=alibi_slopes, bias=bias, cu_seqlens_q=cu_seqlens_q,
        cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
        layout=layout, return_lse=return_lse)
    return r if return_lse else (r, _empty0(q, torch.float32))


def _attention_fake(q, k, v, causal, window_left, window_right, softcap, scale, alibi_slopes,
                    bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, layout,
                    return_lse):
    oshape, lshape = _attention_shapes(q, v, layout, cu_seqlens_q is not None)
    lse = q.new_empty(lshape if return_lse else (0,), dtype=torch.float32)
    return q.new_empty(oshape), lse


def _paged_attention_impl(q: Tensor, k_cache: Tensor, v_cache: Tensor,
                          block_table: Optional[Tensor], seqlens_k: Optional[Tensor],
                          kv_indptr: Optional[Tensor], kv_page_indices: Optional[Tensor],
                          kv_last_page_len: Optional[Tensor], cu_seqlens_q: Optional[Tensor],
                          max_seqlen_q: Optional[int], max_seqlen_k: int, kv_layout: str,
                          causal: bool, window_left: int, window_right: int, softcap: float,
                          scale: Optional[float], k_scale: Optional[Tensor],
                          v_scale: Optional[Tensor], error: Optional[Tensor],
                          return_lse: bool) -> Tuple[Tensor, Tensor]:
    r = _paged.paged_attention(
        q, k_cache, v_cache, block_table=block_table, seqlens_k=seqlens_k, kv_indptr=kv_indptr,
        kv_page_indices=kv_page_indices, kv_last_page_len=kv_last_page_len,
        cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
        kv_layout=kv_layout, causal=causal, window=(window_left, window_right),
        softcap=softcap, scale=scale, k_scale=k_scale, v_scale=v_scale, error=error,
        return_lse=return_lse)
    return r if return_lse else (r, _empty0(q, torch.float32))


def _paged_attention_fake(q, k_cache, v_cache, block_table, seqlens_k, kv_indptr,
                          kv_page_indices, kv_last_page_len, cu_seqlens_q, max_seqlen_q,
                          max_seqlen_k, kv_layout, causal, window_left, window_right, softcap,
                          scale, k_scale, v_scale, error, return_lse):
    oshape = tuple(q.shape[:-1]) + (v_cache.shape[-1],)
    if not return_lse:
        lshape = (0,)
    elif cu_seqlens_q is not None:
        lshape = (q.shape[1], q.shape[0])
    else:
        lshape = (q.shape[0], q.shape[2], q.shape[1])
    return q.new_empty(oshape), q.new_empty(lshape, dtype=torch.float32)


def _paged_kv_append_impl(k_new: Tensor, v_new: Tensor, cu_seqlens_new: Tensor,
                          k_cache: Tensor, v_cache: Tensor, block_table: Optional[Tensor],
                          seqlens_k: Optional[Tensor], kv_indptr: Optional[Tensor],
                          kv_page_indices: Optional[Tensor],
                          kv_last_page_len: Optional[Tensor], max_seqlen_new: Optional[int],
                          kv_layout: str, k_scale: Optional[Tensor], v_scale: Optional[Tensor],
                          error: Optional[Tensor]) -> None:
    _paged.paged_kv_append(
        k_new, v_new, cu_seqlens_new, k_cache, v_cache, block_table=block_table,
        seqlens_k=seqlens_k, kv_indptr=kv_indptr, kv_page_indices=kv_page_indices,
        kv_last_page_len=kv_last_page_len, max_seqlen_new=max_seqlen_new, kv_layout=kv_layout,
        k_scale=k_scale, v_scale=v_scale, error=error)


def _paged_kv_append_fake(*args):
    return None


def register():
    """Registers every ckjit:: op (idempotent)."""
    _register('softmax', _softmax_impl, _softmax_fake)
    _register('layer_norm', _layer_norm_impl, _layer_norm_fake)
    _register('rms_norm', _rms_norm_impl, _rms_norm_fake)
    _register('rms_norm_quant', _rms_norm_quant_impl, _rms_norm_quant_fake)
    _register('smoothquant', _smoothquant_impl, _smoothquant_fake)
    _register('topk_softmax', _topk_softmax_impl, _topk_softmax_fake)
    for name, code in _reduce.OPS.items():
        _register(name, *_reduce_op(name, code))
    for name, code in _ew.UNARY_CODES.items():
        _register(name, *_unary_op(name, code))
    for name, code in _ew.BINARY_CODES.items():
        _register(name, *_binary_op(name, code))
    _register('copy', _copy_impl, _copy_fake)
    _register('transpose', _transpose_impl, _transpose_fake)
    _register('matmul', _matmul_impl, _matmul_fake)
    _register('grouped_matmul', _grouped_matmul_impl, _grouped_matmul_fake)
    _register('scaled_mm', _scaled_mm_impl, _scaled_mm_fake)
    _register('attention', _attention_impl, _attention_fake)
    _register('paged_attention', _paged_attention_impl, _paged_attention_fake,
              mutates_args=('error',))
    _register('paged_kv_append', _paged_kv_append_impl, _paged_kv_append_fake,
              mutates_args=('k_cache', 'v_cache', 'error'))


# ---- the compile-path wrappers (the public functions' `_ops.X`) --------------------------------
def _shape_list(normalized_shape):
    return [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)


def softmax(x, dim, scale, valid_cols, log, out):
    return _into(out, OPS['softmax'](x, dim, float(scale), valid_cols, log))


def norm(x, normalized_shape, weight, bias, eps, residual, out, residual_out, layer):
    ns = _shape_list(normalized_shape)
    if layer:
        y, h = OPS['layer_norm'](x, ns, weight, bias, float(eps), residual)
    else:
        y, h = OPS['rms_norm'](x, ns, weight, None if eps is None else float(eps), residual)
    y = _into(out, y)
    return y if residual is None else (y, _into(residual_out, h))


def rms_norm_quant(x, normalized_shape, weight, eps, residual, quant_dtype, out, scale_out,
                   residual_out):
    q, scale, h = OPS['rms_norm_quant'](x, _shape_list(normalized_shape), weight,
                                        None if eps is None else float(eps), residual,
                                        quant_dtype)
    q, scale = _into(out, q), _into(scale_out, scale)
    return (q, scale) if residual is None else (q, scale, _into(residual_out, h))


def smoothquant(x, smooth_scale, quant_dtype, out, scale_out):
    q, scale = OPS['smoothquant'](x, smooth_scale, quant_dtype)
    return _into(out, q), _into(scale_out, scale)


def topk_softmax(x, k, renormalize, index_dtype, out, indices_out):
    w, i = OPS['topk_softmax'](x, int(k), bool(renormalize), index_dtype)
    return _into(out, w), _into(indices_out, i)


def reduce(name, x, dim, keepdim, dtype, out):
    return _into(out, OPS[name](x, dim, bool(keepdim), dtype))


def unary(name, x, scale, bias, out):
    return _into(out, OPS[name](x, float(scale), float(bias)))


def binary(name, a, b, scale, bias, out):
    return _into(out, OPS[name](a, b, float(scale), float(bias)))


def copy(x, out):
    return _into(out, OPS['copy'](x))


def transpose(x, dim0, dim1, out):
    return _into(out, OPS['transpose'](x, dim0, dim1))


def matmul(a, b, bias, activation, out_dtype, alpha, beta, c, d0, d1, bias_per_row, split_k,
           allow_tf32, out):
    return _into(out, OPS['matmul'](a, b, bias, activation, out_dtype, float(alpha),
                                    float(beta), c, d0, d1, bool(bias_per_row), int(split_k),
                                    bool(allow_tf32)))


def grouped_matmul(a, b, bias, activation, out_dtype, alpha, out):
    ys = OPS['grouped_matmul'](a, b, list(bias or []), activation, out_dtype, float(alpha))
    return ys if out is None else [_into(o, y) for o, y in zip(out, ys)]


def scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, activation, alpha, scaling, out):
    return _into(out, OPS['scaled_mm'](a, b, scale_a, scale_b, out_dtype, bias, activation,
                                       float(alpha), scaling))


def _window(window):
    return (-1, -1) if window is None else (int(window[0]), int(window[1]))


def attention(q, k, v, causal, window, softcap, scale, alibi_slopes, bias, cu_seqlens_q,
              cu_seqlens_k, max_seqlen_q, max_seqlen_k, layout, return_lse, out, lse_out):
    wl, wr = _window(window)
    want_lse = bool(return_lse or lse_out is not None)
    o, lse = OPS['attention'](q, k, v, bool(causal), wl, wr, float(softcap),
                              None if scale is None else float(scale), alibi_slopes, bias,
                              cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, layout,
                              want_lse)
    o = _into(out, o)
    if want_lse:
        lse = _into(lse_out, lse)
    return (o, lse) if return_lse else o


def paged_attention(q, k_cache, v_cache, block_table, seqlens_k, kv_indptr, kv_page_indices,
                    kv_last_page_len, cu_seqlens_q, max_seqlen_q, max_seqlen_k, kv_layout,
                    causal, window, softcap, scale, k_scale, v_scale, error, return_lse, out,
                    lse_out):
    wl, wr = _window(window)
    want_lse = bool(return_lse or lse_out is not None)
    o, lse = OPS['paged_attention'](q, k_cache, v_cache, block_table, seqlens_k, kv_indptr,
                                    kv_page_indices, kv_last_page_len, cu_seqlens_q,
                                    max_seqlen_q, int(max_seqlen_k), kv_layout, bool(causal),
                                    wl, wr, float(softcap),
                                    None if scale is None else float(scale), k_scale, v_scale,
                                    error, want_lse)
    o = _into(out, o)
    if want_lse:
        lse = _into(lse_out, lse)
    return (o, lse) if return_lse else o


def paged_kv_append(k_new, v_new, cu_seqlens_new, k_cache, v_cache, block_table, seqlens_k,
                    kv_indptr, kv_page_indices, kv_last_page_len, max_seqlen_new, kv_layout,
                    k_scale, v_scale, error):
    OPS['paged_kv_append'](k_new, v_new, cu_seqlens_new, k_cache, v_cache, block_table,
                           seqlens_k, kv_indptr, kv_page_indices, kv_last_page_len,
                           max_seqlen_new, kv_layout, k_scale, v_scale, error)
