"""ctypes mirrors of every public struct and enum of include/ckjit/ckjit.h,
include/ckjit/paged_attention.h, include/ckjit/gemm_fp8.h and include/ckjit/moe.h.

The field lists copy the headers in order; the layout test
(python/tests/test_struct_layout.py) compares every size and field offset with a C
program compiled against the headers (tests/python/struct_layout.c), and the field
names with the headers' own text, so a header change that is not copied here fails
the CPU suite.

C enums are passed as `int` (their size on every ABI ckjit supports).  Pointers that
the hot paths fill are `c_void_p` so that a tensor's `data_ptr()` (a Python int) can
be stored without a conversion object.
"""
import ctypes
import struct

I32 = ctypes.c_int
U32 = ctypes.c_uint
I64 = ctypes.c_int64
U64 = ctypes.c_uint64
F32 = ctypes.c_float
F64 = ctypes.c_double
SIZE = ctypes.c_size_t
PTR = ctypes.c_void_p
CSTR = ctypes.c_char_p
ENUM = ctypes.c_int

# ---- enums ---------------------------------------------------------------------------
# ckjit_status
SUCCESS = 0
ERROR_INVALID_ARGUMENT = -1
ERROR_UNSUPPORTED = -2
ERROR_NO_DEVICE = -3
ERROR_BACKEND_UNAVAILABLE = -4
ERROR_COMPILE = -5
ERROR_LOAD = -6
ERROR_LAUNCH = -7
ERROR_OUT_OF_MEMORY = -8
ERROR_DEVICE = -9
ERROR_CACHE = -10
ERROR_INTERNAL = -11

# ckjit_dtype
F32_DT, F16_DT, BF16_DT, I8_DT, FP8_E4M3_DT, FP8_E5M2_DT, I32_DT, I64_DT = range(8)
DTYPE_NAMES = ('f32', 'f16', 'bf16', 'i8', 'fp8_e4m3', 'fp8_e5m2', 'i32', 'i64')

# ckjit_backend
BACKEND_AUTO, BACKEND_CUDA, BACKEND_HIP = 0, 1, 2
BACKEND_NAMES = {BACKEND_AUTO: 'auto', BACKEND_CUDA: 'cuda', BACKEND_HIP: 'hip'}

# ckjit_copy_kind
HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE = 1, 2, 3

# ckjit_unary_op (also the GEMM activation)
UNARY_OPS = {'identity': 0, 'relu': 1, 'gelu_tanh': 2, 'gelu_erf': 3, 'silu': 4, 'sigmoid': 5}
# ckjit_binary_op
BINARY_OPS = {'add': 0, 'sub': 1, 'mul': 2, 'div': 3, 'max': 4, 'min': 5}
# ckjit_reduce_op
REDUCE_OPS = {'sum': 0, 'mean': 1, 'max': 2, 'min': 3, 'argmax': 4, 'argmin': 5}

# ckjit_order, ckjit_bias_mode, CKJIT_GEMM_STREAM_K
ROW_MAJOR, COL_MAJOR = 0, 1
BIAS_NONE, BIAS_PER_ROW, BIAS_PER_COL = 0, 1, 2
GEMM_STREAM_K = -1

# ckjit_attention_mask
MASK_NONE, MASK_CAUSAL, MASK_WINDOW = 0, 1, 2

# ckjit_fp8_scaling (gemm_fp8.h): scaled_mm's scaling= names
FP8_SCALE_TENSOR, FP8_SCALE_ROW, FP8_SCALE_BLOCK = 0, 1, 2
FP8_SCALINGS = {'tensor': FP8_SCALE_TENSOR, 'row': FP8_SCALE_ROW, 'block': FP8_SCALE_BLOCK}


