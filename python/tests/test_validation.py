"""Argument checks of every op, on fake tensors (conftest.FakeTorch): the Python-side
errors (TypeError for dtypes, ValueError for devices, shapes and options, IndexError
for dims) raised before any C call, and, for calls that pass them, the C library's own
refusal of the fake NULL data pointer mapped to ckjit.InvalidArgumentError -- which also
shows the call reached C with the arguments ckjit built.  Also the pure layout helpers."""
import importlib

import pytest

import ckjit
from ckjit import _structs as S, _torch_env, gemm, reduce as _reduce

# ckjit.attention is the function; its module's helpers are tested too
_attention_mod = importlib.import_module('ckjit.attention')

NULL = 'is NULL'


def reaches_c(api, call, why=NULL):
    """call() must pass the Python checks and be refused by C for its NULL pointer."""
    with pytest.raises(ckjit.InvalidArgumentError, match=f'{api}: .*{why}') as info:
        call()
    assert isinstance(info.value, ValueError)
    assert info.value.status_name == 'CKJIT_ERROR_INVALID_ARGUMENT'


# ---- row ops -----------------------------------------------------------------------------------
def test_softmax_checks(fake_torch):
    t = fake_torch
    with pytest.raises(ValueError, match='x is on cpu; ckjit ops take CUDA tensors'):
        ckjit.softmax(t.tensor((4, 8), device='cpu'))
    with pytest.raises(TypeError, match='x has dtype int32; expected one of float32'):
        ckjit.softmax(t.tensor((4, 8), t.int32))
    with pytest.raises(TypeError, match='must be a torch.Tensor, not list'):
        ckjit.softmax([1.0, 2.0])
    with pytest.raises(IndexError, match='dim 2 is out of range'):
        ckjit.softmax(t.tensor((4, 8)), dim=2)
    with pytest.raises(ValueError, match='valid_cols needs dim=-1'):
        ckjit.softmax(t.tensor((4, 8)), dim=0, valid_cols=t.tensor((8,), t.int32))
    with pytest.raises(TypeError, match='valid_cols has dtype int64; expected int32'):
        ckjit.softmax(t.tensor((4, 8)), valid_cols=t.tensor((4,), t.int64))
    with pytest.raises(ValueError, match='valid_cols has 3 entries'):
        ckjit.softmax(t.tensor((4, 8)), valid_cols=t.tensor((3,), t.int32))
    with pytest.raises(ValueError, match=r'out has shape \(4, 9\)'):
        ckjit.softmax(t.tensor((4, 8)), out=t.tensor((4, 9)))
    reaches_c('ckjit_softmax', lambda: ckjit.softmax(t.tensor((4, 8)), scale=0.5))
    reaches_c('ckjit_softmax', lambda: ckjit.log_softmax(t.tensor((2, 4, 8), t.bfloat16)))
    # a row-strided view and a moved dim still reach C
    reaches_c('ckjit_softmax', lambda: ckjit.softmax(t.tensor((4, 8), strides=(16, 1))))
    reaches_c('ckjit_softmax', lambda: ckjit.softmax(t.tensor((4, 8)), dim=0))


def test_empty_and_scalar_inputs_do_not_call_c(fake_torch):
    t = fake_torch
    y = ckjit.softmax(t.tensor((0, 8)))
    assert y.shape == (0, 8)
    assert ckjit.rms_norm(t.tensor((0, 16)), (16,)).shape == (0, 16)
    assert ckjit.relu(t.tensor((3, 0))).shape == (3, 0)
    reaches_c('ckjit_softmax', lambda: ckjit.softmax(t.tensor(())))  # a 0-d tensor: 1 x 1


def test_norm_checks(fake_torch):
    t = fake_torch
    x = t.tensor((4, 16), t.float16)
    with pytest.raises(ValueError, match=r'normalized_shape \[8\] is not the trailing shape'):
        ckjit.rms_norm(x, (8,))
    with pytest.raises(TypeError, match='weight has dtype float32; expected float16'):
        ckjit.rms_norm(x, (16,), t.tensor((16,)))
    with pytest.raises(ValueError, match='weight is on cuda:1 but the input is on cuda:0'):
        ckjit.rms_norm(x, (16,), t.tensor((16,), t.float16, device=1))
    with pytest.raises(ValueError, match='weight has 15 elements; expected 16'):
        ckjit.layer_norm(x, 16, t.tensor((15,), t.float16))
    with pytest.raises(ValueError, match=r'residual has shape \(4, 8\)'):
        ckjit.rms_norm(x, (16,), residual=t.tensor((4, 8), t.float16))
    with pytest.raises(TypeError, match='residual has dtype float32'):
        ckjit.rms_norm(x, (16,), residual=t.tensor((4, 16)))
    reaches_c('ckjit_rmsnorm2d', lambda: ckjit.rms_norm(x, (16,), t.tensor((16,), t.float16)))
    reaches_c('ckjit_layernorm2d', lambda: ckjit.layer_norm(
        t.tensor((2, 3, 4, 5)), (4, 5), bias=t.tensor((4, 5))))  # bias without weight
    reaches_c('ckjit_rmsnorm2d', lambda: ckjit.rms_norm(
        x, (16,), residual=t.tensor((4, 16), t.float16), residual_out=x))


