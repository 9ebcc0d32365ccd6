"""prewarm, stats, cache_dir, device_info: no GPU needed (NVRTC compiles sm_90 anywhere).

The cache-touching checks run in a child process with CKJIT_CACHE_DIR set to a temporary
directory, before ckjit initializes there, so they never write the user's cache and
this process's settings stay as they were."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import PACKAGE_ROOT

import ckjit
from ckjit import runtime

SPEC = 'elementwise:dtype=f32,op=relu'
STATS_KEYS = {'memory_hits', 'disk_hits', 'disk_misses', 'disk_rejects', 'disk_writes',
              'disk_write_errors', 'compiles', 'compile_failures', 'loads', 'load_failures',
              'compile_ms', 'load_ms', 'remote_hits', 'remote_misses', 'remote_rejects',
              'remote_writes', 'remote_errors', 'remote_lease_waits', 'remote_ms'}


def _child(script, cache_dir):
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT, CKJIT_CACHE_DIR=str(cache_dir),
               CKJIT_NO_TORCH='1')
    p = subprocess.run([sys.executable, '-c', textwrap.dedent(script)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_stats_is_a_dict_of_every_counter():
    s = ckjit.stats()
    assert set(s) == STATS_KEYS
    assert all(isinstance(s[k], int) for k in STATS_KEYS - {'compile_ms', 'load_ms', 'remote_ms'})
    assert isinstance(s['compile_ms'], float)
    ckjit.reset_stats()
    assert ckjit.stats()['compiles'] == 0


def test_device_info_without_arguments():
    info = ckjit.device_info()
    assert set(info) == {'backend', 'has_device', 'device', 'arch', 'device_arch', 'name',
                         'multiprocessors', 'compiler', 'cache_dir'}
    assert isinstance(info['has_device'], bool)
    assert info['backend'] in ('auto', 'cuda', 'hip')
    assert ckjit.device_info(None) == info
    if not info['has_device']:
        assert info['name'] == '' and info['multiprocessors'] == 0


def test_device_ordinals_are_parsed():
    class Dev:
        type, index = 'cuda', 1
    assert runtime._ordinal(None) == -1
    assert runtime._ordinal(2) == 2
    assert runtime._ordinal('cuda:3') == 3
    assert runtime._ordinal('cuda') == -1
    assert runtime._ordinal(Dev()) == 1
    with pytest.raises(ValueError, match='not an ordinal'):
        runtime._ordinal('gpu-two')


def test_device_count_is_an_int_or_unavailable():
    n = ckjit.device_count()
    assert n is None or (isinstance(n, int) and n >= 0)


def test_cache_dir_is_the_configured_directory(tmp_path):
    got = _child('''
        import json, ckjit
        print(json.dumps({'cache_dir': ckjit.cache_dir(),
                          'info': ckjit.device_info()['cache_dir']}))
    ''', tmp_path)
    assert os.path.realpath(got['cache_dir']) == os.path.realpath(tmp_path)
    assert got['info'] == got['cache_dir']


@pytest.fixture(scope='module')
def prewarm_run(tmp_path_factory):
    """One child: prewarm one spec, again (cached), then a list with a bad spec."""
    tmp_path = tmp_path_factory.mktemp('cache')
    got = _child(f'''
        import json, ckjit
        out = {{}}
        try:
            out['first'] = ckjit.prewarm([{SPEC!r}], arch='sm_90')
        except ckjit.CkjitError as e:
            print(json.dumps({{'error': str(e), 'status': e.status_name}}))
            raise SystemExit(0)
        out['stats'] = ckjit.stats()
        out['second'] = ckjit.prewarm({SPEC!r}, arch='sm_90', jobs=1)
        try:
            ckjit.prewarm(['bogus:x=1', {SPEC!r}], arch='sm_90', jobs=2)
        except ValueError as e:
            out['failure'] = {{'type': type(e).__name__, 'message': str(e),
                              'results': e.results}}
        out['cache_dir'] = ckjit.cache_dir()
        print(json.dumps(out))
    ''', tmp_path)
    if got.get('status') == 'CKJIT_ERROR_BACKEND_UNAVAILABLE':
        pytest.skip(f'no NVRTC on this host: {got["error"]}')
    return got, tmp_path


def test_prewarm_compiles_into_the_cache_dir(prewarm_run):
    got, tmp_path = prewarm_run
    assert 'error' not in got, got
    (first,), (second,) = got['first'], got['second']
    assert first['status'] == 'ok' and first['spec'] == SPEC and first['arch'] == 'sm_90'
    assert first['stored'] is True and first['code_size'] > 0
    assert len(first['key']) == 32 and int(first['key'], 16) >= 0
    assert first['kernel']
    assert got['stats']['compiles'] >= 1 or first['cached']
    assert second['cached'] is True and second['key'] == first['key']
    entries = [f for _, _, files in os.walk(tmp_path) for f in files if f.endswith('.ckjit')]
    assert any(first['key'] in f for f in entries), entries
    assert os.path.realpath(got['cache_dir']) == os.path.realpath(tmp_path)


def test_prewarm_runs_every_item_and_raises_the_first_failure(prewarm_run):
    failure = prewarm_run[0]['failure']
    assert failure['type'] == 'InvalidArgumentError'
    assert '1 of 2 items failed' in failure['message']
    assert "unknown kernel family 'bogus'" in failure['message']
    statuses = [r['status'] for r in failure['results']]
    assert statuses == ['failed', 'ok']


def test_default_specs_are_spec_strings():
    specs = ckjit.default_specs()
    assert len(specs) > 100
    assert all(':' in s for s in specs)
    assert any(s.startswith('elementwise:') for s in specs)
