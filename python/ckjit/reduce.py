"""Reductions over one dimension: sum, mean, amax, amin, argmax, argmin.

ckjit_reduce takes a strided tensor of rank 1..4, so inputs pass with their strides:
size-1 dims are dropped and neighbouring dims that are contiguous with each other are
merged; only a tensor that still has more than 4 dims after that is copied
(.contiguous()).  A reduction over the last dim of a row-strided tensor goes to
ckjit_reduce_rows.  Accumulation is in f32; NaN propagates as in torch; argmax/argmin
return the first index of the extreme (or of the first NaN).

dim=None reduces over every element (the input is flattened, a copy when it is not
contiguous).  A tuple of dims is not supported (one dim per call).
"""
import threading

from . import _structs as S
from ._lib import error as _error, lib as _lib
from ._torch_env import check_out as _check_out, fail_input as _fail_input

_c_reduce = _lib.ckjit_reduce
_c_reduce_rows = _lib.ckjit_reduce_rows
_tls = threading.local()
_LAYOUT_PACK = S.packer(S.TensorLayout, 'rank', 'strides[3]')[0].pack_into


def _bind(env):
    global _compiling, _raw_stream, _current_device, _guard, _FLOAT, _CODE, _ops, _torch
    _compiling, _raw_stream, _current_device = env.compiling, env.raw_stream, env.current_device
    _guard, _FLOAT, _CODE, _ops, _torch = (env.device_guard, env.float_dtypes, env.dtype_code,
                                           env.ops, env.torch)


