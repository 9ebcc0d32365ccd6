"""ckjit.scaled_mm's argument checks on fake tensors (conftest.FakeTorch): every refusal
in Python (TypeError for dtypes, ValueError for devices, shapes, layouts and options),
the scaling read from the scale shapes, and the descriptor that reaches
ckjit_gemm_fp8 -- whose refusal of the fake NULL pointers (or of a misaligned operand,
with made-up addresses) comes back as ckjit.InvalidArgumentError with libckjit's own
message, before any device is touched."""
import pytest

import ckjit
from ckjit import _structs as S, _torch_env, gemm_fp8

API = 'ckjit_gemm_fp8'


def reaches_c(call, why='is NULL'):
    """call() passes the Python checks and is refused by ckjit_gemm_fp8; returns the
    descriptor it was given (this thread's, packed just before the call)."""
    with pytest.raises(ckjit.InvalidArgumentError, match=f'{API}: .*{why}') as info:
        call()
    assert isinstance(info.value, ValueError)
    assert info.value.status_name == 'CKJIT_ERROR_INVALID_ARGUMENT'
    return gemm_fp8._desc()[0]


def at(t, address):
    """t with a made-up data pointer (the fake's is 0)."""
    t.data_ptr = lambda: address
    return t


def bias_at(t, shape, dtype, **kw):
    """A fake bias with a non-NULL pointer (C checks bias against bias_mode before the
    other pointers: a NULL bias would be refused for that, not for being NULL)."""
    return at(t.tensor(shape, dtype, **kw), 0x40000)


