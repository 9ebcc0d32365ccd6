"""GEMM: matmul (one possibly batched GEMM with a fused epilogue) and grouped_matmul.

    D = activation(alpha * a @ b + beta * c + bias + d0) * d1,   rounded to out_dtype

Layout: a and b pass with their strides: each matrix may be row-major (last dim
contiguous) or column-major (a transposed view such as w.t() or x.mT), with any
leading dimension, so `x @ w.t()` needs no copy.  Batch dims broadcast as in
torch.matmul; each operand's batch dims must collapse to one batch stride (0 for a
broadcast operand), else that operand is materialized (.expand(...).contiguous()).  A
batched a times a 2-D b, a row-major a whose batch collapses into its rows, runs as one
large GEMM (batch folded into m).  D is written row-major (a new contiguous tensor, or
out= when that is contiguous; otherwise through a temporary).  c, d0 and d1 are read
with their strides when their last dim is contiguous (batch dims broadcast), else
copied.  1-D a or b are treated as torch.matmul treats them.

Dtypes: a and b float32/float16/bfloat16, one dtype; out_dtype (default a's) float32,
float16 or bfloat16; bias, c, d0, d1 in out_dtype.  Accumulation is f32; float16/bfloat16
run on tensor cores; float32 on SIMT unless allow_tf32.
"""
import threading

from . import _structs as S
from ._lib import error as _error, lib as _lib
from ._torch_env import (check_out as _check_out, check_tensor as _check_tensor,
                         fail_input as _fail_input, rows_layout as _rows_layout)

_c_gemm = _lib.ckjit_gemm
_c_gemm_grouped = _lib.ckjit_gemm_grouped
_CORE_PACK = S.packer(S.GemmDesc, 'm', 'ldd')[0].pack_into
_TAIL = S.packer(S.GemmDesc, 'c', 'allow_tf32')
_TAIL_PACK, _TAIL_AT = _TAIL[0].pack_into, _TAIL[1]
_FULL_PACK = S.packer(S.GemmDesc, 'm', 'allow_tf32')[0].pack_into
_DESC_SIZE = S.ctypes.sizeof(S.GemmDesc)
_PLAIN_TAIL = (0, 0, 1.0, 0.0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0)
_ROW, _COL = S.ROW_MAJOR, S.COL_MAJOR
ACTIVATIONS = {None: 0, 'identity': 0, 'relu': 1, 'gelu_tanh': 2, 'gelu': 3, 'gelu_erf': 3,
               'silu': 4, 'sigmoid': 5}
_tls = threading.local()


def _bind(env):
    global _compiling, _raw_stream, _current_device, _guard, _FLOAT, _ops, _torch
    global _empty_strided, _devices
    _compiling, _raw_stream, _current_device = env.compiling, env.raw_stream, env.current_device
    _guard, _FLOAT, _ops, _torch = env.device_guard, env.float_dtypes, env.ops, env.torch
    _empty_strided, _devices = env.empty_strided, {}


def _new_matrix(m, n, dtype, dev):
    """A contiguous m x n output on cuda:dev.  torch.empty_strided with a cached
    torch.device is the cheapest Python-level allocation measured (torch 2.11: about 1 us
    below a.new_empty((m, n)) and 2 us below torch.empty)."""
    device = _devices.get(dev)
    if device is None:
        device = _devices[dev] = _torch.device('cuda', dev)
    return _empty_strided((m, n), (n, 1), dtype=dtype, device=device)


def _desc():
    """This thread's [GemmDesc, its address, tail-is-plain flag]."""
    try:
        return _tls.gemm
    except AttributeError:
        d = S.GemmDesc()
        _lib.ckjit_gemm_desc_init(d)
        _tls.gemm = [d, S.ctypes.addressof(d), False]
        return _tls.gemm


