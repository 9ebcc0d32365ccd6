"""Row ops: softmax, log_softmax, layer_norm, rms_norm, rms_norm_quant, smoothquant,
topk_softmax.

Layout: each op works on rows x cols matrices whose columns (the reduced dims) are
contiguous and whose rows share one stride.  An input that has this form after
flattening its leading dims (e.g. a slice x[:, :n] or a row-strided view) is passed
with its row stride, no copy; any other layout is copied with .contiguous() first.
Outputs are allocated contiguous; an out= tensor of another layout is written through
a temporary and copied.

Every op runs on its input's device, on torch's current stream of that device, without
synchronizing; it is eager (outputs do not track gradients).
"""
import threading

from . import _structs as S
from ._lib import error as _error, lib as _lib
from ._torch_env import (as_rows as _as_rows, check_out as _check_out,
                         check_tensor as _check_tensor, fail_input as _fail_input,
                         normalized_cols as _normalized_cols, out_target as _target)

_c_softmax = _lib.ckjit_softmax
_c_softmax_prepare = _lib.ckjit_softmax_prepare
_c_prepared_run = _lib.ckjit_prepared_run
_c_layernorm = _lib.ckjit_layernorm2d
_c_rmsnorm = _lib.ckjit_rmsnorm2d
_c_rmsnorm_quant = _lib.ckjit_rmsnorm2d_quant
_c_smoothquant = _lib.ckjit_smoothquant
_c_topk_softmax = _lib.ckjit_topk_softmax

_tls = threading.local()
_NORM_PACK = S.packer(S.NormParams, 'eps', 'rstd_out')[0].pack_into
_CACHE_LIMIT = 4096
# Parameter structs that do not change between calls (same eps and weight: a model's
# layers) are built once and kept; the C call gets their address.  Entries are never
# freed (a thread may be about to pass one), so the cache stops growing at its limit
# and further keys use the per-thread struct.
_norm_cache, _softmax_cache, _keep = {}, {}, []
# Prepared softmax calls (ckjit_prepared_run: the C side skips its checks and planning,
# and the call passes 4 arguments instead of 9), by (shape, dtype, device, scale, log) of
# contiguous inputs.  Never freed, like the parameter structs (a thread may be running
# one); the table stops growing at _CACHE_LIMIT and further shapes take the full path.
_prepared = {}


def _bind(env):
    global _compiling, _raw_stream, _current_device, _guard, _FLOAT, _CODE, _EPS, _ops
    global _torch, _empty_like
    _compiling, _raw_stream, _current_device = env.compiling, env.raw_stream, env.current_device
    _guard, _FLOAT, _CODE, _EPS, _ops = env.device_guard, env.float_dtypes, env.dtype_code, \
        env.eps, env.ops
    _torch, _empty_like = env.torch, env.empty_like


def _thread_struct(name, cls):
    """This thread's instance of cls (a parameter struct reused by every call of this
    thread; ctypes releases the GIL during a call, so threads cannot share one)."""
    inst = cls()
    setattr(_tls, name, (inst, S.ctypes.addressof(inst)))
    return getattr(_tls, name)


def _norm_params(eps, wp, bp):
    """Address of a cached ckjit_norm_params for (eps, weight, bias) without residual."""
    key = (eps, wp, bp)
    addr = _norm_cache.get(key)
    if addr is None:
        if len(_norm_cache) >= _CACHE_LIMIT:
            return _norm_params_tls(eps, wp, bp, 0, 0, 0, 0)
        p = S.NormParams(eps, wp, bp)
        _keep.append(p)
        addr = _norm_cache[key] = S.ctypes.addressof(p)
    return addr


def _norm_params_tls(eps, wp, bp, rp, ld_r, sp, ld_s):
    try:
        p, addr = _tls.norm
    except AttributeError:
        p, addr = _thread_struct('norm', S.NormParams)
    _NORM_PACK(p, 0, eps, wp, bp, rp, ld_r, sp, ld_s, 0, 0)
    return addr


