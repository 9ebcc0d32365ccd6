"""What the GPU test files share: torch (the module is skipped without it), the device
parameters (conftest.py's `device` fixture runs each test on every visible GPU),
random inputs and the comparisons against float64 references."""
import pytest

torch = pytest.importorskip('torch', reason='the GPU tests compare ckjit with torch')

import ckjit  # noqa: E402  (after the skip: the package imports torch when present)

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
DEVICE_PARAMS = [pytest.param(i, id=f'cuda{i}') for i in range(GPUS)] or [
    pytest.param(0, id='no-gpu', marks=pytest.mark.skip(reason='no CUDA GPU visible to torch'))]
MARKS = [pytest.mark.gpu]
if GPUS and not ckjit.device_info()['has_device']:
    MARKS.append(pytest.mark.skip(reason='torch sees a GPU but libckjit does not: '
                                  + repr(ckjit.device_info())))

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
# (rtol, atol) of an output of this dtype against a float64 reference: two roundings of
# the output dtype (the result's, and one intermediate value's) plus f32 math.
TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3),
       torch.bfloat16: (1.6e-2, 1.6e-2)}


def rand(shape, dtype, device, scale=1.0, seed=0):
    g = torch.Generator(device='cpu').manual_seed(seed + 7919 * len(shape) + sum(shape))
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype).to(device)


def close(got, ref, dtype=None, rtol=None, atol=None, what=''):
    """got (any dtype) against a float64 reference, at dtype's tolerance (got's dtype by
    default); NaNs must sit in the same places."""
    dtype = dtype or got.dtype
    r, a = TOL.get(dtype, (0, 0))
    torch.testing.assert_close(got.double(), ref.double().to(got.device),
                               rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
                               equal_nan=True, msg=lambda m: f'{what}: {m}')


def strided_views(x):
    """(name, view) pairs of the same values as x (2-D+): contiguous, a column slice of a
    wider tensor (row stride > cols: passed as is), every other row of a taller one
    (row stride 2 * cols), and a transposed copy read back through .mT (copied by
    ckjit for the row ops)."""
    *lead, rows, cols = x.shape
    wide = torch.zeros(*lead, rows, cols + 5, dtype=x.dtype, device=x.device)
    wide[..., :cols] = x
    tall = torch.zeros(*lead, rows * 2, cols, dtype=x.dtype, device=x.device)
    tall[..., ::2, :] = x
    transposed = x.mT.contiguous().mT
    return [('contiguous', x), ('column_slice', wide[..., :cols]), ('row_step', tall[..., ::2, :]),
            ('transposed', transposed)]