def _order(rows, cols, s0, s1):
    """(order, ld) of a rows x cols matrix with element strides (s0, s1), or None when it
    is neither row- nor column-major with a usable leading dimension."""
    if s1 == 1 or cols == 1:
        ld = s0 if rows > 1 else cols
        if ld >= cols:
            return _ROW, ld
    if s0 == 1 or rows == 1:
        ld = s1 if cols > 1 else rows
        if ld >= rows:
            return _COL, ld
    return None


def _batch_stride(bshape, shape, strides):
    """One batch stride of an operand whose batch dims (shape[:-2], aligned right) broadcast
    to bshape, or None when its batch dims do not collapse to one stride."""
    nb = len(shape) - 2
    stride, expect = 0, None
    for i in range(1, len(bshape) + 1):
        size = bshape[-i]
        if size == 1:
            continue
        own = strides[nb - i] if i <= nb and shape[nb - i] != 1 else 0
        if expect is None:
            stride, expect = own, own * size
        elif own != expect:
            return None
        else:
            expect *= size
    return stride


def _broadcast(op, x, y):
    """torch's broadcast of two batch shapes (tuples)."""
    n = max(len(x), len(y))
    x, y = (1,) * (n - len(x)) + tuple(x), (1,) * (n - len(y)) + tuple(y)
    out = []
    for p, q in zip(x, y):
        if p != q and p != 1 and q != 1:
            raise ValueError(f'ckjit.{op}: batch dims {x} and {y} do not broadcast')
        out.append(q if p == 1 else p)
    return tuple(out)


def _operand(t, bshape, rows, cols):
    """(tensor kept alive, order, ld, batch stride) of a matrix operand, materialized when
    its layout cannot be described."""
    shape, strides = tuple(t.shape), t.stride()
    o = _order(rows, cols, strides[-2], strides[-1])
    bs = _batch_stride(bshape, shape, strides) if o is not None else None
    if bs is None:
        t = t.expand(bshape + (rows, cols)).contiguous()
        return t, _ROW, max(cols, 1), rows * cols
    return t, o[0], o[1], bs


def _epi_operand(op, name, t, bshape, m, n, dtype, dev):
    """(tensor, ld, batch stride) of c / d0 / d1: out_dtype, [..., m, n], last dim
    contiguous (copied otherwise)."""
    _check_tensor(op, name, t, dev, dtype)
    shape = tuple(t.shape)
    if len(shape) < 2 or shape[-2:] != (m, n):
        raise ValueError(f'ckjit.{op}: {name} has shape {shape}; its last two dims must be '
                         f'({m}, {n})')
    _broadcast(op, shape[:-2], bshape)
    t_, order, ld, bs = _operand(t, bshape, m, n)
    if order != _ROW:
        t_ = t.expand(bshape + (m, n)).contiguous()
        ld, bs = n, m * n
    return t_, max(ld, n), bs