def _softmax_params(scale, log, vp):
    if not vp:
        key = (scale, log)
        addr = _softmax_cache.get(key)
        if addr is None:
            p = S.SoftmaxParams(scale, log, None)
            _keep.append(p)
            addr = _softmax_cache[key] = S.ctypes.addressof(p)
        return addr
    try:
        p, addr = _tls.softmax
    except AttributeError:
        p, addr = _thread_struct('softmax', S.SoftmaxParams)
    p.scale, p.log, p.valid_cols = scale, log, vp
    return addr


# ---- softmax -------------------------------------------------------------------------------
def softmax(x, dim=-1, scale=1.0, *, valid_cols=None, out=None):
    """softmax(scale * x) over `dim` (torch.softmax(x * scale, dim)), computed in f32.

    x: float32/float16/bfloat16 CUDA tensor.  dim: the last dim takes row-strided views
    as they are; another dim is moved last (a copy) and the result returned as a view
    of that copy.  valid_cols: optional int32 tensor with one entry per row (x.shape[:-1],
    last dim only): only the first valid_cols[r] columns of row r take part, the rest
    are written 0.  out: optional tensor of x's shape and dtype.
    """
    if _compiling():
        return _ops.softmax(x, dim, scale, valid_cols, False, out)
    if out is None and valid_cols is None and dim == -1:
        y = _softmax_prepared(x, scale, 0)
        if y is not None:
            return y
    return _softmax(x, dim, scale, valid_cols, out, 0, 'softmax')


def log_softmax(x, dim=-1, scale=1.0, *, valid_cols=None, out=None):
    """log(softmax(scale * x)) over `dim`; masked columns (valid_cols) are -inf.
    Otherwise as ckjit.softmax."""
    if _compiling():
        return _ops.softmax(x, dim, scale, valid_cols, True, out)
    if out is None and valid_cols is None and dim == -1:
        y = _softmax_prepared(x, scale, 1)
        if y is not None:
            return y
    return _softmax(x, dim, scale, valid_cols, out, 1, 'log_softmax')


def _softmax_prepared(x, scale, log):
    """A shape seen before: y through its prepared call (made by _softmax's first call),
    else None (the full path)."""
    try:
        dev = x.get_device()
        h = _prepared.get((x.shape, x.dtype, dev, scale, log))
    except (AttributeError, TypeError):  # not a tensor, an unhashable scale
        return None
    if h is None or not x.is_contiguous():
        return None
    y = _empty_like(x)
    # Refused (the NULL stream of another current device, a shutdown): None, and the
    # full path copes or says why.
    return None if _c_prepared_run(h, x.data_ptr(), y.data_ptr(), _raw_stream(dev)) else y


