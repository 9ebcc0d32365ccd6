"""Elementwise ops, a strided copy and a batched transpose.

Unary: identity, relu, gelu_tanh, gelu_erf (and gelu(x, approximate=...), torch's name),
silu, sigmoid.  Binary: add, sub, mul, div, maximum, minimum (NaN-propagating, as
torch.maximum / torch.minimum).  Each computes y = scale * op(...) + bias in f32 (the
keyword-only scale and bias are a fused epilogue; the defaults compile none).

Layout: as the row ops: an input whose leading dims flatten to rows with one row
stride and contiguous last dim passes as it is, anything else is copied with
.contiguous().  Binary operands must have one dtype; different shapes are broadcast
with torch.broadcast_tensors and then materialized (a copy), so pass equal shapes on
hot paths.  copy(x) is ckjit_copy2d into a new contiguous tensor (or out=).
transpose(x) swaps the last two dims into a new contiguous tensor, leading dims
batched; an input whose last two dims are not a row-major matrix with one batch
stride is copied first.
"""
import threading

from . import _structs as S
from ._lib import error as _error, lib as _lib
from ._torch_env import (as_rows as _as_rows, check_tensor as _check_tensor,
                         fail_input as _fail_input, out_target as _target)

_c_unary = _lib.ckjit_unary
_c_binary = _lib.ckjit_binary
_c_copy2d = _lib.ckjit_copy2d
_c_transpose = _lib.ckjit_transpose

_tls = threading.local()
_epilogues, _keep = {}, []
_CACHE_LIMIT = 4096


def _bind(env):
    global _compiling, _raw_stream, _current_device, _guard, _FLOAT, _ops, _torch, _empty_like
    _compiling, _raw_stream, _current_device = env.compiling, env.raw_stream, env.current_device
    _guard, _FLOAT, _ops, _torch = env.device_guard, env.float_dtypes, env.ops, env.torch
    _empty_like = env.empty_like


def _epilogue(scale, bias):
    """Address of a ckjit_epilogue {scale, bias}: cached per value pair (never freed: a
    thread may be about to pass it), per thread past the cache's limit."""
    addr = _epilogues.get((scale, bias))
    if addr is None:
        if len(_epilogues) >= _CACHE_LIMIT:
            try:
                e, addr = _tls.epilogue
            except AttributeError:
                e = S.Epilogue()
                _tls.epilogue = e, S.ctypes.addressof(e)
                addr = _tls.epilogue[1]
            e.scale, e.bias = scale, bias
            return addr
        e = S.Epilogue(scale, bias)
        _keep.append(e)
        addr = _epilogues[(scale, bias)] = S.ctypes.addressof(e)
    return addr


def _output(op, x, dev, out, cols, ld):
    """(y to write, ld_y, tensor to return); x's layout is rows x cols with row stride ld."""
    if out is None:
        y = _empty_like(x) if ld == cols else x.new_empty(x.shape)
        return y, cols, y
    y, ldy = _target(op, out, x.shape, x.dtype, dev)
    if y is None:
        return x.new_empty(x.shape), cols, out
    return y, ldy, out


def _unary(code, op, x, scale, bias, out):
    dt = _FLOAT.get(getattr(x, 'dtype', None))
    dev = x.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'x', x, _FLOAT)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return _unary(code, op, x, scale, bias, out)
    x, rows, cols, ld = _as_rows(x)
    y, ldy, yt = _output(op, x, dev, out, cols, ld)
    if rows and cols:
        epi = 0 if (scale == 1.0 and bias == 0.0) else _epilogue(scale, bias)
        st = _c_unary(code, dt, rows, cols, x.data_ptr(), ld, y.data_ptr(), ldy, epi, s)
        if st:
            raise _error(st, 'ckjit_unary')
        if y is not yt:
            yt.copy_(y)
    return yt


def _binary(code, op, a, b, scale, bias, out):
    dt = _FLOAT.get(getattr(a, 'dtype', None))
    dev = a.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'a', a, _FLOAT)
    if getattr(b, 'dtype', None) is not a.dtype or b.get_device() != dev:
        _check_tensor(op, 'b', b, dev, a.dtype)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return _binary(code, op, a, b, scale, bias, out)
    if a.shape != b.shape:
        try:
            a, b = _torch.broadcast_tensors(a, b)
        except RuntimeError as e:
            raise ValueError(f'ckjit.{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} do not '
                             f'broadcast ({e})') from None
    a, rows, cols, lda = _as_rows(a)
    b, _, _, ldb = _as_rows(b)
    y, ldy, yt = _output(op, a, dev, out, cols, lda)
    if rows and cols:
        epi = 0 if (scale == 1.0 and bias == 0.0) else _epilogue(scale, bias)
        st = _c_binary(code, dt, rows, cols, a.data_ptr(), lda, b.data_ptr(), ldb,
                       y.data_ptr(), ldy, epi, s)
        if st:
            raise _error(st, 'ckjit_binary')
        if y is not yt:
            yt.copy_(y)
    return yt


def _make_unary(name, code, what):
    def fn(x, *, scale=1.0, bias=0.0, out=None):
        if _compiling():
            return _ops.unary(name, x, scale, bias, out)
        return _unary(code, name, x, scale, bias, out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f'y = scale * {what} + bias elementwise (f32 math), a new tensor of x\'s '
                  'shape and dtype (or out=).')
    return fn