def matmul(a, b, bias=None, activation=None, out_dtype=None, *, alpha=1.0, beta=0.0, c=None,
           d0=None, d1=None, bias_per_row=False, split_k=0, allow_tf32=False, out=None):
    """activation(alpha * a @ b + beta * c + bias + d0) * d1 (see the module doc).

    bias: 1-D, n elements (one per output column, as nn.Linear) or, with
    bias_per_row=True, m elements.  activation: None, 'relu', 'gelu' (erf, torch's
    default) / 'gelu_erf', 'gelu_tanh', 'silu', 'sigmoid'.  split_k: 0 automatic, 1 none,
    > 1 slices, -1 Stream-K.  out: a tensor of the result's shape and out_dtype; c may be
    out (in place).
    """
    if _compiling():
        return _ops.matmul(a, b, bias, activation, out_dtype, alpha, beta, c, d0, d1,
                           bias_per_row, split_k, allow_tf32, out)
    op = 'matmul'
    dt = _FLOAT.get(getattr(a, 'dtype', None))
    dev = a.get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'a', a, _FLOAT)
    if getattr(b, 'dtype', None) is not a.dtype or b.get_device() != dev:
        _check_tensor(op, 'b', b, dev, a.dtype)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return matmul(a, b, bias, activation, out_dtype, alpha=alpha, beta=beta, c=c,
                          d0=d0, d1=d1, bias_per_row=bias_per_row, split_k=split_k,
                          allow_tf32=allow_tf32, out=out)
    if out_dtype is None:
        odt, out_dtype = dt, a.dtype
    else:
        odt = _FLOAT.get(out_dtype)
        if odt is None:
            raise TypeError(f'ckjit.matmul: out_dtype {out_dtype} is not float32, float16 or '
                            'bfloat16')
    if a.dim() == 2 and b.dim() == 2:  # the common case, without the batch machinery
        (m, k), (k2, n) = a.shape, b.shape
        sa, sb = a.stride(), b.stride()
        oa, ob = _order(m, k, sa[0], sa[1]), _order(k2, n, sb[0], sb[1])
        if k == k2 and oa is not None and ob is not None and c is None and d0 is None \
                and d1 is None:
            if out is None:
                y = yt = _new_matrix(m, n, out_dtype, dev)
            else:
                _check_out(op, out, (m, n), out_dtype, dev)
                yt = out
                y = out if out.is_contiguous() else _new_matrix(m, n, out_dtype, dev)
            holder = _desc()
            d, addr = holder[0], holder[1]
            _CORE_PACK(d, 0, m, n, k, dt, odt, a.data_ptr(), oa[1], oa[0], b.data_ptr(),
                       ob[1], ob[0], y.data_ptr(), n)
            if bias is None and activation is None and alpha == 1.0 and not split_k \
                    and not allow_tf32:
                if not holder[2]:
                    _TAIL_PACK(d, _TAIL_AT, *_PLAIN_TAIL)
                    holder[2] = True
            else:
                bp, mode = _bias(op, bias, bias_per_row, m, n, out_dtype, dev)
                holder[2] = False
                _TAIL_PACK(d, _TAIL_AT, 0, 0, alpha, 0.0, bp, mode, _activation(activation),
                           0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, split_k, 1 if allow_tf32 else 0)
            if m and n:
                st = _c_gemm(addr, s)
                if st:
                    raise _error(st, 'ckjit_gemm')
                if y is not yt:
                    yt.copy_(y)
            return yt
    return _matmul_general(a, b, bias, activation, out_dtype, odt, dt, alpha, beta, c, d0, d1,
                           bias_per_row, split_k, allow_tf32, out, dev, s)


def _activation(activation):
    code = ACTIVATIONS.get(activation)
    if code is None:
        raise ValueError(f'ckjit.matmul: activation {activation!r} is not one of '
                         f'{sorted(k for k in ACTIVATIONS if k)}')
    return code


def _bias(op, bias, per_row, m, n, dtype, dev):
    """(pointer, ckjit_bias_mode) of an optional bias vector."""
    if bias is None:
        return 0, S.BIAS_NONE
    _check_tensor(op, 'bias', bias, dev, dtype)
    want = m if per_row else n
    if bias.dim() != 1 or bias.shape[0] != want:
        raise ValueError(f'ckjit.{op}: bias has shape {tuple(bias.shape)}; expected ({want},) '
                         f'(one per output {"row" if per_row else "column"})')
    return (bias if bias.is_contiguous() else bias.contiguous()).data_ptr(), \
        (S.BIAS_PER_ROW if per_row else S.BIAS_PER_COL)