def _softmax(x, dim, scale, valid_cols, out, log, op):
    xin = x
    dt = _FLOAT.get(getattr(x, 'dtype', None))
    dev = x.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'x', x, _FLOAT)
    s = _raw_stream(dev)
    if not s and dev != _current_device():  # the NULL stream belongs to the current device
        with _guard(dev):
            return _softmax(x, dim, scale, valid_cols, out, log, op)
    shape = x.shape
    nd = len(shape)
    if dim != -1 and dim != nd - 1:
        if not -max(nd, 1) <= dim < max(nd, 1):
            raise IndexError(f'ckjit.{op}: dim {dim} is out of range for a {nd}-d tensor')
        if nd > 1:
            return _softmax_moved(x, dim, scale, valid_cols, out, log, op)
    # The common case -- a contiguous input, no out= or a contiguous one -- without the
    # layout analysis (each tensor method call costs host time).
    if nd and x.is_contiguous():
        cols = shape[-1]
        rows = shape[0] if nd == 2 else (x.numel() // cols if cols else 0)
        ld = cols
    else:
        x, rows, cols, ld = _as_rows(x)
        shape = x.shape
    if out is None:
        y = yt = _empty_like(x) if ld == cols else x.new_empty(shape)
        ldy = cols
    elif out.dtype is x.dtype and out.is_contiguous() and out.shape == shape and \
            out.get_device() == dev:
        y = yt = out
        ldy = cols
    else:
        yt = out
        y, ldy = _target(op, out, shape, x.dtype, dev)
        if y is None:
            y, ldy = x.new_empty(shape), cols
    if rows == 0 or cols == 0:
        return yt
    vp = 0
    if valid_cols is not None:
        _check_tensor(op, 'valid_cols', valid_cols, dev, _torch.int32)
        if valid_cols.numel() != rows:
            raise ValueError(f'ckjit.{op}: valid_cols has {valid_cols.numel()} entries; '
                             f'expected one per row ({rows})')
        vp = valid_cols.contiguous().data_ptr()
    params = 0 if (scale == 1.0 and not log and not vp) else _softmax_params(scale, log, vp)
    if out is None and not vp and ld == cols and dim == -1 and x is xin:
        _prepare_softmax(x, dt, rows, cols, dev, scale, log, params)
    st = _c_softmax(dt, rows, cols, x.data_ptr(), ld, y.data_ptr(), ldy, params, s)
    if st:
        raise _error(st, 'ckjit_softmax')
    if y is not yt:
        yt.copy_(y)
    return yt


def _prepare_softmax(x, dt, rows, cols, dev, scale, log, params):
    """Prepares this contiguous shape for softmax()'s fast path (once per key)."""
    key = (x.shape, x.dtype, dev, scale, log)
    if key in _prepared or len(_prepared) >= _CACHE_LIMIT:
        return
    h = S.PTR()
    if not _c_softmax_prepare(dt, rows, cols, cols, cols, params, dev, S.ctypes.byref(h)):
        _prepared.setdefault(key, h.value)  # a racing thread's twin is leaked, never freed


def _softmax_moved(x, dim, scale, valid_cols, out, log, op):
    if valid_cols is not None:
        raise ValueError(f'ckjit.{op}: valid_cols needs dim=-1 (it masks the last dim)')
    y = _softmax(x.movedim(dim, -1), -1, scale, None, None, log, op).movedim(-1, dim)
    if out is None:
        return y
    _check_out(op, out, x.shape, x.dtype, x.get_device())
    return out.copy_(y)


# ---- layer_norm, rms_norm ------------------------------------------------------------------
def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, residual=None, *,
               out=None, residual_out=None):
    """torch.nn.functional.layer_norm over the trailing `normalized_shape` dims (biased
    variance, f32 math), with an optional fused residual add.

    residual: a tensor of x's shape and dtype; then h = x + residual (rounded to x's
    dtype) is normalized and also written to residual_out (allocated when not given;
    pass residual_out=residual to update it in place), and the call returns
    (y, residual_out).  Without residual it returns y.  weight and bias: x's dtype,
    `normalized_shape` elements.  Row-strided views of x pass as they are.
    """
    if _compiling():
        return _ops.norm(x, normalized_shape, weight, bias, eps, residual, out,
                         residual_out, True)
    return _norm(_c_layernorm, 'layer_norm', x, normalized_shape, weight, bias, eps, residual,
                 out, residual_out)


def rms_norm(x, normalized_shape, weight=None, eps=None, residual=None, *, out=None,
             residual_out=None):
    """torch.nn.functional.rms_norm: y = x / sqrt(mean(x^2) + eps) * weight over the
    trailing `normalized_shape` dims, f32 math.  eps None: torch.finfo(x.dtype).eps, as
    torch.  residual: fused add as in ckjit.layer_norm (returns (y, residual_out))."""
    if _compiling():
        return _ops.norm(x, normalized_shape, weight, None, eps, residual, out,
                         residual_out, False)
    return _norm(_c_rmsnorm, 'rms_norm', x, normalized_shape, weight, None, eps, residual,
                 out, residual_out)