# ---- structs ---------------------------------------------------------------------------
class Options(ctypes.Structure):
    _fields_ = [('struct_size', SIZE), ('backend', ENUM), ('device', I32), ('arch', CSTR),
                ('cache_dir', CSTR), ('disk_cache', I32), ('remote_cache', CSTR)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [('backend', ENUM), ('has_device', I32), ('device', I32),
                ('arch', ctypes.c_char * 64), ('device_arch', ctypes.c_char * 64),
                ('name', ctypes.c_char * 128), ('multiprocessors', I32),
                ('compiler', ctypes.c_char * 128), ('cache_dir', ctypes.c_char * 512)]


class Stats(ctypes.Structure):
    _fields_ = [('memory_hits', U64), ('disk_hits', U64), ('disk_misses', U64),
                ('disk_rejects', U64), ('disk_writes', U64), ('disk_write_errors', U64),
                ('compiles', U64), ('compile_failures', U64), ('loads', U64),
                ('load_failures', U64), ('compile_ms', F64), ('load_ms', F64),
                ('remote_hits', U64), ('remote_misses', U64), ('remote_rejects', U64),
                ('remote_writes', U64), ('remote_errors', U64), ('remote_lease_waits', U64),
                ('remote_ms', F64)]


class CompileResult(ctypes.Structure):
    _fields_ = [('cached', I32), ('ms', F64), ('code_size', SIZE), ('key', ctypes.c_char * 33),
                ('kernel', ctypes.c_char * 64), ('stored', I32)]


class Epilogue(ctypes.Structure):
    _fields_ = [('scale', F32), ('bias', F32)]


class TensorLayout(ctypes.Structure):
    _fields_ = [('rank', I32), ('shape', I64 * 4), ('strides', I64 * 4)]


class SoftmaxParams(ctypes.Structure):
    _fields_ = [('scale', F32), ('log', I32), ('valid_cols', PTR)]


class NormParams(ctypes.Structure):
    _fields_ = [('eps', F32), ('weight', PTR), ('bias', PTR), ('residual', PTR),
                ('ld_residual', I64), ('sum_out', PTR), ('ld_sum_out', I64), ('mean_out', PTR),
                ('rstd_out', PTR)]


class GemmDesc(ctypes.Structure):
    _fields_ = [('m', I64), ('n', I64), ('k', I64), ('ab_dtype', ENUM), ('out_dtype', ENUM),
                ('a', PTR), ('lda', I64), ('a_order', ENUM), ('b', PTR), ('ldb', I64),
                ('b_order', ENUM), ('d', PTR), ('ldd', I64), ('c', PTR), ('ldc', I64),
                ('alpha', F32), ('beta', F32), ('bias', PTR), ('bias_mode', ENUM),
                ('activation', ENUM), ('d0', PTR), ('ldd0', I64), ('d1', PTR), ('ldd1', I64),
                ('batch', I64), ('stride_a', I64), ('stride_b', I64), ('stride_c', I64),
                ('stride_d', I64), ('stride_d0', I64), ('stride_d1', I64), ('split_k', I32),
                ('allow_tf32', I32)]


class GemmFp8Desc(ctypes.Structure):
    _fields_ = [('m', I64), ('n', I64), ('k', I64), ('a_dtype', ENUM), ('b_dtype', ENUM),
                ('out_dtype', ENUM), ('a', PTR), ('lda', I64), ('b', PTR), ('ldb', I64),
                ('d', PTR), ('ldd', I64), ('scaling', ENUM), ('scale_a', PTR),
                ('scale_b', PTR), ('ld_scale_a', I64), ('ld_scale_b', I64), ('alpha', F32),
                ('bias', PTR), ('bias_mode', ENUM), ('activation', ENUM), ('c', PTR),
                ('ldc', I64), ('beta', F32), ('d0', PTR), ('ldd0', I64), ('d1', PTR),
                ('ldd1', I64)]


class GemmFp8MoeDesc(ctypes.Structure):
    _fields_ = [('gemm', GemmFp8Desc), ('layout', ENUM), ('experts', ctypes.c_int32),
                ('tile_experts', PTR), ('counts', PTR), ('stride_a', I64), ('stride_d', I64),
                ('stride_b', I64), ('stride_scale_a', I64), ('stride_scale_b', I64),
                ('stride_bias', I64)]


class MoeSortDesc(ctypes.Structure):
    _fields_ = [('tokens', I64), ('k', ctypes.c_int32), ('experts', ctypes.c_int32),
                ('tile_m', ctypes.c_int32), ('ids_dtype', ENUM), ('topk_ids', PTR),
                ('sorted_ids', PTR), ('expert_offsets', PTR), ('expert_counts', PTR),
                ('tile_experts', PTR), ('total_rows', PTR), ('invalid', PTR),
                ('expert_map', PTR), ('global_experts', ctypes.c_int32)]


class FusedMoeDesc(ctypes.Structure):
    _fields_ = [('tokens', I64), ('hidden', I64), ('inter', I64), ('experts', ctypes.c_int32),
                ('k', ctypes.c_int32), ('dtype', ENUM), ('x', PTR), ('ldx', I64), ('y', PTR),
                ('ldy', I64), ('ids_dtype', ENUM), ('topk_ids', PTR), ('topk_weights', PTR),
                ('weight_dtype', ENUM), ('w_gate_up', PTR), ('w_down', PTR),
                ('weight_scaling', ENUM), ('scale_gate_up', PTR), ('scale_down', PTR),
                ('activation', ENUM), ('workspace', PTR), ('workspace_bytes', SIZE),
                ('invalid', PTR), ('expert_map', PTR), ('global_experts', ctypes.c_int32),
                ('shared_experts', ctypes.c_int32), ('shared_inter', I64), ('w_shared_gate_up', PTR),
                ('w_shared_down', PTR), ('scale_shared_gate_up', PTR), ('scale_shared_down', PTR),
                ('shared_gate', PTR)]


class AttentionStrides(ctypes.Structure):
    _fields_ = [('batch', I64), ('head', I64), ('seq', I64), ('dim', I64)]


class AttentionDesc(ctypes.Structure):
    _fields_ = [('dtype', ENUM), ('batch', I64), ('num_heads_q', I64), ('num_heads_kv', I64),
                ('seqlen_q', I64), ('seqlen_k', I64), ('head_dim_qk', I64), ('head_dim_v', I64),
                ('q', PTR), ('q_strides', AttentionStrides), ('k', PTR),
                ('k_strides', AttentionStrides), ('v', PTR), ('v_strides', AttentionStrides),
                ('o', PTR), ('o_strides', AttentionStrides), ('lse', PTR),
                ('lse_strides', AttentionStrides), ('cu_seqlens_q', PTR), ('cu_seqlens_k', PTR),
                ('softmax_scale', F32), ('mask', ENUM), ('window_left', I64),
                ('window_right', I64), ('bias', PTR), ('bias_dtype', ENUM),
                ('bias_strides', AttentionStrides), ('alibi_slopes', PTR),
                ('alibi_stride_batch', I64), ('softcap', F32)]


class PagedStrides(ctypes.Structure):
    _fields_ = [('page', I64), ('slot', I64), ('head', I64), ('dim', I64)]


class PagedKV(ctypes.Structure):
    _fields_ = [('num_pages', I64), ('page_size', I64), ('k_pages', PTR), ('v_pages', PTR),
                ('k_strides', PagedStrides), ('v_strides', PagedStrides),
                ('block_table', PTR), ('max_pages_per_seq', I64), ('seqlens_k', PTR),
                ('kv_indptr', PTR), ('kv_page_indices', PTR), ('kv_last_page_len', PTR),
                ('error', PTR), ('max_seqlen_k', I64), ('page_dtype', ENUM), ('k_scale', PTR),
                ('v_scale', PTR), ('scale_stride', I64)]


class PagedAttentionDesc(ctypes.Structure):
    _fields_ = [('dtype', ENUM), ('batch', I64), ('num_heads_q', I64), ('num_heads_kv', I64),
                ('head_dim_qk', I64), ('head_dim_v', I64), ('max_seqlen_q', I64),
                ('cu_seqlens_q', PTR), ('q', PTR), ('q_strides', AttentionStrides), ('o', PTR),
                ('o_strides', AttentionStrides), ('lse', PTR),
                ('lse_strides', AttentionStrides), ('kv', PagedKV), ('softmax_scale', F32),
                ('mask', ENUM), ('window_left', I64), ('window_right', I64), ('softcap', F32)]


class PagedKVAppendDesc(ctypes.Structure):
    _fields_ = [('dtype', ENUM), ('batch', I64), ('num_heads_kv', I64), ('head_dim_qk', I64),
                ('head_dim_v', I64), ('max_seqlen_new', I64), ('cu_seqlens_new', PTR),
                ('k_new', PTR), ('v_new', PTR), ('k_new_strides', AttentionStrides),
                ('v_new_strides', AttentionStrides), ('kv', PagedKV)]


# C name -> mirror; the layout test requires this to cover every struct of the headers.
STRUCTS = {
    'ckjit_options': Options,
    'ckjit_device_info': DeviceInfo,
    'ckjit_stats': Stats,
    'ckjit_compile_result': CompileResult,
    'ckjit_epilogue': Epilogue,
    'ckjit_tensor_layout': TensorLayout,
    'ckjit_softmax_params': SoftmaxParams,
    'ckjit_norm_params': NormParams,
    'ckjit_gemm_desc': GemmDesc,
    'ckjit_gemm_fp8_desc': GemmFp8Desc,
    'ckjit_gemm_fp8_moe_desc': GemmFp8MoeDesc,
    'ckjit_moe_sort_desc': MoeSortDesc,
    'ckjit_fused_moe_desc': FusedMoeDesc,
    'ckjit_attention_strides': AttentionStrides,
    'ckjit_attention_desc': AttentionDesc,
    'ckjit_paged_strides': PagedStrides,
    'ckjit_paged_kv': PagedKV,
    'ckjit_paged_attention_desc': PagedAttentionDesc,
    'ckjit_paged_kv_append_desc': PagedKVAppendDesc,
}


# ---- packers -----------------------------------------------------------------------------
# One struct.pack_into over a run of fields costs about half of assigning them one by
# one through ctypes attributes (the descriptor ops fill a dozen fields per call).  The
# format is derived from the ctypes mirror itself (offsets included), so the layout
# test that checks the mirror checks the packers too.
_SIMPLE_CODES = {I32: 'i', U32: 'I', I64: 'q', U64: 'Q', F32: 'f', F64: 'd', PTR: 'Q',
                 SIZE: 'Q' if ctypes.sizeof(SIZE) == 8 else 'I'}


def _flat_fields(cls, base=0, prefix=''):
    """[(dotted name, offset, format code)] of cls's fields, nested structs flattened."""
    out = []
    for name, ctype in cls._fields_:
        off = base + getattr(cls, name).offset
        if isinstance(ctype, type) and issubclass(ctype, ctypes.Structure):
            out += _flat_fields(ctype, off, prefix + name + '.')
        elif ctype in _SIMPLE_CODES:
            out.append((prefix + name, off, _SIMPLE_CODES[ctype]))
        elif issubclass(ctype, ctypes.Array) and ctype._type_ in _SIMPLE_CODES:
            size = ctypes.sizeof(ctype._type_)
            out += [(f'{prefix}{name}[{i}]', off + i * size, _SIMPLE_CODES[ctype._type_])
                    for i in range(ctype._length_)]
        else:
            raise TypeError(f'{cls.__name__}.{name}: no packer code for {ctype}')
    return out


def packer(cls, first, last):
    """(struct.Struct, byte offset, [field names]) packing cls's flattened fields from
    `first` through `last` (dotted names for nested fields) in one call:
    `s.pack_into(instance, offset, *values)`, values in field order."""
    fields = _flat_fields(cls)
    names = [f[0] for f in fields]
    i, j = names.index(first), names.index(last)
    start, fmt, at = fields[i][1], '=', fields[i][1]
    for name, off, code in fields[i:j + 1]:
        if off > at:
            fmt += f'{off - at}x'
        fmt += code
        at = off + struct.calcsize('=' + code)
    return struct.Struct(fmt), start, names[i:j + 1]
