"""FP8 GEMM with scaling: scaled_mm, torch._scaled_mm's calling convention over
ckjit_gemm_fp8 (include/ckjit/gemm_fp8.h; NVIDIA sm_90 only).

    D = activation(alpha * deq(a) @ deq(b) + bias),   rounded to out_dtype

a is m x k and b is k x n, each torch.float8_e4m3fn or torch.float8_e5m2 (chosen per
operand); D is out_dtype (bfloat16 by default, float16 or float32).  deq() applies the
float32 scales, whose shapes choose the scaling as torch._scaled_mm's do:

    scale_a                  scale_b                          scaling
    one element              one element                      'tensor': x * scale
    (m, 1) or (m,)           (1, n) or (n,)                   'row': row i of a times
                                                              scale_a[i], column j of b
                                                              times scale_b[j]
    (m, ceil(k / 128))       (ceil(n / 128), ceil(k / 128))   'block' (DeepSeek-V3): a in
                                                              1 x 128 blocks along k, b in
                                                              128 x 128 blocks

Shapes that fit two scalings (it takes m or n of 1, e.g. block scales (m, 1) and (1, 1)
for k <= 128 and n == 1, which are row scales too) give the same product under either;
the first of 'tensor', 'row', 'block' that fits runs (so 'row' rather than 'block').
scaling= names one explicitly.  Block scales are row-major with unit inner stride and
any row stride >= ceil(k / 128) (passed as ld_scale_a / ld_scale_b); a column-major
scale_a (cuBLASLt's layout) needs .contiguous().  Row scales must be contiguous vectors.

Layout: both operands K-major, the only layout the FP8 tensor cores read: a row-major
(strides (lda, 1)) and b column-major (strides (1, ldb): torch._scaled_mm's second
operand, `w.t()` of a row-major (n, k) weight w).  Others raise ValueError instead of
being copied on every call: a weight is best transposed once, where it is stored.  The
data pointers must be 16-byte aligned and lda, ldb multiples of 16 (the tensor memory
accelerator's rule); libckjit checks that, and its message comes back as
ckjit.InvalidArgumentError.

bias: out_dtype, n elements (one per output column, as nn.Linear).  D is a new
contiguous tensor, or out= (out_dtype, (m, n), rows contiguous: strides (ldd, 1)).  m or
n zero: an empty result, no launch.  k zero: D = activation(bias) (or activation(0)).
"""
import threading

from . import _structs as S, gemm as _gemm
from ._lib import error as _error, lib as _lib
from ._torch_env import (check_out as _check_out, check_tensor as _check_tensor,
                         fail_input as _fail_input)
from .gemm import ACTIVATIONS

_c_gemm_fp8 = _lib.ckjit_gemm_fp8
_PACK = S.packer(S.GemmFp8Desc, 'm', 'activation')
_PACK, _PACK_AT = _PACK[0].pack_into, _PACK[1]
_TENSOR, _ROW, _BLOCK = S.FP8_SCALE_TENSOR, S.FP8_SCALE_ROW, S.FP8_SCALE_BLOCK
_BLK = 128  # CKJIT_FP8_SCALE_BLOCK's block: 1 x 128 of a, 128 x 128 of b
_K_MAJOR = 'FP8 tensor cores read K-major operands only'
_FP8_NAMES = ('torch.float8_e4m3fn', 'torch.float8_e5m2')  # for a torch without float8
_tls = threading.local()


def _bind(env):
    global _compiling, _raw_stream, _current_device, _guard, _FLOAT, _ops, _FP8, _FP8_OK
    global _F32, _BF16
    _compiling, _raw_stream, _current_device = env.compiling, env.raw_stream, env.current_device
    _guard, _FLOAT, _ops = env.device_guard, env.float_dtypes, env.ops
    _FP8 = {dt: code for dt, code in env.dtype_code.items()
            if code in (S.FP8_E4M3_DT, S.FP8_E5M2_DT)}
    _FP8_OK = _FP8 or _FP8_NAMES  # what the dtype errors list
    _F32 = getattr(env.torch, 'float32', None)
    _BF16 = getattr(env.torch, 'bfloat16', None)


def _desc():
    """This thread's (GemmFp8Desc, its address): every call packs all of its fields."""
    try:
        return _tls.fp8
    except AttributeError:
        d = S.GemmFp8Desc()
        _lib.ckjit_gemm_fp8_desc_init(d)
        _tls.fp8 = (d, S.ctypes.addressof(d))
        return _tls.fp8