def _norm_input(op, x, normalized_shape):
    """(dtype code, device, x as rows, rows, cols, ld) of a norm's input."""
    dt = _FLOAT.get(getattr(x, 'dtype', None))
    dev = x.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'x', x, _FLOAT)
    ns = normalized_shape
    if type(ns) is int:
        ns = (ns,)
    if len(ns) == 1 and x.dim() >= 1 and x.shape[-1] == ns[0]:
        nd = 1
    else:
        nd = _normalized_cols(op, x, ns)[0]
    return (dt, dev) + _as_rows(x, nd) + (nd,)


def _vector(op, name, t, x, dev, cols):
    """Data pointer of a weight/bias vector: x's dtype and device, `cols` elements."""
    if t.dtype is not x.dtype or t.get_device() != dev:
        _check_tensor(op, name, t, dev, x.dtype)
    if t.numel() != cols:
        raise ValueError(f'ckjit.{op}: {name} has {t.numel()} elements; expected {cols} '
                         '(the normalized shape)')
    return (t if t.is_contiguous() else t.contiguous()).data_ptr()


def _residual(op, x, residual, residual_out, dev, nd, cols):
    """(residual rows view, its ld, sum_out to write, its ld, the tensor to return)."""
    if residual.dtype is not x.dtype or residual.get_device() != dev:
        _check_tensor(op, 'residual', residual, dev, x.dtype)
    if residual.shape != x.shape:
        raise ValueError(f'ckjit.{op}: residual has shape {tuple(residual.shape)}; expected '
                         f'{tuple(x.shape)}')
    r, _, _, ld_r = _as_rows(residual, nd)
    if residual_out is None:
        h = x.new_empty(x.shape)
        return r, ld_r, h, cols, h
    h, ld_h = _target(op, residual_out, x.shape, x.dtype, dev, nd, 'residual_out')
    if h is None:
        h, ld_h = x.new_empty(x.shape), cols
    return r, ld_r, h, ld_h, residual_out