def test_quant_and_topk_checks(fake_torch):
    t = fake_torch
    x = t.tensor((4, 16), t.bfloat16)
    with pytest.raises(TypeError, match='quant_dtype torch.int32 is not supported'):
        ckjit.rms_norm_quant(x, (16,), quant_dtype=t.int32)
    with pytest.raises(ValueError, match='smooth_scale has 8 elements; expected 16'):
        ckjit.smoothquant(x, t.tensor((8,)))
    with pytest.raises(TypeError, match='smooth_scale has dtype bfloat16; expected float32'):
        ckjit.smoothquant(x, t.tensor((16,), t.bfloat16))
    with pytest.raises(TypeError, match='index_dtype torch.float32 is not'):
        ckjit.topk_softmax(x, 2, index_dtype=t.float32)
    reaches_c('ckjit_rmsnorm2d_quant', lambda: ckjit.rms_norm_quant(
        x, (16,), quant_dtype=t.float8_e4m3fn))
    reaches_c('ckjit_smoothquant', lambda: ckjit.smoothquant(x, t.tensor((16,))))
    reaches_c('ckjit_topk_softmax', lambda: ckjit.topk_softmax(x, 2, True))


# ---- reductions, elementwise -----------------------------------------------------------------
def test_reduce_checks(fake_torch):
    t = fake_torch
    x = t.tensor((3, 5, 7))
    with pytest.raises(ValueError, match='dim must be one int or None'):
        ckjit.sum(x, (0, 1))
    with pytest.raises(IndexError, match='dim 3 is out of range'):
        ckjit.amax(x, 3)
    with pytest.raises(TypeError, match='dtype torch.float32 is not torch.int64'):
        ckjit.argmax(x, 0, dtype=t.float32)
    with pytest.raises(TypeError, match='is not float32, float16 or bfloat16'):
        ckjit.sum(x, 0, dtype=t.int32)
    with pytest.raises(IndexError, match='has size 0'):
        ckjit.amax(t.tensor((0, 4)), 0)
    assert ckjit.sum(t.tensor((0, 4)), 0).shape == (4,)
    reaches_c('ckjit_reduce_rows', lambda: ckjit.sum(x, -1))
    reaches_c('ckjit_reduce', lambda: ckjit.mean(x, 1, keepdim=True))
    reaches_c('ckjit_reduce_rows', lambda: ckjit.argmin(x))  # every element: one row


def test_reduce_output_spec(fake_torch):
    t = fake_torch
    x = t.tensor((3, 5, 7), t.float16)
    assert _reduce.output_spec(0, x, 1, False, None) == ((3, 7), t.float16, 1)
    assert _reduce.output_spec(4, x, -1, True, None) == ((3, 5, 1), t.int64, 2)
    assert _reduce.output_spec(2, x, None, True, None) == ((1, 1, 1), t.float16, None)
    assert _reduce.output_spec(0, t.tensor(()), 0, False, None) == ((), t.float32, 0)


def test_coalesced_dims():
    # contiguous (2, 3, 4, 5) over dim 1: (2) and (4, 5) merge around the reduced dim
    assert _reduce._coalesced((2, 3, 4, 5), (60, 20, 5, 1), 1) == ([2, 3, 20], [60, 20, 1], 1)
    # size-1 dims drop out, the reduced one stays even when it has size 1
    assert _reduce._coalesced((1, 6, 1, 4), (24, 4, 4, 1), 2) == ([6, 1, 4], [4, 4, 1], 1)
    # 5 dims, 4 of them mergeable: rank 2 for ckjit_reduce's limit of 4
    assert _reduce._coalesced((2, 3, 4, 5, 6), (360, 120, 30, 6, 1), 4) == \
        ([120, 6], [6, 1], 1)
    # a transposed view does not merge
    assert _reduce._coalesced((4, 6), (1, 4), 0) == ([4, 6], [1, 4], 0)