def output_shape(op, a_shape, b_shape):
    """(m, n) of a (m, k) times b (k, n) (also the fake implementation's rule)."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise ValueError(f'ckjit.{op}: a and b must be 2-D, (m, k) and (k, n); got shapes '
                         f'{a_shape} and {b_shape}')
    if a_shape[1] != b_shape[0]:
        raise ValueError(f'ckjit.{op}: shapes {a_shape} and {b_shape} cannot be multiplied '
                         f'({a_shape[1]} != {b_shape[0]})')
    return a_shape[0], b_shape[1]


def _k_major_ld(op, name, t, rows, k):
    """The leading dimension of operand `name` (a: rows = m, k along dim 1; b: rows = n,
    k along dim 0) when its k elements are contiguous; else the layout error."""
    st = t.stride()
    kst, ld = (st[1], st[0]) if name == 'a' else (st[0], st[1])
    if (kst == 1 or k <= 1) and (rows <= 1 or ld >= k):
        # One row's stride is never used to address; C still wants a multiple of 16.
        return ld if rows > 1 else max(16, -(-k // 16) * 16)
    shape = tuple(t.shape)
    if name == 'a':
        raise ValueError(f'ckjit.{op}: a {shape} has strides {st}; it must be row-major '
                         f'(strides (lda, 1), lda >= k): {_K_MAJOR}.  Transpose it in '
                         'memory: a.contiguous()')
    raise ValueError(f'ckjit.{op}: b {shape} has strides {st}; it must be column-major '
                     f'(strides (1, ldb), ldb >= k), e.g. w.t() of a row-major (n, k) w: '
                     f'{_K_MAJOR}.  Transpose it in memory: b.t().contiguous().t()')


def _numel(shape):
    count = 1
    for s in shape:
        count *= s
    return count


def _fits(code, sha, shb, m, n, kb, nb):
    """Whether scale shapes sha, shb (tuples) are those of scaling `code`."""
    if code == _TENSOR:
        return _numel(sha) == 1 and _numel(shb) == 1
    if code == _ROW:
        return sha in ((m, 1), (m,)) and shb in ((1, n), (n,))
    return sha == (m, kb) and shb == (nb, kb)


def _wanted(code, m, n, kb, nb):
    return ('scale_a and scale_b of one element each', f'scale_a ({m}, 1) or ({m},) and '
            f'scale_b (1, {n}) or ({n},)', f'scale_a ({m}, {kb}) and scale_b ({nb}, {kb})')[code]


def _scaling(op, scaling, sa, sb, m, n, k):
    """(ckjit_fp8_scaling, ld_scale_a, ld_scale_b) of the scales (shapes, then layouts)."""
    kb, nb = -(-k // _BLK), -(-n // _BLK)
    sha, shb = tuple(sa.shape), tuple(sb.shape)
    if scaling is None:
        for code in (_TENSOR, _ROW, _BLOCK):  # this order: see the module doc
            if _fits(code, sha, shb, m, n, kb, nb):
                break
        else:
            tensor, row, block = (_wanted(c, m, n, kb, nb) for c in (_TENSOR, _ROW, _BLOCK))
            raise ValueError(f'ckjit.{op}: scale_a {sha} and scale_b {shb} fit no scaling of '
                             f'a ({m}, {k}) x ({k}, {n}) product: tensor scaling takes '
                             f'{tensor}; row, {row}; block, {block}')
    else:
        code = S.FP8_SCALINGS.get(scaling) if isinstance(scaling, str) else None
        if code is None:
            raise ValueError(f"ckjit.{op}: scaling {scaling!r} is not None, 'tensor', 'row' "
                             "or 'block'")
        if not _fits(code, sha, shb, m, n, kb, nb):
            raise ValueError(f'ckjit.{op}: scaling {scaling!r} of a ({m}, {k}) x ({k}, {n}) '
                             f'product takes {_wanted(code, m, n, kb, nb)}; got scale_a '
                             f'{sha} and scale_b {shb}')
    if code == _TENSOR:  # one element: any strides
        return code, 0, 0
    if code == _ROW:  # m (n) entries read at unit stride: the one dim over 1 must be dense
        for name, t, shape in (('scale_a', sa, sha), ('scale_b', sb, shb)):
            st = t.stride()
            for i in range(len(shape)):
                if shape[i] > 1 and st[i] != 1:
                    raise ValueError(f'ckjit.{op}: {name} {shape} has strides {st}; row scales '
                                     f'must be contiguous: pass {name}.contiguous()')
        return code, 0, 0
    lds = []
    for name, t in (('scale_a', sa), ('scale_b', sb)):
        st = t.stride()
        rows = t.shape[0]
        if not ((st[1] == 1 or kb <= 1) and (rows <= 1 or st[0] >= max(kb, 1))):
            raise ValueError(f'ckjit.{op}: {name} {tuple(t.shape)} has strides {st}; block '
                             f'scales must be row-major (strides (ld, 1), ld >= {kb}): pass '
                             f'{name}.contiguous()')
        lds.append(st[0] if rows > 1 else 0)  # 0: ceil(k / 128)
    return code, lds[0], lds[1]


def scaled_mm(a, b, scale_a, scale_b, *, out_dtype=None, bias=None, activation=None,
              alpha=1.0, scaling=None, out=None):
    """activation(alpha * (a * scale_a) @ (b * scale_b) + bias) in FP8 (see the module doc).

    a: (m, k) float8_e4m3fn or float8_e5m2, row-major; b: (k, n) float8, column-major
    (w.t() of a row-major (n, k) w).  scale_a, scale_b: float32 on a's device, shaped
    for tensor, row or block scaling; scaling: None (from the shapes; 'row' where 'block'
    fits too), 'tensor', 'row' or 'block'.  out_dtype: torch.bfloat16 (default),
    torch.float16 or torch.float32.  bias: out_dtype, (n,).  activation: None, 'relu',
    'gelu' (erf) / 'gelu_erf', 'gelu_tanh', 'silu', 'sigmoid'.  out: (m, n) out_dtype
    with contiguous rows.  Runs on sm_90 only (ckjit.UnsupportedError elsewhere).
    """
    if _compiling():
        return _ops.scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, activation, alpha,
                              scaling, out)
    op = 'scaled_mm'
    adt = _FP8.get(getattr(a, 'dtype', None))
    dev = a.get_device() if adt is not None else -1
    if dev < 0:
        _fail_input(op, 'a', a, _FP8_OK)
    bdt = _FP8.get(getattr(b, 'dtype', None))
    if bdt is None or b.get_device() != dev:
        _check_tensor(op, 'b', b, dev, dtypes=_FP8_OK)
    s = _raw_stream(dev)
    if not s and dev != _current_device():
        # the NULL stream is the current device's to libckjit
        with _guard(dev):
            return scaled_mm(a, b, scale_a, scale_b, out_dtype=out_dtype, bias=bias,
                             activation=activation, alpha=alpha, scaling=scaling, out=out)
    if out_dtype is None:
        out_dtype, odt = _BF16, S.BF16_DT
    else:
        odt = _FLOAT.get(out_dtype)
        if odt is None:
            raise TypeError(f'ckjit.{op}: out_dtype {out_dtype} is not float32, float16 or '
                            'bfloat16')
    m, n = output_shape(op, a.shape, b.shape)
    k = a.shape[1]
    for name, t in (('scale_a', scale_a), ('scale_b', scale_b)):
        if getattr(t, 'dtype', None) is not _F32 or t.get_device() != dev:
            _check_tensor(op, name, t, dev, _F32)
    code, lsa, lsb = _scaling(op, scaling, scale_a, scale_b, m, n, k)
    if k:
        lda, ldb = _k_major_ld(op, 'a', a, m, k), _k_major_ld(op, 'b', b, n, k)
    act = ACTIVATIONS.get(activation) if isinstance(activation, (str, type(None))) else None
    if act is None:
        raise ValueError(f'ckjit.{op}: activation {activation!r} is not one of '
                         f'{sorted(x for x in ACTIVATIONS if x)}')
    if bias is None:
        bp, mode = 0, S.BIAS_NONE
    else:
        _check_tensor(op, 'bias', bias, dev, out_dtype)
        if bias.dim() != 1 or bias.shape[0] != n:
            raise ValueError(f'ckjit.{op}: bias has shape {tuple(bias.shape)}; expected ({n},) '
                             '(one per output column)')
        if not bias.is_contiguous():
            bias = bias.contiguous()  # the name keeps the copy alive past the launch
        bp, mode = bias.data_ptr(), S.BIAS_PER_COL
    if out is None:
        y, ldd = _gemm._new_matrix(m, n, out_dtype, dev), n
    else:
        _check_out(op, out, (m, n), out_dtype, dev)
        st = out.stride()
        if (n > 1 and st[1] != 1) or (m > 1 and st[0] < n):
            raise ValueError(f'ckjit.{op}: out has strides {st}; it must be row-major with '
                             f'contiguous rows (strides (ldd, 1), ldd >= {n}), e.g. a '
                             'contiguous tensor')
        y, ldd = out, (st[0] if m > 1 else n)
    if not m or not n:
        return y
    psa, psb = scale_a.data_ptr(), scale_b.data_ptr()
    if k:
        pa, pb = a.data_ptr(), b.data_ptr()
    else:
        # k = 0 reads neither operand (nor block scales), but C refuses NULL (an empty
        # tensor's pointer) and unaligned pointers: a fresh 16-byte buffer stands in.
        stand_in = _gemm._new_matrix(1, 16, a.dtype, dev)
        pa = pb = stand_in.data_ptr()
        lda = ldb = 16
        if code == _BLOCK:
            psa = psb = pa
    d, addr = _desc()
    _PACK(d, _PACK_AT, m, n, k, adt, bdt, odt, pa, lda, pb, ldb, y.data_ptr(), ldd, code, psa,
          psb, lsa, lsb, alpha, bp, mode, act)
    st = _c_gemm_fp8(addr, s)
    if st:
        raise _error(st, 'ckjit_gemm_fp8')
    return y