def _norm(fn, op, x, normalized_shape, weight, bias, eps, residual, out, residual_out):
    dt = _FLOAT.get(getattr(x, 'dtype', None))
    dev = x.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'x', x, _FLOAT)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return _norm(fn, op, x, normalized_shape, weight, bias, eps, residual, out,
                         residual_out)
    ns, shape = normalized_shape, x.shape
    if shape and (ns == shape[-1] if type(ns) is int else len(ns) == 1 and ns[0] == shape[-1]) \
            and x.is_contiguous():  # the common case: a contiguous input, one normalized dim
        nd, cols = 1, shape[-1]
        rows = shape[0] if len(shape) == 2 else (x.numel() // cols if cols else 0)
        ld = cols
    else:
        _, _, x, rows, cols, ld, nd = _norm_input(op, x, normalized_shape)
    if out is None:
        y = yt = _empty_like(x) if ld == cols else x.new_empty(x.shape)
        ldy = cols
    elif out.dtype is x.dtype and out.is_contiguous() and out.shape == x.shape and \
            out.get_device() == dev:
        y = yt = out
        ldy = cols
    else:
        yt = out
        y, ldy = _target(op, out, x.shape, x.dtype, dev, nd)
        if y is None:
            y, ldy = x.new_empty(x.shape), cols
    if eps is None:
        eps = _EPS[dt]
    wp = bp = 0
    if bias is not None:
        bp = _vector(op, 'bias', bias, x, dev, cols)
        if weight is None:  # the C op takes a bias only with a weight
            weight = x.new_ones(cols)
    if weight is not None:
        if weight.dtype is x.dtype and weight.get_device() == dev and \
                weight.numel() == cols and weight.is_contiguous():
            wp = weight.data_ptr()
        else:
            wp = _vector(op, 'weight', weight, x, dev, cols)
    if residual is None:
        if rows and cols:
            st = fn(dt, rows, cols, x.data_ptr(), ld, y.data_ptr(), ldy,
                    _norm_params(eps, wp, bp), s)
            if st:
                raise _error(st, op)
            if y is not yt:
                yt.copy_(y)
        return yt
    r, ld_r, h, ld_h, ht = _residual(op, x, residual, residual_out, dev, nd, cols)
    if rows and cols:
        params = _norm_params_tls(eps, wp, bp, r.data_ptr(), ld_r, h.data_ptr(), ld_h)
        st = fn(dt, rows, cols, x.data_ptr(), ld, y.data_ptr(), ldy, params, s)
        if st:
            raise _error(st, op)
        if y is not yt:
            yt.copy_(y)
        if h is not ht:
            ht.copy_(h)
    return yt, ht


# ---- quantization --------------------------------------------------------------------------
def _quant_code(op, quant_dtype):
    qd = _torch.int8 if quant_dtype is None else quant_dtype
    code = _CODE.get(qd)
    if code not in (S.I8_DT, S.FP8_E4M3_DT):
        raise TypeError(f'ckjit.{op}: quant_dtype {qd} is not supported (torch.int8 or '
                        'torch.float8_e4m3fn)')
    return qd, code


def _quant_outputs(op, x, dev, nd, qd, out, scale_out):
    """(q to write, ld_q, q to return, scale to write, scale to return)."""
    scale_shape = tuple(x.shape[:x.dim() - nd])
    if out is None:
        q = qt = x.new_empty(x.shape, dtype=qd)
        ld_q = _as_rows(q, nd)[3]
    else:
        qt = out
        q, ld_q = _target(op, out, x.shape, qd, dev, nd)
        if q is None:
            q = x.new_empty(x.shape, dtype=qd)
            ld_q = _as_rows(q, nd)[3]
    f32 = _torch.float32
    if scale_out is None:
        sc = sct = x.new_empty(scale_shape, dtype=f32)
    else:
        _check_out(op, scale_out, scale_shape, f32, dev, 'scale_out')
        sct = scale_out
        sc = scale_out if scale_out.is_contiguous() else x.new_empty(scale_shape, dtype=f32)
    return q, ld_q, qt, sc, sct


def rms_norm_quant(x, normalized_shape, weight=None, eps=None, residual=None, *,
                   quant_dtype=None, out=None, scale_out=None, residual_out=None):
    """rms_norm (optionally with the fused residual add) followed by rowwise dynamic
    quantization: returns (q, row_scale) or, with residual, (q, row_scale, residual_out).

    q: quant_dtype (torch.int8, the default, or torch.float8_e4m3fn), x's shape;
    row_scale: float32 of x.shape without the normalized dims, max|v| / 127 (or / 448),
    so that q * row_scale dequantizes.  eps None: torch.finfo(x.dtype).eps.
    """
    if _compiling():
        return _ops.rms_norm_quant(x, normalized_shape, weight, eps, residual, quant_dtype,
                                   out, scale_out, residual_out)
    op = 'rms_norm_quant'
    dt, dev, x, rows, cols, ld, nd = _norm_input(op, x, normalized_shape)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return rms_norm_quant(x, normalized_shape, weight, eps, residual,
                                  quant_dtype=quant_dtype, out=out, scale_out=scale_out,
                                  residual_out=residual_out)
    qd, qcode = _quant_code(op, quant_dtype)
    q, ld_q, qt, sc, sct = _quant_outputs(op, x, dev, nd, qd, out, scale_out)
    wp = 0 if weight is None else _vector(op, 'weight', weight, x, dev, cols)
    eps = _EPS[dt] if eps is None else eps
    h = ht = None
    if residual is None:
        params = _norm_params(eps, wp, 0)
    else:
        r, ld_r, h, ld_h, ht = _residual(op, x, residual, residual_out, dev, nd, cols)
        params = _norm_params_tls(eps, wp, 0, r.data_ptr(), ld_r, h.data_ptr(), ld_h)
    if rows and cols:
        st = _c_rmsnorm_quant(dt, rows, cols, x.data_ptr(), ld, params, qcode, q.data_ptr(),
                              ld_q, sc.data_ptr(), s)
        if st:
            raise _error(st, op)
        for written, wanted in ((q, qt), (sc, sct), (h, ht)):
            if written is not wanted:
                wanted.copy_(written)
    return (qt, sct) if residual is None else (qt, sct, ht)


def smoothquant(x, smooth_scale, *, quant_dtype=None, out=None, scale_out=None):
    """Per-column smoothing v = x * smooth_scale (float32, x.shape[-1] elements), then
    rowwise dynamic quantization as ckjit.rms_norm_quant: returns (q, row_scale)."""
    if _compiling():
        return _ops.smoothquant(x, smooth_scale, quant_dtype, out, scale_out)
    op = 'smoothquant'
    dt = _FLOAT.get(getattr(x, 'dtype', None))
    dev = x.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'x', x, _FLOAT)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return smoothquant(x, smooth_scale, quant_dtype=quant_dtype, out=out,
                               scale_out=scale_out)
    x, rows, cols, ld = _as_rows(x)
    _check_tensor(op, 'smooth_scale', smooth_scale, dev, _torch.float32)
    if smooth_scale.numel() != cols:
        raise ValueError(f'ckjit.{op}: smooth_scale has {smooth_scale.numel()} elements; '
                         f'expected {cols} (x.shape[-1])')
    qd, qcode = _quant_code(op, quant_dtype)
    q, ld_q, qt, sc, sct = _quant_outputs(op, x, dev, 1, qd, out, scale_out)
    if rows and cols:
        st = _c_smoothquant(dt, rows, cols, x.data_ptr(), ld,
                            smooth_scale.contiguous().data_ptr(), qcode, q.data_ptr(), ld_q,
                            sc.data_ptr(), s)
        if st:
            raise _error(st, op)
        for written, wanted in ((q, qt), (sc, sct)):
            if written is not wanted:
                wanted.copy_(written)
    return qt, sct