def _make_binary(name, code, what):
    def fn(a, b, *, scale=1.0, bias=0.0, out=None):
        if _compiling():
            return _ops.binary(name, a, b, scale, bias, out)
        return _binary(code, name, a, b, scale, bias, out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f'y = scale * {what} + bias elementwise (f32 math); a and b of one dtype, '
                  'broadcast (materialized) when their shapes differ.')
    return fn


# Public name -> C op code (the custom-op registration uses these too).
UNARY_CODES = dict(S.UNARY_OPS)
BINARY_CODES = {'add': 0, 'sub': 1, 'mul': 2, 'div': 3, 'maximum': 4, 'minimum': 5}

identity = _make_unary('identity', S.UNARY_OPS['identity'], 'x')
relu = _make_unary('relu', S.UNARY_OPS['relu'], 'relu(x)')
gelu_tanh = _make_unary('gelu_tanh', S.UNARY_OPS['gelu_tanh'], "gelu(x, approximate='tanh')")
gelu_erf = _make_unary('gelu_erf', S.UNARY_OPS['gelu_erf'], "gelu(x, approximate='none')")
silu = _make_unary('silu', S.UNARY_OPS['silu'], 'silu(x)')
sigmoid = _make_unary('sigmoid', S.UNARY_OPS['sigmoid'], 'sigmoid(x)')
add = _make_binary('add', S.BINARY_OPS['add'], 'a + b')
sub = _make_binary('sub', S.BINARY_OPS['sub'], 'a - b')
mul = _make_binary('mul', S.BINARY_OPS['mul'], 'a * b')
div = _make_binary('div', S.BINARY_OPS['div'], 'a / b')
maximum = _make_binary('maximum', S.BINARY_OPS['max'], 'torch.maximum(a, b)')
minimum = _make_binary('minimum', S.BINARY_OPS['min'], 'torch.minimum(a, b)')


def gelu(x, approximate='none', *, scale=1.0, bias=0.0, out=None):
    """torch.nn.functional.gelu(x, approximate) ('none': erf, 'tanh'), with the epilogue."""
    if approximate == 'none':
        return gelu_erf(x, scale=scale, bias=bias, out=out)
    if approximate == 'tanh':
        return gelu_tanh(x, scale=scale, bias=bias, out=out)
    raise ValueError(f"ckjit.gelu: approximate must be 'none' or 'tanh', not {approximate!r}")


def copy(x, *, out=None):
    """A copy of x through ckjit_copy2d: a new contiguous tensor, or into out= (x's shape
    and dtype; a row-strided out is written in place)."""
    if _compiling():
        return _ops.copy(x, out)
    op = 'copy'
    dt = _FLOAT.get(getattr(x, 'dtype', None))
    dev = x.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'x', x, _FLOAT)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return copy(x, out=out)
    x, rows, cols, ld = _as_rows(x)
    y, ldy, yt = _output(op, x, dev, out, cols, ld)
    if rows and cols:
        st = _c_copy2d(dt, rows, cols, x.data_ptr(), ld, y.data_ptr(), ldy, s)
        if st:
            raise _error(st, 'ckjit_copy2d')
        if y is not yt:
            yt.copy_(y)
    return yt


def _batch_stride(shape, strides):
    """(batch, one stride) when the dims collapse to one strided dim, else None."""
    batch, stride, expect = 1, 0, None
    for size, st in zip(reversed(shape), reversed(strides)):
        if size == 1:
            continue
        if expect is None:
            stride, expect = st, st * size
        elif st != expect:
            return None
        else:
            expect *= size
        batch *= size
    return batch, stride


def transpose(x, dim0=-2, dim1=-1, *, out=None):
    """x.transpose(dim0, dim1) materialized as a new contiguous tensor (torch returns a
    view): only the last two dims (dim0/dim1 -2/-1 in either order); leading dims are a
    batch.  out=: a contiguous tensor of the transposed shape."""
    if _compiling():
        return _ops.transpose(x, dim0, dim1, out)
    op = 'transpose'
    dt = _FLOAT.get(getattr(x, 'dtype', None))
    dev = x.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'x', x, _FLOAT)
    nd = x.dim()
    if nd < 2 or {dim0 % nd, dim1 % nd} != {nd - 2, nd - 1}:
        raise ValueError(f'ckjit.transpose swaps the last two dims of a tensor of 2 or more '
                         f'dims; got dims ({dim0}, {dim1}) of a {nd}-d tensor')
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return transpose(x, dim0, dim1, out=out)
    shape = tuple(x.shape)
    rows, cols = shape[-2], shape[-1]
    oshape = shape[:-2] + (cols, rows)
    if out is None:
        y = yt = x.new_empty(oshape)
    else:
        _check_tensor(op, 'out', out, dev, x.dtype)
        if tuple(out.shape) != oshape:
            raise ValueError(f'ckjit.transpose: out has shape {tuple(out.shape)}; expected '
                             f'{oshape}')
        yt = out
        y = out if out.is_contiguous() else x.new_empty(oshape)
    if x.numel() == 0:
        return yt
    strides = x.stride()
    ok = (strides[-1] == 1 or cols == 1) and (rows == 1 or strides[-2] >= cols)
    bs = _batch_stride(shape[:-2], strides[:-2]) if ok else None
    if bs is None:
        x = x.contiguous()
        strides = x.stride()
        bs = _batch_stride(shape[:-2], strides[:-2])
    ld = strides[-2] if rows > 1 else cols
    batch, bstride = bs
    st = _c_transpose(dt, batch, rows, cols, x.data_ptr(), ld, bstride, y.data_ptr(), rows,
                      rows * cols, s)
    if st:
        raise _error(st, 'ckjit_transpose')
    if y is not yt:
        yt.copy_(y)
    return yt