def test_elementwise_checks(fake_torch):
    t = fake_torch
    a = t.tensor((4, 8), t.float16)
    with pytest.raises(TypeError, match='b has dtype float32; expected float16'):
        ckjit.add(a, t.tensor((4, 8)))
    with pytest.raises(ValueError, match='b is on cuda:1 but the input is on cuda:0'):
        ckjit.mul(a, t.tensor((4, 8), t.float16, device=1))
    with pytest.raises(ValueError, match='do not broadcast'):
        ckjit.sub(a, t.tensor((3, 8), t.float16))
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        ckjit.gelu(a, approximate='fast')
    with pytest.raises(ValueError, match='swaps the last two dims'):
        ckjit.transpose(t.tensor((2, 3, 4)), 0, 1)
    reaches_c('ckjit_unary', lambda: ckjit.gelu(a, 'tanh', scale=2.0, bias=1.0))
    reaches_c('ckjit_binary', lambda: ckjit.maximum(a, t.tensor((8,), t.float16)))  # broadcast
    reaches_c('ckjit_copy2d', lambda: ckjit.copy(a))
    reaches_c('ckjit_transpose', lambda: ckjit.transpose(t.tensor((2, 3, 4))))


def test_rows_layout():
    rl = _torch_env.rows_layout
    assert rl((4, 8), (8, 1)) == (4, 8, 8)
    assert rl((4, 8), (16, 1)) == (4, 8, 16)            # a column slice: row stride 16
    assert rl((2, 3, 8), (48, 16, 1)) == (6, 8, 16)     # leading dims flatten
    assert rl((2, 3, 8), (64, 16, 1)) is None           # they do not
    assert rl((4, 8), (1, 4)) is None                   # a transposed view
    assert rl((4, 8), (0, 1)) is None                   # a broadcast row
    assert rl((1, 8), (3, 1)) == (1, 8, 8)              # one row: its stride is unused
    assert rl((2, 3, 4), (12, 4, 1), 2) == (2, 12, 12)  # two normalized dims


# ---- GEMM ---------------------------------------------------------------------------------------
def test_matmul_checks(fake_torch):
    t = fake_torch
    a, b = t.tensor((4, 8), t.bfloat16), t.tensor((8, 6), t.bfloat16)
    with pytest.raises(ValueError, match=r'cannot be multiplied \(8 != 7\)'):
        ckjit.matmul(a, t.tensor((7, 6), t.bfloat16))
    with pytest.raises(TypeError, match='b has dtype float16; expected bfloat16'):
        ckjit.matmul(a, t.tensor((8, 6), t.float16))
    with pytest.raises(TypeError, match='out_dtype torch.int8'):
        ckjit.matmul(a, b, out_dtype=t.int8)
    with pytest.raises(ValueError, match="activation 'tanh' is not one of"):
        ckjit.matmul(a, b, activation='tanh')
    with pytest.raises(ValueError, match=r'bias has shape \(4,\); expected \(6,\)'):
        ckjit.matmul(a, b, bias=t.tensor((4,), t.bfloat16))
    with pytest.raises(ValueError, match='do not broadcast'):
        ckjit.matmul(t.tensor((2, 4, 8), t.bfloat16), t.tensor((3, 8, 6), t.bfloat16))
    with pytest.raises(ValueError, match=r'c has shape \(4, 5\)'):
        ckjit.matmul(a, b, c=t.tensor((4, 5), t.bfloat16), beta=1.0)
    reaches_c('ckjit_gemm', lambda: ckjit.matmul(a, b))
    reaches_c('ckjit_gemm', lambda: ckjit.matmul(a, b, bias=t.tensor((6,), t.bfloat16),
                                                 activation='gelu'))
    reaches_c('ckjit_gemm', lambda: ckjit.matmul(
        a, t.tensor((6, 8), t.bfloat16).movedim(0, 1)))  # b = w.t(): column-major, no copy
    reaches_c('ckjit_gemm', lambda: ckjit.matmul(t.tensor((3, 4, 8), t.bfloat16), b))
    reaches_c('ckjit_gemm', lambda: ckjit.matmul(
        t.tensor((3, 4, 8), t.bfloat16), t.tensor((3, 8, 6), t.bfloat16),
        c=t.tensor((4, 6), t.bfloat16), beta=0.5))
    reaches_c('ckjit_gemm', lambda: ckjit.matmul(t.tensor((8,), t.bfloat16), b))
    reaches_c('ckjit_gemm_grouped', lambda: ckjit.grouped_matmul(
        [a, t.tensor((2, 8), t.bfloat16)], [b, t.tensor((8, 3), t.bfloat16)]))


