"""Finding and loading libckjit, its function prototypes, and turning a failed
status into an exception.

Discovery order (the first that loads wins):
  1. CKJIT_LIBRARY: a path to the shared library, or a directory holding it.  When set,
     nothing else is tried: a wrong setting should fail loudly, not fall back to some
     other build.
  2. libckjit.so / libckjit.so.0 next to this package (a copy shipped with it).
  3. ctypes.util.find_library('ckjit'), then the sonames libckjit.so.0 and libckjit.so
     through the dynamic loader's search (LD_LIBRARY_PATH, the ldconfig cache).
  4. <prefix>/lib and <prefix>/lib/<multiarch> of this Python, and /usr/local/lib[/<multiarch>]
     (where `meson install` puts it).
None loading raises LibraryNotFoundError listing each place and why it failed.
"""
import ctypes
import ctypes.util
import os
import sys
import sysconfig

from . import _structs as S
from ._errors import LibraryNotFoundError, exception_class

_P = ctypes.POINTER
_NAMES = ('libckjit.so', 'libckjit.so.0')

# name: (restype, argtypes).  Descriptor and parameter pointers of the ops are c_void_p:
# the hot paths pass the integer address of a preallocated struct (no byref object).
# Functions marked in OPTIONAL may be absent from an older library.
PROTOTYPES = {
    'ckjit_version': (S.U32, []),
    'ckjit_version_string': (S.CSTR, []),
    'ckjit_status_string': (S.CSTR, [S.ENUM]),
    'ckjit_last_error': (S.CSTR, []),
    'ckjit_last_status': (S.ENUM, []),
    'ckjit_dtype_size': (S.SIZE, [S.ENUM]),
    'ckjit_dtype_name': (S.CSTR, [S.ENUM]),
    'ckjit_options_init': (None, [_P(S.Options)]),
    'ckjit_init': (S.ENUM, [_P(S.Options)]),
    'ckjit_shutdown': (None, []),
    'ckjit_get_device_info': (S.ENUM, [_P(S.DeviceInfo)]),
    'ckjit_get_device_info_for': (S.ENUM, [S.I32, _P(S.DeviceInfo)]),
    'ckjit_get_device_count': (S.ENUM, [_P(S.I32)]),
    'ckjit_malloc': (S.ENUM, [_P(S.PTR), S.SIZE]),
    'ckjit_free': (S.ENUM, [S.PTR]),
    'ckjit_memcpy': (S.ENUM, [S.PTR, S.PTR, S.SIZE, S.ENUM]),
    'ckjit_memset': (S.ENUM, [S.PTR, S.I32, S.SIZE]),
    'ckjit_synchronize': (S.ENUM, [S.PTR]),
    'ckjit_get_stats': (None, [_P(S.Stats)]),
    'ckjit_reset_stats': (None, []),
    'ckjit_default_spec_count': (S.SIZE, []),
    'ckjit_default_spec': (S.ENUM, [S.SIZE, ctypes.c_char_p, S.SIZE]),
    'ckjit_spec_has_kernel': (S.ENUM, [S.CSTR, S.CSTR]),
    'ckjit_compile_spec': (S.ENUM, [S.CSTR, S.CSTR, _P(S.CompileResult)]),
    'ckjit_get_function': (S.ENUM, [S.CSTR, _P(S.PTR)]),
    'ckjit_copy2d': (S.ENUM, [S.ENUM, S.I64, S.I64, S.PTR, S.I64, S.PTR, S.I64, S.PTR]),
    'ckjit_unary': (S.ENUM, [S.ENUM, S.ENUM, S.I64, S.I64, S.PTR, S.I64, S.PTR, S.I64, S.PTR,
                             S.PTR]),
    'ckjit_binary': (S.ENUM, [S.ENUM, S.ENUM, S.I64, S.I64, S.PTR, S.I64, S.PTR, S.I64, S.PTR,
                              S.I64, S.PTR, S.PTR]),
    'ckjit_transpose': (S.ENUM, [S.ENUM, S.I64, S.I64, S.I64, S.PTR, S.I64, S.I64, S.PTR, S.I64,
                                 S.I64, S.PTR]),
    'ckjit_reduce': (S.ENUM, [S.ENUM, S.ENUM, S.PTR, S.PTR, S.I32, S.ENUM, S.PTR, S.PTR]),
    'ckjit_reduce_rows': (S.ENUM, [S.ENUM, S.ENUM, S.I64, S.I64, S.PTR, S.I64, S.ENUM, S.PTR,
                                   S.PTR]),
    'ckjit_softmax_params_init': (None, [_P(S.SoftmaxParams)]),
    'ckjit_softmax': (S.ENUM, [S.ENUM, S.I64, S.I64, S.PTR, S.I64, S.PTR, S.I64, S.PTR, S.PTR]),
    'ckjit_softmax_prepare': (S.ENUM, [S.ENUM, S.I64, S.I64, S.I64, S.I64, S.PTR, S.I32,
                                       S.PTR]),
    'ckjit_prepared_run': (S.ENUM, [S.PTR, S.PTR, S.PTR, S.PTR]),
    'ckjit_prepared_free': (None, [S.PTR]),
    'ckjit_norm_params_init': (None, [_P(S.NormParams)]),
    'ckjit_layernorm2d': (S.ENUM, [S.ENUM, S.I64, S.I64, S.PTR, S.I64, S.PTR, S.I64, S.PTR,
                                   S.PTR]),
    'ckjit_rmsnorm2d': (S.ENUM, [S.ENUM, S.I64, S.I64, S.PTR, S.I64, S.PTR, S.I64, S.PTR, S.PTR]),
    'ckjit_rmsnorm2d_quant': (S.ENUM, [S.ENUM, S.I64, S.I64, S.PTR, S.I64, S.PTR, S.ENUM, S.PTR,
                                       S.I64, S.PTR, S.PTR]),
    'ckjit_smoothquant': (S.ENUM, [S.ENUM, S.I64, S.I64, S.PTR, S.I64, S.PTR, S.ENUM, S.PTR,
                                   S.I64, S.PTR, S.PTR]),
    'ckjit_topk_softmax': (S.ENUM, [S.ENUM, S.I64, S.I64, S.PTR, S.I64, S.I32, S.I32, S.PTR,
                                    S.ENUM, S.PTR, S.PTR]),
    'ckjit_gemm_desc_init': (None, [_P(S.GemmDesc)]),
    'ckjit_gemm': (S.ENUM, [S.PTR, S.PTR]),
    'ckjit_gemm_grouped': (S.ENUM, [S.PTR, S.I32, S.PTR]),
    'ckjit_gemm_fp8_desc_init': (None, [_P(S.GemmFp8Desc)]),
    'ckjit_gemm_fp8': (S.ENUM, [S.PTR, S.PTR]),
    'ckjit_gemm_fp8_moe_desc_init': (None, [_P(S.GemmFp8MoeDesc)]),
    'ckjit_gemm_fp8_moe': (S.ENUM, [S.PTR, S.PTR]),
    'ckjit_moe_sort_desc_init': (None, [_P(S.MoeSortDesc)]),
    'ckjit_moe_sort_capacity': (S.I64, [S.I64, S.I32, S.I32, S.I32]),
    'ckjit_moe_sort': (S.ENUM, [S.PTR, S.PTR]),
    'ckjit_fused_moe_desc_init': (None, [_P(S.FusedMoeDesc)]),
    'ckjit_fused_moe_workspace_size': (S.SIZE, [S.PTR]),
    'ckjit_fused_moe': (S.ENUM, [S.PTR, S.PTR]),
    'ckjit_fused_moe_router_workspace_size': (S.SIZE, [S.PTR]),
    'ckjit_fused_moe_router': (S.ENUM, [S.PTR, S.ENUM, S.PTR, S.I64, S.I32, S.PTR]),
    'ckjit_attention_desc_init': (None, [_P(S.AttentionDesc)]),
    'ckjit_attention_strides_bshd': (S.AttentionStrides, [S.I64, S.I64, S.I64]),
    'ckjit_attention_strides_bhsd': (S.AttentionStrides, [S.I64, S.I64, S.I64]),
    'ckjit_attention': (S.ENUM, [S.PTR, S.PTR]),
    'ckjit_paged_strides_nhd': (S.PagedStrides, [S.I64, S.I64, S.I64]),
    'ckjit_paged_strides_hnd': (S.PagedStrides, [S.I64, S.I64, S.I64]),
    'ckjit_paged_attention_desc_init': (None, [_P(S.PagedAttentionDesc)]),
    'ckjit_paged_attention': (S.ENUM, [S.PTR, S.PTR]),
    'ckjit_paged_kv_append_desc_init': (None, [_P(S.PagedKVAppendDesc)]),
    'ckjit_paged_kv_append': (S.ENUM, [S.PTR, S.PTR]),
    'ckjit_paged_kv_check': (S.ENUM, [S.PTR, S.I64, S.PTR]),
}
OPTIONAL = frozenset({'ckjit_get_device_info_for', 'ckjit_get_device_count',
                      'ckjit_fused_moe_router_workspace_size', 'ckjit_fused_moe_router'})


