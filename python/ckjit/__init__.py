"""ckjit for PyTorch: libckjit's JIT-compiled GPU ops on torch tensors, through ctypes.

    import torch, ckjit
    y = ckjit.rms_norm(x, (4096,), weight)            # like F.rms_norm
    z = ckjit.matmul(y, w.t(), bias=b, activation='gelu')
    p = ckjit.softmax(z, dim=-1)
    d = ckjit.scaled_mm(a8, w8.t(), scale_a, scale_b)  # FP8 (sm_90), like torch._scaled_mm

Ops run on their inputs' device, on torch's current stream there, and never
synchronize.  Importing ckjit loads libckjit (CKJIT_LIBRARY, next to the package, or
the installed library; ckjit.LibraryNotFoundError lists the places tried) and does not
need torch; when torch imports, the ops are also registered as torch.library custom
ops (torch.ops.ckjit.*) for torch.compile.  python/README.md has the conventions.
"""
import os

from ._errors import CkjitError, InvalidArgumentError, LibraryNotFoundError, UnsupportedError
from ._lib import library_path
from . import _torch_env
from . import attention as _attention_module
from . import elementwise, gemm, gemm_fp8, paged, reduce, rows
from . import runtime  # noqa: F401 (ckjit.runtime)
from .rows import (layer_norm, log_softmax, rms_norm, rms_norm_quant, smoothquant, softmax,
                   topk_softmax)
from .reduce import amax, amin, argmax, argmin, mean, sum  # noqa: A004 (torch's names)
from .elementwise import (add, copy, div, gelu, gelu_erf, gelu_tanh, identity, maximum,
                          minimum, mul, relu, sigmoid, silu, sub, transpose)
from .gemm import grouped_matmul, matmul
from .gemm_fp8 import scaled_mm
from .attention import attention
from .paged import paged_attention, paged_kv_append, paged_kv_check
from .runtime import (cache_dir, compile_spec, default_specs, device_count, device_info,
                      prewarm, reset_stats, spec_has_kernel, stats, version)

__version__ = '0.1.0'

_torch_env.OP_MODULES[:] = [rows, reduce, elementwise, gemm, gemm_fp8, _attention_module, paged]


def _setup_torch():
    """Binds the ops to torch and registers the custom ops, when torch imports (a broken or
    too old torch must not break `import ckjit`: the ops then say why when called)."""
    if os.environ.get('CKJIT_NO_TORCH'):
        return _torch_env.activate(None, why='CKJIT_NO_TORCH is set')
    try:
        import torch
    except ImportError as e:
        return _torch_env.activate(None, why=f'{type(e).__name__}: {e}')
    ops = None
    if hasattr(getattr(torch, 'library', None), 'custom_op'):  # torch >= 2.4
        from . import _torch_ops
        _torch_ops.register()
        ops = _torch_ops
    return _torch_env.activate(torch, ops)


_setup_torch()

__all__ = [
    'CkjitError', 'InvalidArgumentError', 'LibraryNotFoundError', 'UnsupportedError',
    'library_path', '__version__',
    'softmax', 'log_softmax', 'layer_norm', 'rms_norm', 'rms_norm_quant', 'smoothquant',
    'topk_softmax', 'sum', 'mean', 'amax', 'amin', 'argmax', 'argmin',
    'identity', 'relu', 'gelu', 'gelu_tanh', 'gelu_erf', 'silu', 'sigmoid',
    'add', 'sub', 'mul', 'div', 'maximum', 'minimum', 'copy', 'transpose',
    'matmul', 'grouped_matmul', 'scaled_mm', 'attention', 'paged_attention', 'paged_kv_append',
    'paged_kv_check', 'prewarm', 'compile_spec', 'spec_has_kernel', 'default_specs', 'stats',
    'reset_stats', 'cache_dir', 'device_info', 'device_count', 'version',
]
