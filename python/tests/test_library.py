"""Library discovery, and C statuses turned into Python exceptions with ckjit's messages
(real C errors, no GPU needed)."""
import ctypes.util
import os
import re
import subprocess
import sys

import pytest

from conftest import PACKAGE_ROOT, REPO

import ckjit
from ckjit import _lib, _structs as S


def _import_in_child(env_changes):
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT, **env_changes)
    return subprocess.run([sys.executable, '-c', 'import ckjit; print(ckjit.library_path)'],
                          env=env, capture_output=True, text=True, timeout=120)


def test_missing_file_names_the_path():
    path = '/nonexistent/dir/libckjit.so'
    with pytest.raises(ckjit.LibraryNotFoundError) as info:
        _lib.load({'CKJIT_LIBRARY': path})
    message = str(info.value)
    assert path in message and 'no such file' in message and 'CKJIT_LIBRARY' in message
    assert isinstance(info.value, ImportError)
    assert info.value.tried == [(f'CKJIT_LIBRARY={path}', path)]


def test_directory_without_the_library_names_each_file(tmp_path):
    with pytest.raises(ckjit.LibraryNotFoundError) as info:
        _lib.load({'CKJIT_LIBRARY': str(tmp_path)})
    for name in ('libckjit.so', 'libckjit.so.0'):
        assert str(tmp_path / name) in str(info.value)


def test_file_that_is_not_a_library(tmp_path):
    bogus = tmp_path / 'libckjit.so'
    bogus.write_text('not an ELF file')
    with pytest.raises(ckjit.LibraryNotFoundError) as info:
        _lib.load({'CKJIT_LIBRARY': str(bogus)})
    assert str(bogus) in str(info.value)


def test_a_library_that_is_not_ckjit():
    libm = ctypes.util.find_library('m')
    if not libm:
        pytest.skip('no libm to stand in for a foreign library')
    # find_library gives a soname; a real path is wanted for CKJIT_LIBRARY
    path = next((os.path.join(d, libm) for d in ('/lib/x86_64-linux-gnu', '/usr/lib64', '/lib64',
                                                   '/usr/lib/x86_64-linux-gnu')
                 if os.path.exists(os.path.join(d, libm))), None)
    if path is None:
        pytest.skip(f'{libm} not found in the usual directories')
    with pytest.raises(ckjit.LibraryNotFoundError, match='not libckjit'):
        _lib.load({'CKJIT_LIBRARY': path})


def test_directory_setting_loads_the_library():
    lib, path = _lib.load({'CKJIT_LIBRARY': os.path.dirname(ckjit.library_path)})
    assert os.path.basename(path).startswith('libckjit.so')
    assert lib.ckjit_version() == ckjit._lib.lib.ckjit_version()


def test_default_candidates_cover_package_loader_and_prefixes():
    places = [place for place, _ in _lib.candidates({})]
    assert places[0] == 'next to the package'
    assert 'the dynamic loader' in places and 'installed' in places


def test_import_fails_clearly_in_a_fresh_process():
    path = '/nonexistent/libckjit.so'
    p = _import_in_child({'CKJIT_LIBRARY': path})
    assert p.returncode != 0
    assert 'LibraryNotFoundError' in p.stderr and path in p.stderr


def test_import_needs_no_torch_and_reports_the_library():
    p = _import_in_child({'CKJIT_NO_TORCH': '1'})
    assert p.returncode == 0, p.stderr
    assert os.path.realpath(p.stdout.strip()) == os.path.realpath(ckjit.library_path)


def test_malformed_spec_is_a_value_error_with_ckjit_message():
    with pytest.raises(ValueError) as info:
        ckjit.compile_spec('bogus:x=1', 'sm_90')
    e = info.value
    assert isinstance(e, ckjit.InvalidArgumentError) and isinstance(e, ckjit.CkjitError)
    assert "unknown kernel family 'bogus'" in str(e)
    assert e.status == S.ERROR_INVALID_ARGUMENT and e.status_name == 'CKJIT_ERROR_INVALID_ARGUMENT'


def test_bad_value_names_the_spec():
    with pytest.raises(ValueError, match="bad value 'nope' for op"):
        ckjit.compile_spec('elementwise:dtype=f32,op=nope', 'sm_90')


def test_unsupported_is_not_implemented_error():
    with pytest.raises(NotImplementedError) as info:
        ckjit.compile_spec('elementwise:dtype=f32,op=relu', 'bogus')
    assert isinstance(info.value, ckjit.UnsupportedError)
    assert "arch 'bogus'" in str(info.value)
    assert info.value.status == S.ERROR_UNSUPPORTED


def test_spec_has_kernel():
    assert ckjit.spec_has_kernel('elementwise:dtype=f32,op=relu', 'sm_90') is True
    assert ckjit.spec_has_kernel('gemm_wgmma', 'sm_80') is False
    assert ckjit.spec_has_kernel('gemm_mfma', 'sm_90') is False
    with pytest.raises(ckjit.UnsupportedError, match='not an arch name'):
        ckjit.spec_has_kernel('elementwise', 'bogus')
    with pytest.raises(ValueError):
        ckjit.spec_has_kernel('elementwise:op=nope', 'sm_90')


def test_other_statuses_are_ckjit_errors_not_value_errors():
    if ckjit.device_info()['has_device']:
        pytest.skip('a GPU is present: ckjit_malloc would succeed (this checks NO_DEVICE)')
    ptr = ctypes.c_void_p()
    st = _lib.lib.ckjit_malloc(ctypes.byref(ptr), 16)
    assert st == S.ERROR_NO_DEVICE
    e = _lib.error(st, 'ckjit_malloc')
    assert type(e) is ckjit.CkjitError and not isinstance(e, ValueError)
    assert isinstance(e, RuntimeError) and 'no GPU' in str(e)
    assert e.status_name == 'CKJIT_ERROR_NO_DEVICE'


def test_versions_agree():
    """The package's version, the header's CKJIT_VERSION_STRING and the library's."""
    with open(os.path.join(REPO, 'include', 'ckjit', 'ckjit.h')) as f:
        header = re.search(r'#define CKJIT_VERSION_STRING "([^"]+)"', f.read()).group(1)
    assert ckjit.__version__ == header == ckjit.version()
