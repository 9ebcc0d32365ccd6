"""The runtime side: prewarm (ahead-of-time compiles), statistics, the cache directory,
device information and versions.  None of these needs torch or a GPU (compiles use
NVRTC/hipRTC only)."""
import concurrent.futures
import ctypes
import os

from . import _structs as S
from ._errors import UnsupportedError
from ._lib import error as _error, lib as _lib

_HAS_INFO_FOR = hasattr(_lib, 'ckjit_get_device_info_for')
_HAS_COUNT = hasattr(_lib, 'ckjit_get_device_count')


def version():
    """The linked library's version string ("0.1.0")."""
    return _lib.ckjit_version_string().decode()


def default_specs():
    """The default specializations (what `ckjit-prewarm --all` compiles), as spec strings."""
    buf = ctypes.create_string_buffer(1024)
    out = []
    for i in range(_lib.ckjit_default_spec_count()):
        st = _lib.ckjit_default_spec(i, buf, len(buf))
        if st:
            raise _error(st, 'ckjit_default_spec')
        out.append(buf.value.decode())
    return out


def _arch_bytes(arch):
    return None if arch is None else str(arch).encode()


def spec_has_kernel(spec, arch=None):
    """True when `spec` has a kernel for `arch` (None: the configured arch); False when
    its family runs on other archs only.  A malformed spec or arch raises (ValueError /
    ckjit.UnsupportedError with ckjit's message)."""
    st = _lib.ckjit_spec_has_kernel(spec.encode(), _arch_bytes(arch))
    if st == S.ERROR_UNSUPPORTED:
        message = (_lib.ckjit_last_error() or b'').decode('utf-8', 'replace')
        if ' has no kernel for ' in message:  # a real spec, another arch's family
            return False
    if st:
        raise _error(st, 'ckjit_spec_has_kernel')
    return True


def _result_dict(spec, arch, r):
    return {'spec': spec, 'arch': arch, 'status': 'ok', 'cached': bool(r.cached), 'ms': r.ms,
            'code_size': r.code_size, 'key': r.key.decode(), 'kernel': r.kernel.decode(),
            'stored': bool(r.stored)}


def compile_spec(spec, arch=None):
    """Compiles one spec for `arch` (None: the configured arch) into the disk cache, no GPU
    needed; returns a dict (cached, ms, code_size, key, kernel, stored).  Raises the
    mapped exception with ckjit's message (the compiler log for a compile error)."""
    r = S.CompileResult()
    st = _lib.ckjit_compile_spec(spec.encode(), _arch_bytes(arch), ctypes.byref(r))
    if st:
        raise _error(st, 'ckjit_compile_spec')
    return _result_dict(spec, arch, r)


def _compile_item(spec, arch, skip_other_archs):
    """One prewarm item, run on a worker thread: its dict, or (status, exception) -- the
    message must be read on the thread that failed (ckjit_last_error is per thread)."""
    if skip_other_archs and not spec_has_kernel(spec, arch):
        return {'spec': spec, 'arch': arch, 'status': 'skipped',
                'why': 'its family has no kernel for this arch'}
    return compile_spec(spec, arch)


def prewarm(specs='all', arch=None, jobs=None):
    """Compiles specializations into the disk cache ahead of time (as ckjit-prewarm).

    specs: 'all' (the default set; pairs whose family has no kernel for the arch are
    skipped, as `ckjit-prewarm --all` does), one spec string, or a list of them.  arch:
    None (the configured arch: CKJIT_ARCH or the GPU's), an arch ("sm_90", "gfx90a"),
    a comma-separated list or a list.  jobs: worker threads (default: the CPU count;
    the compiler runs without the GIL).  Returns one dict per (spec, arch), in order:
    status 'ok' (cached, ms, code_size, key, kernel, stored) or 'skipped' (why).  When
    items fail, the others still run; then the first failure's exception is raised
    (ValueError, ckjit.UnsupportedError, ckjit.CkjitError) with a line per failure, and
    its `results` attribute holds every item's dict (status 'failed', error)."""
    every = isinstance(specs, str) and specs == 'all'
    names = default_specs() if every else ([specs] if isinstance(specs, str) else list(specs))
    archs = [None] if arch is None else (
        [a for a in arch.split(',') if a] if isinstance(arch, str) else list(arch))
    items = [(spec, a) for a in archs for spec in names]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(items) or 1))
    results, failures = [None] * len(items), []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_compile_item, spec, a, every) for spec, a in items]
        for i, fut in enumerate(futures):
            try:
                results[i] = fut.result()
            except Exception as e:  # noqa: BLE001 -- collected, the first one re-raised
                spec, a = items[i]
                results[i] = {'spec': spec, 'arch': a, 'status': 'failed', 'error': str(e)}
                failures.append(e)
    if failures:
        first = failures[0]
        lines = [f"  {r['spec']} ({r['arch'] or 'configured arch'}): {r['error']}"
                 for r in results if r['status'] == 'failed']
        message = (f'ckjit.prewarm: {len(failures)} of {len(items)} items failed:\n'
                   + '\n'.join(lines))
        exc = type(first)(message, getattr(first, 'status', None),
                          getattr(first, 'status_name', None)) \
            if hasattr(first, 'status') else type(first)(message)
        exc.results = results
        raise exc from first
    return results