def test_matmul_layout_helpers():
    assert gemm._order(4, 8, 8, 1) == (S.ROW_MAJOR, 8)
    assert gemm._order(4, 8, 1, 4) == (S.COL_MAJOR, 4)     # a transposed view
    assert gemm._order(4, 8, 1, 16) == (S.COL_MAJOR, 16)
    assert gemm._order(4, 8, 2, 8) is None                  # neither
    assert gemm._order(1, 8, 0, 1) == (S.ROW_MAJOR, 8)      # one row
    assert gemm.output_shape('m', (2, 1, 4, 8), (3, 8, 6)) == (2, 3, 4, 6)
    assert gemm.output_shape('m', (8,), (8, 6)) == (6,)
    assert gemm.output_shape('m', (5, 4, 8), (8,)) == (5, 4)
    assert gemm.output_shape('m', (8,), (8,)) == ()
    # batch strides: broadcast dims read 0, collapsible dims one stride, else None
    assert gemm._batch_stride((2, 3), (2, 3, 4, 8), (96, 32, 8, 1)) == 32
    assert gemm._batch_stride((2, 3), (4, 8), (8, 1)) == 0
    assert gemm._batch_stride((2, 3), (2, 1, 4, 8), (32, 32, 8, 1)) is None


# ---- attention ----------------------------------------------------------------------------------
def test_attention_checks(fake_torch):
    t = fake_torch
    q = t.tensor((2, 16, 8, 64), t.bfloat16)
    kv = t.tensor((2, 32, 2, 64), t.bfloat16)
    with pytest.raises(ValueError, match="layout 'sbhd' is not"):
        ckjit.attention(q, kv, kv, layout='sbhd')
    with pytest.raises(ValueError, match=r'heads_q \(8\) must be a multiple of heads_kv \(3\)'):
        kv3 = t.tensor((2, 32, 3, 64), t.bfloat16)
        ckjit.attention(q, kv3, kv3)
    with pytest.raises(ValueError, match='disagree on batch or seqlen_k'):
        ckjit.attention(q, kv, t.tensor((2, 31, 2, 64), t.bfloat16))
    with pytest.raises(ValueError, match='scale 0 is not supported'):
        ckjit.attention(q, kv, kv, scale=0.0)
    with pytest.raises(ValueError, match='varlen needs max_seqlen_q'):
        ckjit.attention(q, kv, kv, cu_seqlens_q=t.tensor((3,), t.int32),
                        cu_seqlens_k=t.tensor((3,), t.int32))
    with pytest.raises(ValueError, match='does not broadcast'):
        ckjit.attention(q, kv, kv, bias=t.tensor((16, 33)))
    with pytest.raises(ValueError, match=r'alibi_slopes has shape \(4,\)'):
        ckjit.attention(q, kv, kv, alibi_slopes=t.tensor((4,)))
    # a head dim ckjit has no kernel for: C says UNSUPPORTED -> NotImplementedError
    q80 = t.tensor((1, 4, 2, 80), t.bfloat16)
    with pytest.raises(NotImplementedError, match='head_dim_qk 80'):
        ckjit.attention(q80, q80, q80)
    reaches_c('ckjit_attention', lambda: ckjit.attention(
        q, kv, kv, causal=True, window=(8, -1), softcap=30.0, bias=t.tensor((16, 32)),
        alibi_slopes=t.tensor((8,)), return_lse=True))
    reaches_c('ckjit_attention', lambda: ckjit.attention(
        t.tensor((2, 8, 16, 64), t.float16), t.tensor((2, 2, 32, 64), t.float16),
        t.tensor((2, 2, 32, 64), t.float16), layout='bhsd'))
    reaches_c('ckjit_attention', lambda: ckjit.attention(
        t.tensor((40, 8, 128), t.float16), t.tensor((50, 8, 128), t.float16),
        t.tensor((50, 8, 128), t.float16), cu_seqlens_q=t.tensor((4,), t.int32),
        cu_seqlens_k=t.tensor((4,), t.int32), max_seqlen_q=20, max_seqlen_k=25,
        return_lse=True))


