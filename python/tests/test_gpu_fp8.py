"""ckjit.scaled_mm (FP8 GEMM, sm_90 only) on every visible GPU: against torch._scaled_mm
(tensor and row scaling, e4m3, bfloat16 out) and against a float64 matmul of the
dequantized inputs (block scaling, e5m2, odd sizes, bias and activation, out=, k = 0),
the alignment refusal, and torch.compile(fullgraph=True)."""
import pytest

from gpu_util import MARKS, ckjit, torch

HAS_FP8 = hasattr(torch, 'float8_e4m3fn') and hasattr(torch, 'float8_e5m2')
pytestmark = MARKS + [pytest.mark.skipif(not HAS_FP8, reason='this torch has no float8 dtypes')]

BLK = 128  # block scaling: 1 x 128 blocks of a, 128 x 128 of b
# |ckjit - ref| <= RTOL * max |ref| of the row.  Both sides sum exact f32 products (the
# tensor cores with fewer bits within each K block of 128) and round once to bfloat16 at
# most (2^-8 of the value); 2e-2 is 5 bfloat16 ulps of the row's largest value: no
# rounding difference reaches it, a wrong scale, block or tile does.
RTOL = 2e-2
# odd m and n (edge tiles), and k = 1008: a last K block of 112 with its own block scale
SHAPES = [(129, 200, 384), (7, 333, 256), (256, 130, 1008)]


def need_sm90(device):
    cap = torch.cuda.get_device_capability(device)
    if cap != (9, 0):
        pytest.skip(f'ckjit_gemm_fp8 runs on sm_90 only; {device} is sm_{cap[0]}{cap[1]}')


def fp8(shape, dtype, device, seed):
    """Normal values rounded to an FP8 dtype (made on the CPU: reproducible everywhere)."""
    g = torch.Generator(device='cpu').manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float32)
    fmax = torch.finfo(dtype).max
    return x.clamp(-fmax, fmax).to(dtype).to(device)


def scales(shape, device, seed):
    """float32 scales in [0.5, 1.5)."""
    g = torch.Generator(device='cpu').manual_seed(seed)
    return (torch.rand(shape, generator=g, dtype=torch.float32) + 0.5).to(device)


def operands(m, n, k, device, a_dtype=None, w_dtype=None, seed=0):
    """(a (m, k) row-major, w (n, k) row-major): scaled_mm takes b = w.t()."""
    return (fp8((m, k), a_dtype or torch.float8_e4m3fn, device, seed),
            fp8((n, k), w_dtype or torch.float8_e4m3fn, device, seed + 1))


def reference(a, w, sa, sb, scaling):
    """float64 (a * scale_a) @ (w * scale_b).t() from the dequantized inputs."""
    m, k = a.shape
    n = w.shape[0]
    ad, wd = a.double(), w.double()
    if scaling == 'tensor':
        return (ad * sa.double().reshape(())) @ (wd * sb.double().reshape(())).t()
    if scaling == 'row':
        return (ad * sa.double().reshape(m, 1)) @ (wd * sb.double().reshape(n, 1)).t()
    # sa (m, kb): per 1 x 128 block of a; sb (nb, kb): per 128 x 128 block of w's (n, k)
    ea = sa.double().repeat_interleave(BLK, 1)[:, :k]
    eb = sb.double().repeat_interleave(BLK, 0)[:n].repeat_interleave(BLK, 1)[:, :k]
    return (ad * ea) @ (wd * eb).t()


def agree(got, ref, what):
    g, r = got.double(), ref.double().to(got.device)
    row_max = r.abs().amax(dim=1, keepdim=True).clamp_min(1e-30)
    rel = (g - r).abs() / row_max
    bad = ~(rel <= RTOL)  # NaN counts as bad
    assert not bool(bad.any()), (f'{what}: {int(bad.sum())} of {rel.numel()} elements off by '
                                 f'more than {RTOL} of their row max (worst '
                                 f'{float(rel.nan_to_num(float("inf")).max()):.3g})')