def output_shape(op, a_shape, b_shape):
    """torch.matmul's result shape (also the fake implementation's rule)."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if not a_shape or not b_shape:
        raise ValueError(f'ckjit.{op}: both operands need at least one dim')
    a1, b1 = len(a_shape) == 1, len(b_shape) == 1
    a2 = (1,) + a_shape if a1 else a_shape
    b2 = b_shape + (1,) if b1 else b_shape
    if a2[-1] != b2[-2]:
        raise ValueError(f'ckjit.{op}: shapes {a_shape} and {b_shape} cannot be multiplied '
                         f'({a2[-1]} != {b2[-2]})')
    shape = _broadcast(op, a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
    if a1:
        shape = shape[:-2] + shape[-1:]
    if b1:
        shape = shape[:-1]
    return shape


def _matmul_general(a, b, bias, activation, out_dtype, odt, dt, alpha, beta, c, d0, d1,
                    bias_per_row, split_k, allow_tf32, out, dev, s):
    op = 'matmul'
    shape = output_shape(op, a.shape, b.shape)
    if a.dim() == 1:
        a = a.unsqueeze(0)
    if b.dim() == 1:
        b = b.unsqueeze(-1)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    bshape = _broadcast(op, tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    batch = 1
    for x in bshape:
        batch *= x
    act = _activation(activation)
    if out is None:
        y = yt = a.new_empty(shape, dtype=out_dtype)
    else:
        _check_out(op, out, shape, out_dtype, dev)
        yt = out
        y = out if out.is_contiguous() else a.new_empty(shape, dtype=out_dtype)
    rows = None
    if b.dim() == 2 and a.dim() > 2 and c is None and d0 is None and d1 is None:
        rows = _rows_layout(a.shape, a.stride())  # a's batch and rows: one run of rows?
    if rows is not None:
        m, batch = rows[0], 1  # one GEMM of batch * m rows; D [.., m, n] is that too
        pa, oa, lda, sa = a, _ROW, rows[2], 0
    else:
        pa, oa, lda, sa = _operand(a, bshape, m, k)
    pb, ob, ldb, sb = _operand(b, bshape, k, n)
    keep = [a, b, pa, pb]  # temporaries alive until the launch is queued on the stream
    bp, mode = _bias(op, bias, bias_per_row, m, n, out_dtype, dev)
    extras = []
    for name, t in (('c', c), ('d0', d0), ('d1', d1)):
        if t is None:
            extras.append((0, 0, 0))
        elif name == 'c' and t is out and y is out:
            extras.append((y.data_ptr(), n, m * n))  # in place: C wants ldc == ldd
        else:
            t_, ld, bs = _epi_operand(op, name, t, bshape, m, n, out_dtype, dev)
            keep.append(t_)
            extras.append((t_.data_ptr(), ld, bs))
    (cp, ldc, sc), (d0p, ldd0, sd0), (d1p, ldd1, sd1) = extras
    holder = _desc()
    d, addr = holder[0], holder[1]
    holder[2] = False
    _FULL_PACK(d, 0, m, n, k, dt, odt, pa.data_ptr(), lda, oa, pb.data_ptr(), ldb, ob,
               y.data_ptr(), n, cp, ldc, alpha, beta, bp, mode, act, d0p, ldd0, d1p, ldd1,
               batch, sa, sb, sc, m * n, sd0, sd1, split_k, 1 if allow_tf32 else 0)
    if m and n and batch:
        st = _c_gemm(addr, s)
        if st:
            raise _error(st, 'ckjit_gemm')
        if y is not yt:
            yt.copy_(y)
    return yt


def grouped_matmul(a, b, bias=None, activation=None, out_dtype=None, *, alpha=1.0, out=None):
    """[activation(alpha * a[i] @ b[i] + bias[i])] for lists of 2-D a[i] (m_i x k_i) and
    b[i] (k_i x n_i), in one launch.  Every problem shares the dtypes, the activation and
    whether it has a bias; bias: None or a list (per-column vectors, n_i elements).
    Operands pass with their strides when every a[i] (and every b[i]) has the same
    order; otherwise the odd ones are copied row-major.  Returns a list of new
    contiguous tensors (or writes out=, a list of contiguous tensors)."""
    if _compiling():
        return _ops.grouped_matmul(list(a), list(b), bias, activation, out_dtype, alpha, out)
    op = 'grouped_matmul'
    a, b = list(a), list(b)
    count = len(a)
    if count != len(b) or count == 0:
        raise ValueError(f'ckjit.{op}: a and b must be lists of the same non-zero length '
                         f'({len(a)} and {len(b)})')
    if bias is not None and len(bias) != count:
        raise ValueError(f'ckjit.{op}: bias must have one entry per problem ({count})')
    if out is not None and len(out) != count:
        raise ValueError(f'ckjit.{op}: out must have one tensor per problem ({count})')
    dt = _FLOAT.get(getattr(a[0], 'dtype', None))
    dev = a[0].get_device() if dt is not None else -1
    if dev < 0:
        _fail_input(op, 'a[0]', a[0], _FLOAT)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        with _guard(dev):
            return grouped_matmul(a, b, bias, activation, out_dtype, alpha=alpha, out=out)
    dtype = a[0].dtype
    if out_dtype is None:
        out_dtype, odt = dtype, dt
    elif _FLOAT.get(out_dtype) is None:
        raise TypeError(f'ckjit.{op}: out_dtype {out_dtype} is not float32, float16 or bfloat16')
    else:
        odt = _FLOAT[out_dtype]
    act = _activation(activation)
    problems = []
    for i in range(count):
        ai, bi = a[i], b[i]
        _check_tensor(op, f'a[{i}]', ai, dev, dtype)
        _check_tensor(op, f'b[{i}]', bi, dev, dtype)
        if ai.dim() != 2 or bi.dim() != 2 or ai.shape[1] != bi.shape[0]:
            raise ValueError(f'ckjit.{op}: problem {i}: a {tuple(ai.shape)} and b '
                             f'{tuple(bi.shape)} are not 2-D matrices that multiply')
        problems.append([_operand(ai, (), ai.shape[0], ai.shape[1]),
                         _operand(bi, (), bi.shape[0], bi.shape[1])])
    for side in (0, 1):  # one order per side: the odd ones out become row-major copies
        if len({p[side][1] for p in problems}) > 1:
            for p in problems:
                if p[side][1] != _ROW:
                    t = p[side][0].contiguous()
                    p[side] = (t, _ROW, max(t.shape[1], 1), 0)
    results, targets, buf = [], [], _grouped_buffer(count)
    for i, ((pa, oa, lda, _), (pb, ob, ldb, _)) in enumerate(problems):
        m, k, n = pa.shape[0], pa.shape[1], pb.shape[1]
        if out is None:
            y = yt = pa.new_empty((m, n), dtype=out_dtype)
        else:
            _check_out(op, out[i], (m, n), out_dtype, dev, f'out[{i}]')
            yt = out[i]
            y = yt if yt.is_contiguous() else pa.new_empty((m, n), dtype=out_dtype)
        if bias is not None and bias[i] is None:
            raise ValueError(f'ckjit.{op}: bias[{i}] is None; give every problem a bias or none')
        bp, mode = _bias(op, None if bias is None else bias[i], False, m, n, out_dtype, dev)
        _FULL_PACK(buf, i * _DESC_SIZE, m, n, k, dt, odt, pa.data_ptr(), lda, oa, pb.data_ptr(),
                   ldb, ob, y.data_ptr(), n, 0, 0, alpha, 0.0, bp, mode, act, 0, 0, 0, 0, 1, 0, 0,
                   0, 0, 0, 0, 0, 0)
        results.append(yt)
        targets.append((y, yt))
    st = _c_gemm_grouped(S.ctypes.addressof(buf), count, s)
    if st:
        raise _error(st, 'ckjit_gemm_grouped')
    for y, yt in targets:
        if y is not yt:
            yt.copy_(y)
    return results


def _grouped_buffer(count):
    """This thread's array of at least `count` descriptors (grown, never shrunk)."""
    buf = getattr(_tls, 'grouped', None)
    if buf is None or len(buf) < count:
        buf = (S.GemmDesc * max(count, 16))()
        _tls.grouped = buf
    return buf