def test_attention_helpers(fake_torch):
    t = fake_torch
    assert _attention_mod.mask_fields(False, (-1, -1)) == (S.MASK_NONE, -1, -1)
    assert _attention_mod.mask_fields(True, (-1, -1)) == (S.MASK_CAUSAL, -1, -1)
    assert _attention_mod.mask_fields(True, (64, -1)) == (S.MASK_WINDOW, 64, 0)
    assert _attention_mod.mask_fields(False, (64, 8)) == (S.MASK_WINDOW, 64, 8)
    q, v = t.tensor((2, 16, 8, 128)), t.tensor((2, 32, 2, 64))
    assert _attention_mod.output_shapes(q, v, 'bshd', False) == ((2, 16, 8, 64), (2, 8, 16))
    q = t.tensor((2, 8, 16, 128))
    assert _attention_mod.output_shapes(q, v, 'bhsd', False) == ((2, 8, 16, 64), (2, 8, 16))
    q = t.tensor((40, 8, 128))
    assert _attention_mod.output_shapes(q, v, 'bshd', True) == ((40, 8, 64), (8, 40))


def test_paged_checks(fake_torch):
    t = fake_torch
    q = t.tensor((2, 1, 8, 128), t.bfloat16)
    pool = t.tensor((10, 16, 2, 128), t.bfloat16)
    table, lens = t.tensor((2, 4), t.int32), t.tensor((2,), t.int32)
    with pytest.raises(ValueError, match='give block_table and seqlens_k'):
        ckjit.paged_attention(q, pool, pool)
    with pytest.raises(ValueError, match="kv_layout 'nchw'"):
        ckjit.paged_attention(q, pool, pool, block_table=table, seqlens_k=lens,
                              kv_layout='nchw')
    with pytest.raises(TypeError, match='block_table has dtype int64'):
        ckjit.paged_attention(q, pool, pool, block_table=t.tensor((2, 4), t.int64),
                              seqlens_k=lens)
    with pytest.raises(ValueError, match='seqlens_k has 3 entries'):
        ckjit.paged_attention(q, pool, pool, block_table=table, seqlens_k=t.tensor((3,), t.int32))
    with pytest.raises(ValueError, match='float8 pools need k_scale and v_scale'):
        fp8 = t.tensor((10, 16, 2, 128), t.float8_e4m3fn)
        ckjit.paged_attention(q, fp8, fp8, block_table=table, seqlens_k=lens)
    with pytest.raises(ValueError, match='k_scale and v_scale must both hold one scale'):
        fp8 = t.tensor((10, 16, 2, 128), t.float8_e4m3fn)
        ckjit.paged_attention(q, fp8, fp8, block_table=table, seqlens_k=lens,
                              k_scale=t.tensor((2,)), v_scale=t.tensor((1,)))
    reaches_c('ckjit_paged_attention', lambda: ckjit.paged_attention(
        q, pool, pool, block_table=table, seqlens_k=lens, causal=True, return_lse=True))
    hnd = t.tensor((10, 2, 16, 128), t.bfloat16)
    reaches_c('ckjit_paged_attention', lambda: ckjit.paged_attention(
        t.tensor((5, 8, 128), t.bfloat16), hnd, hnd, kv_indptr=t.tensor((3,), t.int32),
        kv_page_indices=t.tensor((6,), t.int32), kv_last_page_len=t.tensor((2,), t.int32),
        cu_seqlens_q=t.tensor((3,), t.int32), max_seqlen_q=4, kv_layout='hnd'))
    new = t.tensor((3, 2, 128), t.bfloat16)
    with pytest.raises(ValueError, match='must be \\[tokens, 2, 128\\]'):
        ckjit.paged_kv_append(t.tensor((3, 4, 128), t.bfloat16), new, t.tensor((3,), t.int32),
                              pool, pool, block_table=table, seqlens_k=lens)
    reaches_c('ckjit_paged_kv_append', lambda: ckjit.paged_kv_append(
        new, new, t.tensor((3,), t.int32), pool, pool, block_table=table, seqlens_k=lens),
        why='cu_seqlens_new must be a 4-byte aligned device int32 array')


def test_null_stream_on_another_device_runs_under_its_guard(fake_torch):
    """torch's default stream is NULL, which ckjit reads as the current device's: for a
    tensor on cuda:1 while cuda:0 is current, the op makes cuda:1 current for the call."""
    t = fake_torch
    reaches_c('ckjit_softmax', lambda: ckjit.softmax(t.tensor((4, 8), device=1)))
    assert t.guard_entries == [1]
    reaches_c('ckjit_softmax', lambda: ckjit.softmax(t.tensor((4, 8), device=0)))
    assert t.guard_entries == [1]  # the current device needs no guard


def test_ops_without_torch_say_why():
    previous = _torch_env.activate(None, why='ModuleNotFoundError: no torch here')
    try:
        with pytest.raises(ImportError, match='no torch here'):
            ckjit.rms_norm(object(), (4,))
        with pytest.raises(ImportError, match='torch could not be imported'):
            ckjit.matmul(object(), object())
    finally:
        _torch_env.restore(previous)
