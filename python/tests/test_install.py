"""The package installs offline with the system's setuptools and imports from where it was
installed.  Builds run on a copy of python/ (setuptools writes build/ and *.egg-info next
to the sources)."""
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from conftest import PACKAGE_ROOT

import ckjit

MODULES = {'__init__.py', '_errors.py', '_lib.py', '_structs.py', '_torch_env.py',
           '_torch_ops.py', 'attention.py', 'elementwise.py', 'gemm.py', 'gemm_fp8.py',
           'paged.py', 'reduce.py', 'rows.py', 'runtime.py'}


@pytest.fixture
def source_copy(tmp_path):
    src = tmp_path / 'src'
    src.mkdir()
    for name in ('pyproject.toml', 'setup.py', 'README.md'):
        shutil.copy(os.path.join(PACKAGE_ROOT, name), src / name)
    shutil.copytree(os.path.join(PACKAGE_ROOT, 'ckjit'), src / 'ckjit',
                    ignore=shutil.ignore_patterns('__pycache__', 'libckjit.so*'))
    return src


def _setuptools_version():
    """(major, minor) of the installed setuptools, or None (read from its metadata:
    importing it here would patch distutils in the test process)."""
    try:
        return tuple(int(x) for x in importlib.metadata.version('setuptools').split('.')[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def _setuptools_ok():
    return (_setuptools_version() or (0, 0)) >= (61, 0)


def _import_from(path):
    env = dict(os.environ, PYTHONPATH=str(path), CKJIT_NO_TORCH='1',
               CKJIT_LIBRARY=ckjit.library_path)  # absolute: the child runs elsewhere
    return subprocess.run([sys.executable, '-c', 'import ckjit; print(ckjit.__file__, '
                           'ckjit.version())'], env=env, capture_output=True, text=True,
                          cwd=str(path), timeout=120)


def test_package_lists_every_module():
    here = {f for f in os.listdir(os.path.dirname(ckjit.__file__)) if f.endswith('.py')}
    assert here == MODULES


def test_setup_py_build(source_copy):
    if not _setuptools_ok():
        pytest.skip('setuptools >= 61 is not installed (python3-setuptools)')
    p = subprocess.run([sys.executable, 'setup.py', '-q', 'build'], cwd=source_copy,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    built = source_copy / 'build' / 'lib' / 'ckjit'
    assert {f for f in os.listdir(built) if f.endswith('.py')} == MODULES
    p = _import_from(source_copy / 'build' / 'lib')
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[0].startswith(str(source_copy / 'build' / 'lib'))


def test_pip_install_offline(source_copy, tmp_path):
    if importlib.util.find_spec('pip') is None:
        pytest.skip('pip is not installed')
    if not _setuptools_ok():
        pytest.skip('setuptools >= 61 is not installed (python3-setuptools)')
    if importlib.util.find_spec('wheel') is None and _setuptools_version() < (70, 1):
        pytest.skip(f'setuptools {_setuptools_version()} builds wheels only with the wheel '
                    'package (python3-wheel)')
    target = tmp_path / 'site'
    p = subprocess.run([sys.executable, '-m', 'pip', 'install', '--no-build-isolation',
                        '--no-index', '--no-deps', '--disable-pip-version-check', '--target',
                        str(target), str(source_copy)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert {f for f in os.listdir(target / 'ckjit') if f.endswith('.py')} == MODULES
    p = _import_from(target)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[0].startswith(str(target))
    assert p.stdout.split()[1] == ckjit.version()