def candidates(environ=None):
    """[(place, what to dlopen)] in discovery order (see the module's docstring)."""
    environ = os.environ if environ is None else environ
    given = environ.get('CKJIT_LIBRARY')
    if given:
        if os.path.isdir(given):
            return [(f'CKJIT_LIBRARY={given}', os.path.join(given, n)) for n in _NAMES]
        return [(f'CKJIT_LIBRARY={given}', given)]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [('next to the package', os.path.join(here, n)) for n in _NAMES]
    found = ctypes.util.find_library('ckjit')
    if found:
        out.append(('ctypes.util.find_library', found))
    out += [('the dynamic loader', n) for n in reversed(_NAMES)]
    multiarch = sysconfig.get_config_var('MULTIARCH') or ''
    for prefix in dict.fromkeys((sys.prefix, '/usr/local')):
        for sub in ('lib', os.path.join('lib', multiarch) if multiarch else None):
            if sub:
                out += [('installed', os.path.join(prefix, sub, n)) for n in _NAMES]
    return out


def load(environ=None):
    """(ctypes.CDLL, path) of the first candidate that loads and is a libckjit."""
    tried = []
    for place, target in candidates(environ):
        if os.sep in target and not os.path.exists(target):
            tried.append((place, target, 'no such file'))
            continue
        try:
            lib = ctypes.CDLL(target)
        except OSError as e:
            tried.append((place, target, str(e)))
            continue
        if not hasattr(lib, 'ckjit_version'):
            tried.append((place, target, 'loads, but has no ckjit_version (not libckjit)'))
            continue
        missing = sorted(n for n in PROTOTYPES if n not in OPTIONAL and not hasattr(lib, n))
        if missing:
            tried.append((place, target, f'too old a libckjit: no {", ".join(missing[:4])}'))
            continue
        bind(lib)
        return lib, _loaded_path(lib, target)
    lines = '\n'.join(f'  {place}: {target}: {why}' for place, target, why in tried)
    raise LibraryNotFoundError(
        'ckjit: no libckjit could be loaded; tried:\n' + lines + '\nBuild it (meson setup build '
        '&& ninja -C build) and set CKJIT_LIBRARY to build/libckjit.so, or install it '
        '(meson install -C build).', [(p, t) for p, t, _ in tried])


def _loaded_path(lib, target):
    """The file actually mapped for lib (dladdr through /proc/self/maps is not portable;
    the name given is good enough when it is a path)."""
    if os.sep in target:
        return os.path.realpath(target)
    try:
        with open('/proc/self/maps') as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip()
                if os.path.basename(path).startswith('libckjit.so'):
                    return path
    except OSError:
        pass
    return target


def bind(lib):
    """Sets restype/argtypes of every function in PROTOTYPES that lib has (once per
    process: ctypes keeps them on the function objects)."""
    for name, (restype, argtypes) in PROTOTYPES.items():
        if hasattr(lib, name):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes


lib, library_path = load()
_last_error = lib.ckjit_last_error
_status_string = lib.ckjit_status_string


def error(status, api=None):
    """The exception for a failed call's status, with ckjit_last_error()'s message (read
    on the calling thread, right after the failed call)."""
    message = (_last_error() or b'').decode('utf-8', 'replace').strip()
    name = (_status_string(status) or b'?').decode()
    if not message:
        message = f'{api or "ckjit"} failed'
    return exception_class(status)(f'{message} [{name}]', status, name)