class Problem:
    """Fake m x k e4m3 a, k x n column-major b (w.t() of a row-major (n, k) w) and
    float32 scales on cuda:0."""

    def __init__(self, t, m=64, n=48, k=256, a_dtype=None, b_dtype=None):
        self.t, self.m, self.n, self.k = t, m, n, k
        self.kb, self.nb = -(-k // 128), -(-n // 128)
        self.a = t.tensor((m, k), a_dtype or t.float8_e4m3fn)
        self.b = t.tensor((k, n), b_dtype or t.float8_e4m3fn, strides=(1, k))

    def scales(self, kind):
        t = self.t
        if kind == 'tensor':
            return t.tensor(()), t.tensor((1,))
        if kind == 'row':
            return t.tensor((self.m, 1)), t.tensor((1, self.n))
        return t.tensor((self.m, self.kb)), t.tensor((self.nb, self.kb))

    def call(self, kind='tensor', **kw):
        """scaled_mm with scales shaped for `kind` (scaling= passes through in kw)."""
        sa, sb = self.scales(kind)
        return ckjit.scaled_mm(self.a, self.b, sa, sb, **kw)


# ---- refusals in Python ---------------------------------------------------------------------
def test_operand_dtypes_devices_and_shapes(fake_torch):
    t = fake_torch
    p = Problem(t)
    sa, sb = p.scales('tensor')
    with pytest.raises(TypeError, match='a has dtype bfloat16; expected one of float8_e4m3fn, '
                                        'float8_e5m2'):
        ckjit.scaled_mm(t.tensor((64, 256), t.bfloat16), p.b, sa, sb)
    with pytest.raises(TypeError, match='a must be a torch.Tensor, not list'):
        ckjit.scaled_mm([[1.0]], p.b, sa, sb)
    with pytest.raises(ValueError, match='a is on cpu; ckjit ops take CUDA tensors'):
        ckjit.scaled_mm(t.tensor((64, 256), t.float8_e4m3fn, device='cpu'), p.b, sa, sb)
    with pytest.raises(TypeError, match='b has dtype int8; expected one of float8_e4m3fn'):
        ckjit.scaled_mm(p.a, t.tensor((256, 48), t.int8, strides=(1, 256)), sa, sb)
    with pytest.raises(TypeError, match='b has dtype float16'):
        ckjit.scaled_mm(p.a, t.tensor((256, 48), t.float16, strides=(1, 256)), sa, sb)
    with pytest.raises(ValueError, match='b is on cuda:1 but the input is on cuda:0'):
        ckjit.scaled_mm(p.a, t.tensor((256, 48), t.float8_e4m3fn, 1, (1, 256)), sa, sb)
    with pytest.raises(ValueError, match='b is on cpu; ckjit ops take CUDA tensors'):
        ckjit.scaled_mm(p.a, t.tensor((256, 48), t.float8_e5m2, 'cpu', (1, 256)), sa, sb)
    with pytest.raises(ValueError, match=r'cannot be multiplied \(256 != 128\)'):
        ckjit.scaled_mm(p.a, t.tensor((128, 48), t.float8_e4m3fn, strides=(1, 128)), sa, sb)
    with pytest.raises(ValueError, match='a and b must be 2-D'):
        ckjit.scaled_mm(t.tensor((2, 64, 256), t.float8_e4m3fn), p.b, sa, sb)
    with pytest.raises(ValueError, match='a and b must be 2-D'):
        ckjit.scaled_mm(p.a, t.tensor((256,), t.float8_e4m3fn), sa, sb)
    with pytest.raises(TypeError, match='out_dtype torch.int8 is not float32, float16 or '
                                        'bfloat16'):
        p.call(out_dtype=t.int8)
    with pytest.raises(TypeError, match='out_dtype torch.float8_e4m3fn is not'):
        p.call(out_dtype=t.float8_e4m3fn)


def test_layouts_other_than_k_major_say_to_transpose(fake_torch):
    t = fake_torch
    p = Problem(t)
    sa, sb = p.scales('row')
    col_major_a = t.tensor((64, 256), t.float8_e4m3fn, strides=(1, 64))  # a.t().contiguous().t()
    with pytest.raises(ValueError, match=r'a \(64, 256\) has strides \(1, 64\); it must be '
                                         r'row-major .*FP8 tensor cores read K-major operands '
                                         r'only.*a\.contiguous\(\)'):
        ckjit.scaled_mm(col_major_a, p.b, sa, sb)
    row_major_b = t.tensor((256, 48), t.float8_e4m3fn)  # a plain (k, n) tensor
    with pytest.raises(ValueError, match=r'b \(256, 48\) has strides \(48, 1\); it must be '
                                         r'column-major .*w\.t\(\) .*FP8 tensor cores read '
                                         r'K-major operands only.*b\.t\(\)\.contiguous\(\)\.t\(\)'):
        ckjit.scaled_mm(p.a, row_major_b, sa, sb)
    with pytest.raises(ValueError, match='K-major'):  # rows overlapping: lda < k
        ckjit.scaled_mm(t.tensor((64, 256), t.float8_e4m3fn, strides=(128, 1)), p.b, sa, sb)
    with pytest.raises(ValueError, match='K-major'):  # every other element of k
        ckjit.scaled_mm(t.tensor((64, 256), t.float8_e4m3fn, strides=(512, 2)), p.b, sa, sb)


def test_scale_dtypes_devices_and_layouts(fake_torch):
    t = fake_torch
    p = Problem(t)
    with pytest.raises(TypeError, match='scale_a has dtype bfloat16; expected float32'):
        ckjit.scaled_mm(p.a, p.b, t.tensor((1,), t.bfloat16), t.tensor((1,)))
    with pytest.raises(TypeError, match='scale_b has dtype float16; expected float32'):
        ckjit.scaled_mm(p.a, p.b, t.tensor((1,)), t.tensor((1,), t.float16))
    with pytest.raises(ValueError, match='scale_a is on cpu'):
        ckjit.scaled_mm(p.a, p.b, t.tensor((1,), device='cpu'), t.tensor((1,)))
    with pytest.raises(ValueError, match='scale_b is on cuda:1 but the input is on cuda:0'):
        ckjit.scaled_mm(p.a, p.b, t.tensor((1,)), t.tensor((1,), device=1))
    with pytest.raises(TypeError, match='scale_a must be a torch.Tensor, not float'):
        ckjit.scaled_mm(p.a, p.b, 1.0, t.tensor((1,)))
    # row scales: contiguous vectors only (a broadcast or strided one would be misread)
    with pytest.raises(ValueError, match=r'scale_a \(64, 1\) has strides \(0, 1\); row scales '
                                         r'must be contiguous: pass scale_a.contiguous\(\)'):
        ckjit.scaled_mm(p.a, p.b, t.tensor((64, 1), strides=(0, 1)), t.tensor((48,)))
    with pytest.raises(ValueError, match='scale_b .* row scales must be contiguous'):
        ckjit.scaled_mm(p.a, p.b, t.tensor((64,)), t.tensor((1, 48), strides=(48, 2)))
    # block scales: row-major, unit inner stride, row stride >= ceil(k / 128)
    with pytest.raises(ValueError, match=r'scale_a \(64, 2\) has strides \(1, 64\); block '
                                         r'scales must be row-major \(strides \(ld, 1\), '
                                         r'ld >= 2\)'):
        ckjit.scaled_mm(p.a, p.b, t.tensor((64, 2), strides=(1, 64)), t.tensor((1, 2)))
    with pytest.raises(ValueError, match='scale_a .* block scales must be row-major'):
        ckjit.scaled_mm(p.a, p.b, t.tensor((64, 2), strides=(0, 1)), t.tensor((1, 2)))
    with pytest.raises(ValueError, match='scale_b .* block scales must be row-major'):
        q = Problem(t, n=300)
        ckjit.scaled_mm(q.a, q.b, t.tensor((64, 2)), t.tensor((3, 2), strides=(1, 3)))


def test_scale_shapes(fake_torch):
    t = fake_torch
    p = Problem(t)  # m 64, n 48, k 256: block scales (64, 2) and (1, 2)
    with pytest.raises(ValueError, match=r'scale_a \(64, 2\) and scale_b \(48,\) fit no scaling '
                                         r'.*tensor scaling takes scale_a and scale_b of one '
                                         r'element each; row, scale_a \(64, 1\) or \(64,\) and '
                                         r'scale_b \(1, 48\) or \(48,\); block, scale_a '
                                         r'\(64, 2\) and scale_b \(1, 2\)'):
        ckjit.scaled_mm(p.a, p.b, t.tensor((64, 2)), t.tensor((48,)))
    with pytest.raises(ValueError, match='fit no scaling'):  # one per row of a, one scale b
        ckjit.scaled_mm(p.a, p.b, t.tensor((64, 1)), t.tensor((1,)))
    with pytest.raises(ValueError, match='fit no scaling'):  # b's blocks the wrong way round
        ckjit.scaled_mm(p.a, p.b, t.tensor((64, 2)), t.tensor((2, 1)))
    with pytest.raises(ValueError, match=r"scaling 'block' of a \(64, 256\) x \(256, 48\) "
                                         r'product takes scale_a \(64, 2\) and scale_b '
                                         r'\(1, 2\); got scale_a \(64, 1\)'):
        ckjit.scaled_mm(p.a, p.b, t.tensor((64, 1)), t.tensor((1, 48)), scaling='block')
    with pytest.raises(ValueError, match="scaling 'row' .* takes scale_a"):
        ckjit.scaled_mm(p.a, p.b, t.tensor((1,)), t.tensor((1,)), scaling='row')
    with pytest.raises(ValueError, match="scaling 'channel' is not None, 'tensor', 'row' or "
                                         "'block'"):
        p.call(scaling='channel')
    with pytest.raises(ValueError, match='scaling 1 is not None'):
        p.call(scaling=1)


def test_epilogue_and_out_checks(fake_torch):
    t = fake_torch
    p = Problem(t)
    with pytest.raises(ValueError, match=r'bias has shape \(64,\); expected \(48,\) \(one per '
                                         r'output column\)'):
        p.call(bias=t.tensor((64,), t.bfloat16))
    with pytest.raises(ValueError, match=r'bias has shape \(1, 48\)'):
        p.call(bias=t.tensor((1, 48), t.bfloat16))
    with pytest.raises(TypeError, match='bias has dtype float32; expected bfloat16'):
        p.call(bias=t.tensor((48,)))
    with pytest.raises(TypeError, match='bias has dtype bfloat16; expected float16'):
        p.call(out_dtype=t.float16, bias=t.tensor((48,), t.bfloat16))
    with pytest.raises(ValueError, match='bias is on cuda:1'):
        p.call(bias=t.tensor((48,), t.bfloat16, device=1))
    with pytest.raises(ValueError, match="activation 'tanh' is not one of"):
        p.call(activation='tanh')
    with pytest.raises(ValueError, match=r'out has shape \(48, 64\); expected \(64, 48\)'):
        p.call(out=t.tensor((48, 64), t.bfloat16))
    with pytest.raises(TypeError, match='out has dtype float32; expected bfloat16'):
        p.call(out=t.tensor((64, 48)))
    with pytest.raises(ValueError, match='out is on cuda:1'):
        p.call(out=t.tensor((64, 48), t.bfloat16, device=1))
    with pytest.raises(ValueError, match='out is on cpu'):
        p.call(out=t.tensor((64, 48), t.bfloat16, device='cpu'))
    with pytest.raises(ValueError, match=r'out has strides \(1, 64\); it must be row-major '
                                         r'with contiguous rows'):
        p.call(out=t.tensor((64, 48), t.bfloat16, strides=(1, 64)))
    with pytest.raises(ValueError, match='it must be row-major with contiguous rows'):
        p.call(out=t.tensor((64, 48), t.bfloat16, strides=(0, 1)))  # every row the same


def test_without_torch_says_why():
    previous = _torch_env.activate(None, why='ModuleNotFoundError: no torch here')
    try:
        with pytest.raises(ImportError, match='no torch here'):
            ckjit.scaled_mm(object(), object(), object(), object())
    finally:
        _torch_env.restore(previous)


# ---- what reaches C ---------------------------------------------------------------------------
def test_tensor_row_and_block_reach_c_with_their_descriptors(fake_torch):
    t = fake_torch
    p = Problem(t, m=64, n=300, k=1000)  # kb 8, nb 3
    d = reaches_c(lambda: p.call('tensor'), 'scale_a is NULL')
    assert (d.m, d.n, d.k, d.lda, d.ldb, d.ldd) == (64, 300, 1000, 1000, 1000, 300)
    assert (d.scaling, d.a_dtype, d.b_dtype, d.out_dtype) == (
        S.FP8_SCALE_TENSOR, S.FP8_E4M3_DT, S.FP8_E4M3_DT, S.BF16_DT)
    assert (d.alpha, d.bias_mode, d.activation) == (1.0, S.BIAS_NONE, 0)
    d = reaches_c(lambda: p.call('row'))
    assert (d.scaling, d.ld_scale_a, d.ld_scale_b) == (S.FP8_SCALE_ROW, 0, 0)
    d = reaches_c(lambda: ckjit.scaled_mm(p.a, p.b, t.tensor((64,)), t.tensor((300,))))
    assert d.scaling == S.FP8_SCALE_ROW  # 1-D row scales
    d = reaches_c(lambda: p.call('block'))
    assert (d.scaling, d.ld_scale_a, d.ld_scale_b) == (S.FP8_SCALE_BLOCK, 8, 8)
    # padded rows of block scales (cuBLASLt pads to 4): their row strides pass through
    d = reaches_c(lambda: ckjit.scaled_mm(p.a, p.b, t.tensor((64, 8), strides=(12, 1)),
                                          t.tensor((3, 8), strides=(8, 1))))
    assert (d.scaling, d.ld_scale_a, d.ld_scale_b) == (S.FP8_SCALE_BLOCK, 12, 8)
    # a column slice of a wider a and b from a wider weight: lda / ldb are their strides
    a = t.tensor((64, 1000), t.float8_e4m3fn, strides=(1024, 1))
    b = t.tensor((1000, 300), t.float8_e5m2, strides=(1, 1040))
    d = reaches_c(lambda: ckjit.scaled_mm(a, b, t.tensor(()), t.tensor(()), out_dtype=t.float32))
    assert (d.lda, d.ldb, d.a_dtype, d.b_dtype, d.out_dtype) == (
        1024, 1040, S.FP8_E4M3_DT, S.FP8_E5M2_DT, S.F32_DT)


def test_epilogue_and_out_reach_c(fake_torch):
    t = fake_torch
    p = Problem(t, a_dtype=t.float8_e5m2)
    d = reaches_c(lambda: p.call('row', out_dtype=t.float16, bias=bias_at(t, (48,), t.float16),
                                 activation='relu', alpha=0.5))
    assert (d.a_dtype, d.out_dtype, d.bias_mode, d.activation, d.alpha) == (
        S.FP8_E5M2_DT, S.F16_DT, S.BIAS_PER_COL, S.UNARY_OPS['relu'], 0.5)
    d = reaches_c(lambda: p.call(activation='gelu'))
    assert d.activation == S.UNARY_OPS['gelu_erf']  # torch's default gelu
    d = reaches_c(lambda: p.call(bias=t.tensor((48,), t.bfloat16, strides=(2,))),
                  'bias must be given exactly when')  # copied: the fake copy's pointer is 0
    assert d.bias_mode == S.BIAS_PER_COL
    out = t.tensor((64, 48), t.bfloat16)
    d = reaches_c(lambda: p.call(out=out))
    assert d.ldd == 48
    wide = t.tensor((64, 48), t.bfloat16, strides=(56, 1))  # rows of a wider tensor
    d = reaches_c(lambda: p.call(out=wide))
    assert d.ldd == 56


def test_one_row_or_column_gets_a_leading_dimension_c_accepts(fake_torch):
    """With one row of a (one column of b) the row stride addresses nothing; C still wants
    a multiple of 16 >= k."""
    t = fake_torch
    a = t.tensor((1, 100), t.float8_e4m3fn, strides=(100, 1))
    b = t.tensor((100, 1), t.float8_e4m3fn, strides=(1, 7))
    d = reaches_c(lambda: ckjit.scaled_mm(a, b, t.tensor((1,)), t.tensor((1,))))
    assert (d.m, d.n, d.lda, d.ldb, d.ldd) == (1, 1, 112, 112, 1)


def test_ambiguous_scale_shapes(fake_torch):
    """k <= 128 gives block scales (m, 1): with n == 1 they are row scales too (the same
    product either way); the inference prefers row, scaling= overrides it."""
    t = fake_torch
    a = t.tensor((64, 96), t.float8_e4m3fn)
    b1 = t.tensor((96, 1), t.float8_e4m3fn, strides=(1, 96))
    d = reaches_c(lambda: ckjit.scaled_mm(a, b1, t.tensor((64, 1)), t.tensor((1, 1))))
    assert d.scaling == S.FP8_SCALE_ROW
    d = reaches_c(lambda: ckjit.scaled_mm(a, b1, t.tensor((64, 1)), t.tensor((1, 1)),
                                          scaling='block'))
    assert (d.scaling, d.ld_scale_a, d.ld_scale_b) == (S.FP8_SCALE_BLOCK, 1, 0)
    # a strided (64, 1) column: not a row-scale vector, but fine as block scales
    strided = t.tensor((64, 1), strides=(4, 1))
    with pytest.raises(ValueError, match='row scales must be contiguous'):
        ckjit.scaled_mm(a, b1, strided, t.tensor((1, 1)))
    d = reaches_c(lambda: ckjit.scaled_mm(a, b1, strided, t.tensor((1, 1)), scaling='block'))
    assert (d.scaling, d.ld_scale_a) == (S.FP8_SCALE_BLOCK, 4)
    # n = 100 (one block of b): scale_b (1, 1) is block scaling only
    b = t.tensor((96, 100), t.float8_e4m3fn, strides=(1, 96))
    d = reaches_c(lambda: ckjit.scaled_mm(a, b, t.tensor((64, 1)), t.tensor((1, 1))))
    assert d.scaling == S.FP8_SCALE_BLOCK
    # one element each is tensor scaling, as torch reads it
    d = reaches_c(lambda: ckjit.scaled_mm(a, b, t.tensor((1, 1)), t.tensor((1, 1))))
    assert d.scaling == S.FP8_SCALE_TENSOR
    a1 = t.tensor((1, 96), t.float8_e4m3fn)
    d = reaches_c(lambda: ckjit.scaled_mm(a1, b1, t.tensor((1, 1)), t.tensor((1,)),
                                          scaling='row'))
    assert d.scaling == S.FP8_SCALE_ROW


def test_c_refuses_misaligned_operands_with_its_own_message(fake_torch):
    """The 16-byte rule is libckjit's to check: its message comes back as a ValueError."""
    t = fake_torch
    p = Problem(t, k=256)
    sa, sb = at(t.tensor((1,)), 0x10000), at(t.tensor((1,)), 0x10100)
    at(p.b, 0x30000)
    at(p.a, 0x20008)
    reaches_c(lambda: ckjit.scaled_mm(p.a, p.b, sa, sb),
              r'a must be 16-byte aligned and lda a multiple of 16 .*tensor memory accelerator')
    a24 = at(t.tensor((64, 24), t.float8_e4m3fn), 0x20000)  # k 24: lda 24
    b24 = at(t.tensor((24, 48), t.float8_e4m3fn, strides=(1, 32)), 0x30000)
    reaches_c(lambda: ckjit.scaled_mm(a24, b24, sa, sb), r'lda a multiple of 16 \(.*, 24\)')
    a32 = at(t.tensor((64, 32), t.float8_e4m3fn), 0x20000)
    b40 = at(t.tensor((32, 48), t.float8_e4m3fn, strides=(1, 40)), 0x30000)
    reaches_c(lambda: ckjit.scaled_mm(a32, b40, sa, sb), r'b must be 16-byte aligned and ldb '
                                                         r'a multiple of 16 \(.*, 40\)')


def test_empty_results_do_not_call_c(fake_torch):
    t = fake_torch
    p = Problem(t, m=0)
    y = p.call('row')
    assert y.shape == (0, 48) and y.dtype is t.bfloat16
    p = Problem(t, n=0)
    out = t.tensor((64, 0), t.float32)
    assert p.call('block', out_dtype=t.float32, out=out) is out
    assert Problem(t, m=0, n=0, k=0).call('tensor').shape == (0, 0)
    p = Problem(t, m=0)
    with pytest.raises(ValueError, match='fit no scaling'):  # the arguments are still checked
        ckjit.scaled_mm(p.a, p.b, t.tensor((3,)), t.tensor((48,)))


def test_k_zero_reaches_c_with_a_stand_in_operand(fake_torch):
    """k = 0: D = activation(bias); C reads no operand but wants aligned non-NULL ones
    (the fake stand-in's pointer is 0 too, so C refuses it here)."""
    t = fake_torch
    p = Problem(t, m=7, n=129, k=0)
    d = reaches_c(lambda: p.call('block', bias=bias_at(t, (129,), t.bfloat16),
                                 activation='gelu_tanh'))
    assert (d.k, d.lda, d.ldb, d.scaling, d.bias_mode) == (
        0, 16, 16, S.FP8_SCALE_BLOCK, S.BIAS_PER_COL)
    d = reaches_c(lambda: p.call('row'))
    assert (d.k, d.scaling) == (0, S.FP8_SCALE_ROW)


def test_null_stream_on_another_device_runs_under_its_guard(fake_torch):
    t = fake_torch
    a = t.tensor((16, 64), t.float8_e4m3fn, device=1)
    b = t.tensor((64, 32), t.float8_e4m3fn, 1, (1, 64))
    reaches_c(lambda: ckjit.scaled_mm(a, b, t.tensor((1,), device=1), t.tensor((1,), device=1)))
    assert t.guard_entries == [1]


def test_output_shape_rule():
    assert gemm_fp8.output_shape('scaled_mm', (5, 32), (32, 7)) == (5, 7)
    with pytest.raises(ValueError, match=r'cannot be multiplied \(32 != 16\)'):
        gemm_fp8.output_shape('scaled_mm', (5, 32), (16, 7))
    with pytest.raises(ValueError, match='must be 2-D'):
        gemm_fp8.output_shape('scaled_mm', (5, 32), (32,))