def sum(x, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A001 (torch's name)
    """torch.sum(x, dim, keepdim, dtype=dtype) for one dim (or all: dim=None).  dtype: the
    output's (float32/float16/bfloat16; default x's)."""
    if _compiling():
        return _ops.reduce('sum', x, dim, keepdim, dtype, out)
    return _reduce(0, 'sum', x, dim, keepdim, dtype, out)


def mean(x, dim=None, keepdim=False, *, dtype=None, out=None):
    """torch.mean(x, dim, keepdim, dtype=dtype) for one dim (or all)."""
    if _compiling():
        return _ops.reduce('mean', x, dim, keepdim, dtype, out)
    return _reduce(1, 'mean', x, dim, keepdim, dtype, out)


def amax(x, dim=None, keepdim=False, *, out=None):
    """torch.amax(x, dim, keepdim) for one dim (or all)."""
    if _compiling():
        return _ops.reduce('amax', x, dim, keepdim, None, out)
    return _reduce(2, 'amax', x, dim, keepdim, None, out)


def amin(x, dim=None, keepdim=False, *, out=None):
    """torch.amin(x, dim, keepdim) for one dim (or all)."""
    if _compiling():
        return _ops.reduce('amin', x, dim, keepdim, None, out)
    return _reduce(3, 'amin', x, dim, keepdim, None, out)


def argmax(x, dim=None, keepdim=False, *, dtype=None, out=None):
    """torch.argmax(x, dim, keepdim); dtype: torch.int64 (default, as torch) or torch.int32."""
    if _compiling():
        return _ops.reduce('argmax', x, dim, keepdim, dtype, out)
    return _reduce(4, 'argmax', x, dim, keepdim, dtype, out)


def argmin(x, dim=None, keepdim=False, *, dtype=None, out=None):
    """torch.argmin(x, dim, keepdim); dtype as for argmax."""
    if _compiling():
        return _ops.reduce('argmin', x, dim, keepdim, dtype, out)
    return _reduce(5, 'argmin', x, dim, keepdim, dtype, out)


OPS = {'sum': 0, 'mean': 1, 'amax': 2, 'amin': 3, 'argmax': 4, 'argmin': 5}


def output_spec(op, x, dim, keepdim, dtype):
    """(output shape, output dtype, normalized dim or None) of a reduction (also the
    fake implementation's shape rule)."""
    nd = x.dim()
    if dtype is None:
        dtype = _torch.int64 if op >= 4 else x.dtype
    if dim is None:
        return ((1,) * nd if keepdim else ()), dtype, None
    if not isinstance(dim, int):
        raise ValueError(f'ckjit.{_NAMES[op]}: dim must be one int or None (got {dim!r}); '
                         'ckjit reduces one dimension per call')
    span = max(nd, 1)
    if not -span <= dim < span:
        raise IndexError(f'ckjit.{_NAMES[op]}: dim {dim} is out of range for a {nd}-d tensor')
    d = dim % span
    shape = list(x.shape)
    if nd:
        if keepdim:
            shape[d] = 1
        else:
            del shape[d]
    return tuple(shape), dtype, d


_NAMES = {v: k for k, v in OPS.items()}


def _coalesced(shape, strides, d):
    """(shape, strides, dim) of the same elements with size-1 dims dropped (the reduced
    one kept) and mergeable neighbours merged, keeping the order of the kept dims."""
    sh, st, nd = [], [], None
    for i, (size, stride) in enumerate(zip(shape, strides)):
        if i == d:
            nd = len(sh)
            sh.append(size)
            st.append(stride)
        elif size != 1:
            if sh and len(sh) - 1 != nd and st[-1] == stride * size:
                sh[-1] *= size  # the previous dim steps over exactly this one: one dim
                st[-1] = stride
            else:
                sh.append(size)
                st.append(stride)
    return sh, st, nd


def _reduce(op, name, x, dim, keepdim, dtype, out):
    dt = _FLOAT.get(getattr(x, 'dtype', None))
    dev = x.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(name, 'x', x, _FLOAT)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return _reduce(op, name, x, dim, keepdim, dtype, out)
    shape, ydtype, d = output_spec(op, x, dim, keepdim, dtype)
    ycode = _CODE.get(ydtype)
    if op >= 4 and ycode not in (S.I32_DT, S.I64_DT):
        raise TypeError(f'ckjit.{name}: dtype {ydtype} is not torch.int64 or torch.int32')
    if op < 4 and ycode not in (S.F32_DT, S.F16_DT, S.BF16_DT):
        raise TypeError(f'ckjit.{name}: dtype {ydtype} is not float32, float16 or bfloat16')
    if out is None:
        y = yt = x.new_empty(shape, dtype=ydtype)
    else:
        _check_out(name, out, shape, ydtype, dev)
        yt = out
        y = out if out.is_contiguous() else x.new_empty(shape, dtype=ydtype)
    if d is None:  # every element: one flat row
        x, d = x.reshape(-1), 0
    xs, strides = tuple(x.shape) or (1,), x.stride() or (1,)
    if xs[d] == 0:
        if op == 0:
            return yt.zero_()
        if op == 1:
            return yt.fill_(float('nan'))
        raise IndexError(f'ckjit.{name}: the reduced dim {dim} has size 0 (no {name} exists)')
    if y.numel() == 0:
        return yt
    sh, st, cd = _coalesced(xs, strides, d)
    if len(sh) > 4:  # still too many dims: copy, then the contiguous tensor merges to <= 3
        x = x.contiguous()
        sh, st, cd = _coalesced(xs, x.stride() or (1,), d)
    ld = st[0] if len(sh) == 2 else sh[-1]
    if cd == len(sh) - 1 and st[cd] == 1 and len(sh) <= 2 and ld >= sh[-1]:
        rows = sh[0] if len(sh) == 2 else 1
        st_ = _c_reduce_rows(op, dt, rows, sh[-1], x.data_ptr(), ld, ycode, y.data_ptr(), s)
        if st_:
            raise _error(st_, 'ckjit_reduce_rows')
    else:
        try:
            lay, addr = _tls.layout
        except AttributeError:
            lay = S.TensorLayout()
            _tls.layout = lay, S.ctypes.addressof(lay)
            addr = _tls.layout[1]
        n = len(sh)
        _LAYOUT_PACK(lay, 0, n, *(sh + [1] * (4 - n)), *(st + [0] * (4 - n)))
        st_ = _c_reduce(op, dt, addr, x.data_ptr(), cd, ycode, y.data_ptr(), s)
        if st_:
            raise _error(st_, 'ckjit_reduce')
    if y is not yt:
        yt.copy_(y)
    return yt