def stats():
    """ckjit_get_stats as a dict (process totals: hits, misses, compiles, loads, times)."""
    s = S.Stats()
    _lib.ckjit_get_stats(ctypes.byref(s))
    return {name: getattr(s, name) for name, _ in S.Stats._fields_}


def reset_stats():
    _lib.ckjit_reset_stats()


def _info_dict(info):
    return {'backend': S.BACKEND_NAMES.get(info.backend, str(info.backend)),
            'has_device': bool(info.has_device), 'device': info.device,
            'arch': info.arch.decode(), 'device_arch': info.device_arch.decode(),
            'name': info.name.decode(), 'multiprocessors': info.multiprocessors,
            'compiler': info.compiler.decode(), 'cache_dir': info.cache_dir.decode()}


def _ordinal(device):
    """A device ordinal from None (-1: the default device), an int, 'cuda:N' or a
    torch.device."""
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    if not isinstance(device, str) and hasattr(device, 'type'):  # a torch.device
        return -1 if device.index is None else device.index
    text = str(device)
    if text in ('cuda', 'hip'):
        return -1
    if text.startswith(('cuda:', 'hip:')) and text.split(':', 1)[1].isdigit():
        return int(text.split(':', 1)[1])
    raise ValueError(f'ckjit.device_info: device {device!r} is not an ordinal, "cuda:N" or '
                     'a torch.device')


def device_info(device=None):
    """What ckjit knows of a device (None / -1: the default device; an ordinal, "cuda:N"
    or a torch.device): backend, has_device, device, arch (compiled for), device_arch,
    name, multiprocessors, compiler, cache_dir.  Works without a GPU (has_device False).
    With a library older than ckjit_get_device_info_for only the default device can be
    described; another ordinal raises ckjit.UnsupportedError."""
    index = _ordinal(device)
    info = S.DeviceInfo()
    if _HAS_INFO_FOR:
        st = _lib.ckjit_get_device_info_for(index, ctypes.byref(info))
        api = 'ckjit_get_device_info_for'
    else:
        st = _lib.ckjit_get_device_info(ctypes.byref(info))
        api = 'ckjit_get_device_info'
    if st:
        raise _error(st, api)
    if not _HAS_INFO_FOR and index >= 0 and info.has_device and info.device != index:
        raise UnsupportedError(f'ckjit.device_info: this libckjit describes only its default '
                               f'device (cuda:{info.device}); it has no '
                               'ckjit_get_device_info_for', S.ERROR_UNSUPPORTED,
                               'CKJIT_ERROR_UNSUPPORTED')
    return _info_dict(info)


def device_count():
    """GPUs of the backend's vendor that the process sees (0 without one); None when the
    library has no ckjit_get_device_count."""
    if not _HAS_COUNT:
        return None
    n = ctypes.c_int(0)
    st = _lib.ckjit_get_device_count(ctypes.byref(n))
    if st:
        raise _error(st, 'ckjit_get_device_count')
    return n.value


def cache_dir():
    """The writable disk cache directory ckjit uses (CKJIT_CACHE_DIR, XDG_CACHE_HOME/ckjit or
    ~/.cache/ckjit), or None when the disk cache is off."""
    info = S.DeviceInfo()
    st = _lib.ckjit_get_device_info(ctypes.byref(info))
    if st:
        raise _error(st, 'ckjit_get_device_info')
    return info.cache_dir.decode() or None
