#!/usr/bin/env python3
"""Host time of a C ckjit_unary call with two GPUs in use against one
(issue 19): runs bench_multi_gpu in alternating rounds of

  one          CUDA_VISIBLE_DEVICES=0, one thread on GPU 0 (the single-GPU
               figure: no stream's owner is asked)
  visible2     both GPUs visible, one thread on GPU 0 (each call asks its
               stream's owner: cuStreamGetCtx)
  two          both GPUs visible, one thread on each at once
  checks       as "two", with CKJIT_DEVICE_CHECKS=1 (every operand's device asked)
  raw_one, raw_two   "one" and "two" with cuLaunchKernel of the same kernel
               instead of ckjit_unary: the driver's own cost

and writes JSON lines for make_results.py (kind "host_time"):
  "two gpu launch host time vs one gpu"              ratio = one / two
  "two gpu raw cuLaunchKernel host time vs one gpu"  ratio = raw_one / raw_two
  "two gpus visible launch host time vs one gpu"     ratio = one / visible2
  "two gpu launch host time with device checks vs without"  ratio = two / checks

usage: multi_gpu.py --bin build-gpu/bench/bench_multi_gpu [--rounds 3] [--out FILE]
On a host with fewer than two GPUs it writes nothing and says why.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(binary, gpus, env_extra, calls, repeats, raw):
    env = dict(os.environ, **env_extra)
    p = subprocess.run([binary, '--gpus', str(gpus), '--calls', str(calls), '--repeats',
                        str(repeats)] + (['--raw'] if raw else []), env=env,
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f'{binary} --gpus {gpus} ({env_extra}): exit {p.returncode}: '
                           f'{p.stderr.strip()[-400:]}')
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith('{')]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--bin', required=True)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--calls', type=int, default=20000)
    ap.add_argument('--repeats', type=int, default=10)
    ap.add_argument('--out', help='JSONL output (default: stdout)')
    a = ap.parse_args()
    out = open(a.out, 'a', encoding='utf-8') if a.out else sys.stdout
    try:
        import ctypes
        cuda = ctypes.CDLL('libcuda.so.1')
        count = ctypes.c_int(0)
        if cuda.cuInit(0) or cuda.cuDeviceGetCount(ctypes.byref(count)):
            raise OSError('cuInit / cuDeviceGetCount failed')
        name = ctypes.create_string_buffer(128)
        cuda.cuDeviceGetName(name, 128, 0)
        card = name.value.decode()
    except OSError as e:
        print(f'multi_gpu.py: no CUDA driver ({e}); nothing measured', file=sys.stderr)
        return 0
    if count.value < 2:
        print(f'multi_gpu.py: {count.value} GPU(s) ({card}); the two-GPU figure needs two',
              file=sys.stderr)
        return 0
    one = {'CUDA_VISIBLE_DEVICES': '0'}
    configs = {'one': (1, one, 0), 'visible2': (1, {}, 0), 'two': (2, {}, 0),
               'checks': (2, {'CKJIT_DEVICE_CHECKS': '1'}, 0), 'raw_one': (1, one, 1),
               'raw_two': (2, {}, 1)}
    per = {k: [] for k in configs}  # each thread's median per call, every round
    for _ in range(a.rounds):
        for key, (gpus, env, raw) in configs.items():
            per[key] += [r['median_us'] for r in run(a.bin, gpus, env, a.calls, a.repeats, raw)]
    med = {k: statistics.median(v) for k, v in per.items()}

    def emit(metric, value, peer, peer_name, note):
        rec = {'metric': metric, 'kind': 'host_time', 'unit': 'us', 'value': round(value, 4),
               'peer_value': round(peer, 4), 'peer_name': peer_name, 'card': card,
               'details': {k: [round(x, 4) for x in v] for k, v in per.items()},
               'note': note}
        out.write(json.dumps(rec) + '\n')

    common = (f'ckjit_unary relu f32 1x1024 per call from C, {a.rounds} alternating rounds x '
              f'{a.repeats} repeats x {a.calls} calls, median of every thread\'s median')
    emit('two gpu launch host time vs one gpu', med['two'], med['one'],
         'one GPU visible (CUDA_VISIBLE_DEVICES=0), one thread',
         f'{common}; ckjit: two threads, one per GPU, at once; target ratio >= 1/1.1')
    emit('two gpu raw cuLaunchKernel host time vs one gpu', med['raw_two'], med['raw_one'],
         'cuLaunchKernel, one GPU visible, one thread',
         f'{common}; the same kernel and arguments launched with cuLaunchKernel (no ckjit): '
         'the driver\'s own cost when two threads launch on two GPUs at once')
    emit('two gpus visible launch host time vs one gpu', med['visible2'], med['one'],
         'one GPU visible (CUDA_VISIBLE_DEVICES=0), one thread',
         f'{common}; ckjit: both GPUs visible, one thread on GPU 0 (each call asks its '
         'stream\'s owner, cuStreamGetCtx)')
    emit('two gpu launch host time with device checks vs without', med['checks'], med['two'],
         'the same two threads without CKJIT_DEVICE_CHECKS',
         f'{common}; ckjit: CKJIT_DEVICE_CHECKS=1 (a driver query per operand); ratio = the '
         'share of a call left without the checks')
    print('multi_gpu.py: ' + ', '.join(f'{k} {v:.3f} us' for k, v in med.items()) +
          ' per call', file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
