"""What the op modules take from torch, bound once, and the checks they share.

`import ckjit` does not need torch.  When torch imports, activate(torch) gives every op
module (rows, reduce, elementwise, gemm, gemm_fp8, attention, paged) plain module
globals for what its hot path uses: the dtype codes, the raw-stream and current-device
accessors, torch.compiler.is_compiling and the custom-op wrappers.  Without torch those globals
are stubs whose first call raises ImportError, so an op called without torch says so.

The CPU tests activate a small fake torch (python/tests/conftest.py) to reach the
argument checks without a GPU; activate() returns the previous environment so they can
put it back.
"""
from . import _structs as S

OP_MODULES = []  # filled by ckjit/__init__.py: modules with a _bind(env) function
current = None   # the active Env


def _no_torch(*_args, **_kwargs):
    raise ImportError('ckjit ops take torch tensors, and torch could not be imported: '
                      + (current.why if current else 'not tried'))


class _NoCompileOps:
    """The compile path of a torch without torch.library.custom_op (before 2.4)."""

    def __getattr__(self, name):
        raise NotImplementedError(f'ckjit.{name} under torch.compile needs torch >= 2.4 '
                                  '(torch.library.custom_op); call it outside the compiled '
                                  'region (torch.compiler.disable) or upgrade torch')


class Env:
    """The bindings of one torch module (or of no torch: torch=None)."""

    def __init__(self, torch, ops=None, why=''):
        self.torch, self.ops, self.why = torch, ops or _NoCompileOps(), why
        self.float_dtypes, self.dtype_code, self.eps = {}, {}, {}
        if torch is None:
            self.compiling = self.raw_stream = self.current_device = _no_torch
            self.device_guard = self.empty_like = self.empty_strided = _no_torch
            return
        # A contiguous output like the input: torch.empty_like costs about half of
        # x.new_empty(x.shape) in host time (measured on torch 2.11).
        self.empty_like, self.empty_strided = torch.empty_like, torch.empty_strided
        names = (('float32', S.F32_DT), ('float16', S.F16_DT), ('bfloat16', S.BF16_DT),
                 ('int8', S.I8_DT), ('float8_e4m3fn', S.FP8_E4M3_DT),
                 ('float8_e5m2', S.FP8_E5M2_DT), ('int32', S.I32_DT), ('int64', S.I64_DT))
        for name, code in names:
            dt = getattr(torch, name, None)  # float8 types are missing from old torch
            if dt is not None:
                self.dtype_code[dt] = code
                if code <= S.BF16_DT:
                    self.float_dtypes[dt] = code
                    self.eps[code] = float(torch.finfo(dt).eps)
        compiler = getattr(torch, 'compiler', None)
        self.compiling = getattr(compiler, 'is_compiling', None) or (lambda: False)
        cuda_c = getattr(torch, '_C', None)
        # The raw accessors skip building a torch.cuda.Stream object per call; their
        # public equivalents are the fallbacks.
        self.raw_stream = getattr(cuda_c, '_cuda_getCurrentRawStream', None) or (
            lambda index: torch.cuda.current_stream(index).cuda_stream)
        self.current_device = getattr(cuda_c, '_cuda_getDevice', None) or (
            lambda: torch.cuda.current_device())
        self.device_guard = torch.cuda.device


def activate(torch, ops=None, why=''):
    """Binds every op module to `torch` (None: no torch, `why` says why); returns the
    previous Env."""
    global current
    previous, current = current, Env(torch, ops, why)
    for module in OP_MODULES:
        module._bind(current)
    return previous


def restore(env):
    """Puts back an Env returned by activate()."""
    global current
    current = env
    for module in OP_MODULES:
        module._bind(env)


# ---- shared checks (error paths: speed does not matter here) -----------------------------
def dtype_name(dt):
    return str(dt).replace('torch.', '')


def fail_input(op, name, t, allowed):
    """Raises the error for tensor argument `name` of `op` that is not a CUDA tensor of
    one of the `allowed` dtypes (a dict or a list of dtypes)."""
    if not hasattr(t, 'get_device'):
        raise TypeError(f'ckjit.{op}: {name} must be a torch.Tensor, not {type(t).__name__}')
    if t.dtype not in allowed:
        names = ', '.join(dtype_name(d) for d in allowed)
        raise TypeError(f'ckjit.{op}: {name} has dtype {dtype_name(t.dtype)}; '
                        f'expected one of {names}')
    if t.get_device() < 0:
        raise ValueError(f'ckjit.{op}: {name} is on {t.device}; ckjit ops take CUDA tensors '
                         '(move it with .cuda() / .to(device))')
    raise AssertionError(f'ckjit.{op}: {name}: fail_input called on a valid tensor')