def scale_tensors(scaling, m, n, k, device, seed=10):
    if scaling == 'tensor':
        return scales((), device, seed), scales((), device, seed + 1)
    if scaling == 'row':
        return scales((m, 1), device, seed), scales((1, n), device, seed + 1)
    kb = -(-k // BLK)
    return scales((m, kb), device, seed), scales((-(-n // BLK), kb), device, seed + 1)


# ---- against torch._scaled_mm -------------------------------------------------------------------
@pytest.mark.parametrize('scaling', ['tensor', 'row'])
@pytest.mark.parametrize('mnk', [(129, 208, 384), (7, 336, 256), (512, 256, 1024)],
                         ids=lambda s: 'x'.join(map(str, s)))
def test_matches_torch_scaled_mm(device, scaling, mnk):
    """torch._scaled_mm needs k and n multiples of 16 (m is free); e4m3, bfloat16 out."""
    need_sm90(device)
    if not hasattr(torch, '_scaled_mm'):
        pytest.skip('this torch has no torch._scaled_mm')
    m, n, k = mnk
    a, w = operands(m, n, k, device, seed=1)
    sa, sb = scale_tensors(scaling, m, n, k, device)
    got = ckjit.scaled_mm(a, w.t(), sa, sb)
    assert got.shape == (m, n) and got.dtype == torch.bfloat16 and got.is_contiguous()
    agree(got, reference(a, w, sa, sb, scaling), f'{scaling} vs float64')
    try:
        want = torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    except RuntimeError as e:  # the peer's limits (its CUDA, cuBLASLt) are not under test
        pytest.skip(f'torch._scaled_mm refused the case ({scaling}): {e}')
    want = want[0] if isinstance(want, tuple) else want  # torch < 2.5 returned (out, amax)
    agree(got, want.float(), f'{scaling} vs torch._scaled_mm')


# ---- against float64 of the dequantized inputs ---------------------------------------------------
@pytest.mark.parametrize('scaling', ['tensor', 'row', 'block'])
@pytest.mark.parametrize('mnk', SHAPES, ids=lambda s: 'x'.join(map(str, s)))
def test_odd_sizes_every_scaling(device, scaling, mnk):
    need_sm90(device)
    m, n, k = mnk
    a, w = operands(m, n, k, device, seed=2)
    sa, sb = scale_tensors(scaling, m, n, k, device)
    ref = reference(a, w, sa, sb, scaling)
    for out_dtype in (torch.bfloat16, torch.float16, torch.float32):
        got = ckjit.scaled_mm(a, w.t(), sa, sb, out_dtype=out_dtype)
        assert got.dtype == out_dtype and got.shape == (m, n)
        agree(got, ref, f'{scaling} {out_dtype}')
    # the same scales under their explicit name, and 1-D row scales
    agree(ckjit.scaled_mm(a, w.t(), sa, sb, scaling=scaling), ref, f'scaling={scaling!r}')
    if scaling == 'row':
        agree(ckjit.scaled_mm(a, w.t(), sa.reshape(m), sb.reshape(n)), ref, '1-D row scales')


def test_block_scales_with_padded_rows(device):
    """Block scales whose rows are padded (row stride > ceil(k / 128)) pass as they are."""
    need_sm90(device)
    m, n, k = 100, 300, 640  # kb 5, nb 3
    a, w = operands(m, n, k, device, seed=3)
    sa_wide, sb_wide = scales((m, 8), device, 20), scales((3, 8), device, 21)
    sa_wide[:, 5:] = float('nan')  # never read
    sb_wide[:, 5:] = float('nan')
    sa, sb = sa_wide[:, :5], sb_wide[:, :5]
    agree(ckjit.scaled_mm(a, w.t(), sa, sb), reference(a, w, sa, sb, 'block'), 'padded')


@pytest.mark.parametrize('scaling', ['row', 'block'])
def test_e5m2_operands(device, scaling):
    need_sm90(device)
    m, n, k = 65, 130, 384
    sa, sb = scale_tensors(scaling, m, n, k, device, seed=30)
    for a_dtype, w_dtype in ((torch.float8_e5m2, torch.float8_e4m3fn),
                             (torch.float8_e4m3fn, torch.float8_e5m2)):
        a, w = operands(m, n, k, device, a_dtype, w_dtype, seed=4)
        agree(ckjit.scaled_mm(a, w.t(), sa, sb, out_dtype=torch.float16),
              reference(a, w, sa, sb, scaling), f'{a_dtype} x {w_dtype}')


@pytest.mark.parametrize('scaling', ['tensor', 'row', 'block'])
def test_bias_activation_and_alpha(device, scaling):
    need_sm90(device)
    m, n, k = 129, 200, 384
    a, w = operands(m, n, k, device, seed=5)
    sa, sb = scale_tensors(scaling, m, n, k, device, seed=40)
    bias = (torch.randn(n, generator=torch.Generator().manual_seed(41)) * 4).to(
        torch.bfloat16).to(device)
    base = reference(a, w, sa, sb, scaling)
    got = ckjit.scaled_mm(a, w.t(), sa, sb, bias=bias, activation='relu')
    agree(got, torch.relu(base + bias.double()), 'bias + relu')
    got = ckjit.scaled_mm(a, w.t(), sa, sb, bias=bias.float(), out_dtype=torch.float32,
                          activation='silu', alpha=0.5)
    agree(got, torch.nn.functional.silu(0.5 * base + bias.double()), 'alpha, bias, silu')


def test_out_and_views(device):
    need_sm90(device)
    m, n, k = 129, 200, 384
    a, w = operands(m, n, k, device, seed=6)
    sa, sb = scale_tensors('row', m, n, k, device)
    ref = reference(a, w, sa, sb, 'row')
    out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    assert ckjit.scaled_mm(a, w.t(), sa, sb, out=out) is out
    agree(out, ref, 'out=')
    wide = torch.full((m, n + 24), float('nan'), dtype=torch.float32, device=device)
    got = ckjit.scaled_mm(a, w.t(), sa, sb, out_dtype=torch.float32, out=wide[:, :n])
    agree(got, ref, 'out= with row stride n + 24')
    assert bool(wide[:, n:].isnan().all()), 'wrote past n in a row-strided out='
    # operands that are column slices of wider tensors (lda, ldb > k, multiples of 16)
    a_wide = fp8((m, k + 32), torch.float8_e4m3fn, device, 7)
    w_wide = fp8((n, k + 16), torch.float8_e4m3fn, device, 8)
    a2, w2 = a_wide[:, :k], w_wide[:, :k]
    agree(ckjit.scaled_mm(a2, w2.t(), sa, sb), reference(a2, w2, sa, sb, 'row'), 'lda, ldb > k')


def test_refusals_on_the_device(device):
    need_sm90(device)
    m, n, k = 64, 48, 256
    a, w = operands(m, n, k, device, seed=9)
    sa, sb = scale_tensors('tensor', m, n, k, device)
    with pytest.raises(ValueError, match='FP8 tensor cores read K-major operands only'):
        ckjit.scaled_mm(a, w.t().contiguous(), sa, sb)  # b row-major
    with pytest.raises(ValueError, match='FP8 tensor cores read K-major operands only'):
        ckjit.scaled_mm(a.t().contiguous().t(), w.t(), sa, sb)  # a column-major
    shifted = fp8((m * k + 8,), torch.float8_e4m3fn, device, 10)[8:].view(m, k)  # 8 bytes off
    with pytest.raises(ckjit.InvalidArgumentError, match='a must be 16-byte aligned'):
        ckjit.scaled_mm(shifted, w.t(), sa, sb)
    a24, w24 = operands(m, n, 24, device, seed=11)  # k 24: lda 24
    with pytest.raises(ValueError, match='lda a multiple of 16'):
        ckjit.scaled_mm(a24, w24.t(), sa, sb)


def test_empty_and_k_zero(device):
    need_sm90(device)
    e4 = torch.float8_e4m3fn
    sa, sb = scale_tensors('row', 0, 48, 256, device)
    y = ckjit.scaled_mm(torch.empty(0, 256, dtype=e4, device=device),
                        fp8((48, 256), e4, device, 12).t(), sa, sb)
    assert y.shape == (0, 48) and y.dtype == torch.bfloat16
    # k = 0: D = activation(bias), the operands' empty storage is never read
    m, n = 7, 129
    a, w = torch.empty(m, 0, dtype=e4, device=device), torch.empty(n, 0, dtype=e4, device=device)
    bias = torch.linspace(-3, 3, n, device=device).to(torch.bfloat16)
    sa, sb = scale_tensors('row', m, n, 0, device)
    got = ckjit.scaled_mm(a, w.t(), sa, sb, bias=bias, activation='relu')
    agree(got, torch.relu(bias.double()).expand(m, n), 'k = 0, bias + relu')
    got = ckjit.scaled_mm(a, w.t(), sa, sb)
    assert bool((got == 0).all()), 'k = 0 without bias must be 0'


def test_other_archs_raise_unsupported(device):
    if torch.cuda.get_device_capability(device) == (9, 0):
        pytest.skip('sm_90 runs the FP8 GEMM')
    a, w = operands(16, 32, 64, device, seed=13)
    sa, sb = scale_tensors('tensor', 16, 32, 64, device)
    with pytest.raises(ckjit.UnsupportedError, match='sm_90'):
        ckjit.scaled_mm(a, w.t(), sa, sb)


# ---- torch.compile ---------------------------------------------------------------------------
needs_custom_op = pytest.mark.skipif(not hasattr(torch.library, 'custom_op'),
                                     reason='torch.library.custom_op needs torch >= 2.4')


@needs_custom_op
def test_compile_fullgraph(device):
    need_sm90(device)
    torch._dynamo.reset()
    m, n, k = 33, 96, 256
    a, w = operands(m, n, k, device, seed=14)
    sa, sb = scale_tensors('row', m, n, k, device)
    bias = torch.randn(n, generator=torch.Generator().manual_seed(15)).to(torch.bfloat16).to(
        device)

    def f(a, b, sa, sb, bias):
        return ckjit.scaled_mm(a, b, sa, sb, bias=bias, activation='relu')

    b = w.t()
    with torch.no_grad():
        got = torch.compile(f, fullgraph=True)(a, b, sa, sb, bias)
        eager = f(a, b, sa, sb, bias)
    torch.testing.assert_close(got, eager, rtol=0, atol=0)
    agree(got, torch.relu(reference(a, w, sa, sb, 'row') + bias.double()), 'compiled')


@needs_custom_op
def test_opcheck(device):
    """The fake implementation of ckjit::scaled_mm against the real one.  (Not
    opcheck's test_schema: it perturbs the inputs with a multiply, which torch 2.11 has
    no float8 kernel for.)"""
    need_sm90(device)
    a, w = operands(20, 64, 128, device, seed=16)
    sa, sb = scale_tensors('block', 20, 64, 128, device)
    torch.library.opcheck(torch.ops.ckjit.scaled_mm.default,
                          (a, w.t(), sa, sb, torch.float16, None, 'gelu', 2.0, None),
                          test_utils=('test_faketensor',))