# ---- MoE gating ------------------------------------------------------------------------------
def topk_softmax(gating_output, k, renormalize=False, *, index_dtype=None, out=None,
                 indices_out=None):
    """MoE gating: p = softmax(gating_output) over the last dim (experts <= 256, f32),
    then the k largest (k <= 8; ties: lower expert first): returns (weights, indices),
    both of shape gating_output.shape[:-1] + (k,); weights float32, indices index_dtype
    (torch.int64, the default, or torch.int32).  renormalize: weights / their sum.
    As torch.softmax + torch.topk, a row with NaN or +inf gets NaN weights, indices 0..k-1.
    """
    if _compiling():
        return _ops.topk_softmax(gating_output, k, renormalize, index_dtype, out,
                                 indices_out)
    op, x = 'topk_softmax', gating_output
    dt = _FLOAT.get(getattr(x, 'dtype', None))
    dev = x.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'gating_output', x, _FLOAT)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return topk_softmax(x, k, renormalize, index_dtype=index_dtype, out=out,
                                indices_out=indices_out)
    if x.dim() < 1:
        raise ValueError(f'ckjit.{op}: gating_output must have an experts dim')
    idx_dt = _torch.int64 if index_dtype is None else index_dtype
    icode = _CODE.get(idx_dt)
    if icode not in (S.I32_DT, S.I64_DT):
        raise TypeError(f'ckjit.{op}: index_dtype {idx_dt} is not torch.int32 or torch.int64')
    x, rows, cols, ld = _as_rows(x)
    shape = tuple(x.shape[:-1]) + (k,)
    outs = []
    for given, dtype, name in ((out, _torch.float32, 'out'), (indices_out, idx_dt,
                                                               'indices_out')):
        if given is None:
            outs.append((x.new_empty(shape, dtype=dtype),) * 2)
        else:
            _check_out(op, given, shape, dtype, dev, name)
            outs.append((given if given.is_contiguous() else x.new_empty(shape, dtype=dtype),
                         given))
    (w, wt), (i, it) = outs
    if rows and cols and k > 0:
        st = _c_topk_softmax(dt, rows, cols, x.data_ptr(), ld, k, 1 if renormalize else 0,
                             w.data_ptr(), icode, i.data_ptr(), s)
        if st:
            raise _error(st, op)
        for written, wanted in ((w, wt), (i, it)):
            if written is not wanted:
                wanted.copy_(written)
    return wt, it