def fail_device(op, name, t, dev):
    """Raises the error for a tensor argument `name` on another device than `dev`."""
    where = t.get_device() if hasattr(t, 'get_device') else None
    if where is None:
        raise TypeError(f'ckjit.{op}: {name} must be a torch.Tensor, not {type(t).__name__}')
    if where < 0:
        raise ValueError(f'ckjit.{op}: {name} is on {t.device}; ckjit ops take CUDA tensors')
    raise ValueError(f'ckjit.{op}: {name} is on cuda:{where} but the input is on cuda:{dev}; '
                     'every tensor of one call must be on the same device')


def fail_dtype(op, name, t, expected):
    raise TypeError(f'ckjit.{op}: {name} has dtype {dtype_name(t.dtype)}; expected '
                    f'{dtype_name(expected)}')


def check_tensor(op, name, t, dev, dtype=None, dtypes=None):
    """A tensor argument that may be of its own dtype: on device `dev`, of `dtype` (or one
    of `dtypes`) when given."""
    if not hasattr(t, 'get_device'):
        raise TypeError(f'ckjit.{op}: {name} must be a torch.Tensor, not {type(t).__name__}')
    if t.get_device() != dev:
        fail_device(op, name, t, dev)
    if dtype is not None and t.dtype is not dtype:
        fail_dtype(op, name, t, dtype)
    if dtypes is not None and t.dtype not in dtypes:
        fail_input(op, name, t, dtypes)


def check_out(op, out, shape, dtype, dev, name='out'):
    """out= given: its shape, dtype and device must be what the op writes."""
    check_tensor(op, name, out, dev, dtype)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f'ckjit.{op}: {name} has shape {tuple(out.shape)}; expected '
                         f'{tuple(shape)}')


def rows_layout(shape, strides, col_dims=1):
    """(rows, cols, ld) when a tensor of this shape and these strides is a rows x cols
    matrix with contiguous columns (its last col_dims dims, contiguous together) and one
    row stride ld >= cols over all leading dims; None otherwise (the caller copies)."""
    n = len(shape)
    cols = 1
    for i in range(n - 1, n - 1 - col_dims, -1):
        if shape[i] != 1 and strides[i] != cols:
            return None
        cols *= shape[i]
    rows, ld, expect = 1, None, None
    for i in range(n - 1 - col_dims, -1, -1):
        size = shape[i]
        if size == 1:
            continue
        if ld is None:
            ld, expect = strides[i], strides[i] * size
        elif strides[i] != expect:
            return None
        else:
            expect *= size
        rows *= size
    if ld is None:  # one row: its stride is never used
        ld = cols
    if ld < cols or (rows > 1 and ld == 0):
        return None
    return rows, cols, ld


def normalized_cols(op, x, normalized_shape):
    """(number of normalized dims, their element count) after checking that they are
    x's trailing dims."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    ns = tuple(normalized_shape)
    nd = len(ns)
    if nd == 0 or nd > x.dim() or tuple(x.shape[x.dim() - nd:]) != ns:
        raise ValueError(f'ckjit.{op}: normalized_shape {list(ns)} is not the trailing '
                         f'shape of the input {list(x.shape)}')
    cols = 1
    for s in ns:
        cols *= s
    return nd, cols


def as_rows(x, col_dims=1):
    """(x or a contiguous copy, rows, cols, ld)."""
    if x.is_contiguous():
        shape = x.shape
        cols = 1
        for s in shape[len(shape) - col_dims:]:
            cols *= s
        return x, (x.numel() // cols if cols else 0), cols, cols
    lay = rows_layout(x.shape, x.stride(), col_dims)
    if lay is None:
        x = x.contiguous()
        return as_rows(x, col_dims)
    return (x,) + lay


def out_target(op, out, shape, dtype, dev, col_dims=1, name='out'):
    """(tensor to write, its row stride, or None when out must be written through a
    temporary) for a caller's out= tensor."""
    check_out(op, out, shape, dtype, dev, name)
    lay = rows_layout(out.shape, out.stride(), col_dims)
    return (out, lay[2]) if lay is not None else (None, 0)
