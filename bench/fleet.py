#!/usr/bin/env python3
"""A fleet sharing one remote cache (Redis), simulated on this host.

PROCS processes x THREADS threads, each process with its own empty
CKJIT_CACHE_DIR, all building the same SPECS default specializations
(elementwise and transpose: quick compiles) with ckjit_compile_spec for ARCH
(no GPU needed), once against one empty redis-server (CKJIT_REMOTE_CACHE) and
once without it.  Each process is tests/remote/remote_helper of a build
directory.  Then, in fresh processes, the first call of K kernels: compiled
cold, fetched from Redis into an empty local cache, and read from the local
disk cache.

Prints JSON lines (kind "host_time", read by bench/make_results.py: ratio =
peer_value / value):

  fleet compiles vs distinct kernels           value: compiles in the whole fleet
                                               with Redis; peer: distinct kernels
  fleet wall time with redis vs without        value / peer: seconds (details: one
                                               process alone, cold, no Redis)
  remote hit first call vs cold compile        ms per kernel (medians)
  remote hit first call vs local disk          ms per kernel (medians)

and a summary on stderr: compiles with and without Redis, remote hits, lease
waits, rejects, each process's time, and `ckjit-cache verify` of every local
cache (corrupt entries must be 0).

  bench/fleet.py [--build build-redis] [--procs 16] [--threads 4] [--specs 40]
                 [--arch sm_90] [--first-call 8] [--out FILE] [--quick] [--gpu]

--gpu (a GPU host) adds the first call of a real op: bench_ckjit
--child-first-call of the same build (ckjit_copy2d f32 1x1024 after the
device is initialized, until the stream is synchronized) in fresh processes:
cold compile, remote hit into an empty local cache, local disk.  Records
"remote hit first call vs cold compile (copy2d f32 1x1024 op, gpu)" and
"... vs local disk (...)".

The other CKJIT_REMOTE_CACHE_* settings pass through from the environment
(CKJIT_REMOTE_CACHE_WAIT_MS=0 shows the fleet without waiting on leases).
"""
import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def log(msg):
    print(f'fleet.py: {msg}', file=sys.stderr, flush=True)


def card():
    model = 'unknown CPU'
    try:
        with open('/proc/cpuinfo', encoding='utf-8') as f:
            for line in f:
                if line.startswith('model name'):
                    model = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    return f'{model}, {os.cpu_count()} cores'


class Redis:
    """A private redis-server on a Unix socket, no persistence."""

    def __init__(self, work):
        self.dir = tempfile.mkdtemp(prefix='redis-', dir=work)
        self.sock = os.path.join(self.dir, 'r.sock')
        exe = shutil.which('redis-server')
        if not exe:
            sys.exit('fleet.py: redis-server is not on PATH (apt-get install redis-server)')
        self.proc = subprocess.Popen(
            [exe, '--port', '0', '--unixsocket', self.sock, '--unixsocketperm', '700',
             '--save', '', '--appendonly', 'no', '--dir', self.dir, '--daemonize', 'no'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):
            if self.command('PING') == b'+PONG':
                break
            time.sleep(0.01)
        else:
            self.stop()
            sys.exit('fleet.py: redis-server did not start')
        self.url = 'unix://' + self.sock

    def command(self, *words):
        """One command; the first reply line (raw), or None."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect(self.sock)
                req = f'*{len(words)}\r\n'.encode()
                for w in words:
                    b = w.encode()
                    req += f'${len(b)}\r\n'.encode() + b + b'\r\n'
                s.sendall(req)
                buf = b''
                while not buf.endswith(b'\r\n'):
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
                return buf.split(b'\r\n')[0]
        except OSError:
            return None

    def dbsize(self):
        r = self.command('DBSIZE')
        return int(r[1:]) if r and r.startswith(b':') else -1

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def parse_stats(out):
    m = re.search(r'^stats (.*)$', out, re.M)
    if not m:
        return {}
    return {k: float(v) for k, v in (kv.split('=') for kv in m.group(1).split())}


def parse_calls(out):
    calls = []
    for line in out.splitlines():
        if line.startswith('call '):
            calls.append({k: v for k, v in (kv.split('=', 1) for kv in line.split()[3:])})
    return calls


def run_fleet(helper, cache_tool, work, tag, url, procs, threads, specs, arch):
    """PROCS helpers at once, each with its own empty cache."""
    env_base = {k: v for k, v in os.environ.items() if k != 'CKJIT_REMOTE_CACHE'}
    # The processes only compile: no GPU for them, or on a GPU host each would first
    # create a CUDA context, and 16 at once queue for seconds on the driver (measured
    # ~6 s of the fleet's wall time on the H100 host, with and without Redis alike).
    env_base['CUDA_VISIBLE_DEVICES'] = ''
    running = []
    t0 = time.monotonic()
    for i in range(procs):
        cache = os.path.join(work, f'{tag}-{i}')
        env = dict(env_base, CKJIT_CACHE_DIR=cache)
        if url:
            env['CKJIT_REMOTE_CACHE'] = url
        p = subprocess.Popen([helper, '--threads', str(threads), arch] + specs, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        running.append((p, cache, time.monotonic()))
    results = []
    for p, cache, started in running:
        out, err = p.communicate(timeout=3600)
        ended = time.monotonic()
        if p.returncode != 0:
            log(f'{tag}: a process failed ({p.returncode}):\n{out}\n{err}')
        st = parse_stats(out)
        verify = subprocess.run([cache_tool, '--json', '--cache-dir', cache, 'verify'],
                                capture_output=True, text=True)
        v = json.loads(verify.stdout) if verify.stdout.strip().startswith('{') else {}
        results.append({'status': p.returncode, 'stats': st, 'seconds': ended - started,
                        'verify_ok': v.get('ok', -1), 'verify_bad': v.get('bad_count', -1),
                        'warnings': err.count('warning')})
    wall = time.monotonic() - t0
    return wall, results


def first_call(helper, work, tag, url, specs, arch, cache_of):
    """The first call of each spec in a fresh process, the library initialized
    before it (device probing, compiler identification: the same for every
    tier): ms of the call (ckjit_compile_spec's wall time)."""
    ms = []
    for i, spec in enumerate(specs):
        env = {k: v for k, v in os.environ.items() if k != 'CKJIT_REMOTE_CACHE'}
        env['CKJIT_CACHE_DIR'] = cache_of(i)
        if url:
            env['CKJIT_REMOTE_CACHE'] = url
        r = subprocess.run([helper, '--init-first', arch, spec], env=env, capture_output=True,
                           text=True)
        if r.returncode != 0:
            sys.exit(f'fleet.py: {tag}: {spec}: exit {r.returncode}\n{r.stdout}{r.stderr}')
        call = parse_calls(r.stdout)[0]
        ms.append(float(call['ms']))
    return ms


def gpu_first_op(bench, tag, url, cache_of, runs):
    """bench_ckjit --child-first-call ctx in `runs` fresh processes: (sync ms,
    compiles) of each."""
    got = []
    for i in range(runs):
        env = {k: v for k, v in os.environ.items() if k != 'CKJIT_REMOTE_CACHE'}
        env['CKJIT_CACHE_DIR'] = cache_of(i)
        if url:
            env['CKJIT_REMOTE_CACHE'] = url
        r = subprocess.run([bench, '--child-first-call', 'ctx'], env=env, capture_output=True,
                           text=True)
        m = re.search(r'^FIRSTCALL (\S+) (\S+) (\S+) (\d+) (\d+) (\d+)', r.stdout, re.M)
        if r.returncode != 0 or not m:
            sys.exit(f'fleet.py: gpu {tag}: exit {r.returncode}\n{r.stdout}{r.stderr}')
        got.append((float(m.group(2)), int(m.group(5))))
    return got


def gpu_records(bench, work, runs):
    """The first real op in fresh processes on this host's GPU."""
    redis = Redis(work)
    try:
        cold = gpu_first_op(bench, 'cold', None, lambda i: os.path.join(work, f'gcold-{i}'), runs)
        gpu_first_op(bench, 'seed', redis.url, lambda i: os.path.join(work, 'gseed'), 1)
        remote = gpu_first_op(bench, 'remote', redis.url,
                              lambda i: os.path.join(work, f'gremote-{i}'), runs)
        disk = gpu_first_op(bench, 'disk', None, lambda i: os.path.join(work, 'gcold-0'), runs)
    finally:
        redis.stop()
    bad = [t for t, v in (('cold', cold), ('remote', remote), ('disk', disk))
           if any(c != (1 if t == 'cold' else 0) for _, c in v)]
    if bad:
        sys.exit(f'fleet.py: gpu first op: unexpected compile counts in {bad}')
    med = {n: statistics.median(ms for ms, _ in v) for n, v in
           (('cold', cold), ('remote', remote), ('disk', disk))}
    gpu = subprocess.run(['nvidia-smi', '--query-gpu=name', '--format=csv,noheader'],
                         capture_output=True, text=True).stdout.strip().split('\n')[0] or 'GPU'
    log(f'first op (copy2d f32 1x1024) on {gpu}, medians of {runs} fresh processes: cold '
        f'compile {med["cold"]:.2f} ms, remote hit {med["remote"]:.2f} ms, local disk '
        f'{med["disk"]:.2f} ms')
    what = ('ckjit_copy2d f32 1x1024 in a fresh process after the device is initialized '
            '(ckjit_malloc), until the stream is synchronized (bench_ckjit --child-first-call '
            f'ctx); median of {runs} processes; Redis on a Unix socket of the same host')
    return [
        {'metric': 'remote hit first call vs cold compile (copy2d f32 1x1024 op, gpu)',
         'kind': 'host_time', 'unit': 'ms', 'value': round(med['remote'], 3),
         'peer_value': round(med['cold'], 3), 'peer_name': 'cold compile (NVRTC)', 'card': gpu,
         'note': what + '; the remote hit fetches, verifies, copies the entry to the empty local '
                        'cache (not fsynced) and loads the module'},
        {'metric': 'remote hit first call vs local disk (copy2d f32 1x1024 op, gpu)',
         'kind': 'host_time', 'unit': 'ms', 'value': round(med['remote'], 3),
         'peer_value': round(med['disk'], 3), 'peer_name': 'local disk hit', 'card': gpu,
         'note': what}]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument('--build', default='build-redis')
    ap.add_argument('--procs', type=int, default=16)
    ap.add_argument('--threads', type=int, default=4)
    ap.add_argument('--specs', type=int, default=40)
    ap.add_argument('--arch', default='sm_90')
    ap.add_argument('--first-call', type=int, default=8, help='kernels timed in fresh processes')
    ap.add_argument('--out', help='also append the JSON lines to this file')
    ap.add_argument('--quick', action='store_true', help='4 processes x 2 threads x 8 specs')
    ap.add_argument('--gpu', action='store_true',
                    help="also the first real op on this host's GPU (bench_ckjit)")
    args = ap.parse_args()
    if args.quick:
        args.procs, args.threads, args.specs, args.first_call = 4, 2, 8, 4
    helper = os.path.join(args.build, 'tests', 'remote', 'remote_helper')
    cache_tool = os.path.join(args.build, 'tools', 'ckjit-cache')
    prewarm = os.path.join(args.build, 'tools', 'ckjit-prewarm')
    bench = os.path.join(args.build, 'bench', 'bench_ckjit')
    for exe in (helper, cache_tool, prewarm) + ((bench,) if args.gpu else ()):
        if not os.access(exe, os.X_OK):
            sys.exit(f'fleet.py: {exe} missing: build {args.build} first (with hiredis)')
    listing = subprocess.run([prewarm, '--all', '--list', '--arch', args.arch],
                             capture_output=True, text=True, check=True).stdout.split('\n')
    pool = [l.split()[1] for l in listing if l.split()[1:] and
            l.split()[1].split(':')[0] in ('elementwise', 'transpose')]
    specs = pool[:args.specs]
    if len(specs) < args.specs:
        sys.exit(f'fleet.py: only {len(specs)} elementwise/transpose default specs')
    work = tempfile.mkdtemp(prefix='ckjit-fleet-')
    records = []
    try:
        log(f'{args.procs} processes x {args.threads} threads x {len(specs)} specs for '
            f'{args.arch}, with and without Redis ({card()})')
        redis = Redis(work)
        try:
            wall_r, res_r = run_fleet(helper, cache_tool, work, 'with', redis.url, args.procs,
                                      args.threads, specs, args.arch)
            stored = redis.dbsize()
        finally:
            redis.stop()
        wall_n, res_n = run_fleet(helper, cache_tool, work, 'without', None, args.procs,
                                  args.threads, specs, args.arch)
        # The yardstick of "near one process's": one process alone, cold, no Redis.
        wall_1, _ = run_fleet(helper, cache_tool, work, 'alone', None, 1, args.threads, specs,
                              args.arch)

        def total(res, key):
            return int(sum(r['stats'].get(key, 0) for r in res))

        compiles_r, compiles_n = total(res_r, 'compiles'), total(res_n, 'compiles')
        bad = sum(max(r['verify_bad'], 0) for r in res_r + res_n)
        ok = sum(max(r['verify_ok'], 0) for r in res_r)
        failed = sum(1 for r in res_r + res_n if r['status'] != 0)
        secs_r = sorted(r['seconds'] for r in res_r)
        secs_n = sorted(r['seconds'] for r in res_n)
        log(f'with Redis: {compiles_r} compiles for {len(specs)} kernels, '
            f'{total(res_r, "remote_hits")} remote hits, {total(res_r, "remote_lease_waits")} '
            f'lease waits, {total(res_r, "remote_rejects")} rejects, '
            f'{total(res_r, "remote_errors")} errors, {stored} values in Redis; wall {wall_r:.1f} s; '
            f'per process {secs_r[0]:.1f}-{secs_r[-1]:.1f} s (median '
            f'{statistics.median(secs_r):.1f})')
        log(f'one process alone (cold, no Redis): {wall_1:.1f} s')
        log(f'without: {compiles_n} compiles; wall {wall_n:.1f} s; per process '
            f'{secs_n[0]:.1f}-{secs_n[-1]:.1f} s (median {statistics.median(secs_n):.1f})')
        log(f'ckjit-cache verify of the {2 * args.procs} local caches: {bad} bad entries, '
            f'{ok} good with Redis (expected {args.procs * len(specs)}); {failed} processes failed')
        c = card()
        shape = f'{args.procs} processes x {args.threads} threads x {len(specs)} specs ({args.arch})'
        details = {'processes': args.procs, 'threads': args.threads, 'kernels': len(specs),
                   'arch': args.arch, 'compiles_without_redis': compiles_n,
                   'remote_hits': total(res_r, 'remote_hits'),
                   'lease_waits': total(res_r, 'remote_lease_waits'),
                   'rejects': total(res_r, 'remote_rejects'),
                   'errors': total(res_r, 'remote_errors'),
                   'corrupt_entries': bad, 'failed_processes': failed,
                   'process_seconds_with_redis': [round(s, 2) for s in secs_r],
                   'process_seconds_without': [round(s, 2) for s in secs_n]}
        records.append({'metric': 'fleet compiles vs distinct kernels', 'kind': 'host_time',
                        'unit': 'count', 'value': compiles_r, 'peer_value': len(specs),
                        'peer_name': 'distinct kernels', 'card': c, 'details': details,
                        'note': f'{shape}, {args.procs} empty local caches, one empty Redis; without it '
                                f'{compiles_n} compiles; {bad} corrupt entries (ckjit-cache verify)'})
        records.append({'metric': 'fleet wall time with redis vs without', 'kind': 'host_time',
                        'unit': 's', 'value': round(wall_r, 3), 'peer_value': round(wall_n, 3),
                        'peer_name': 'no remote cache (each process compiles)', 'card': c,
                        'details': {'one_process_alone_s': round(wall_1, 3)},
                        'note': f'{shape}; one process alone (cold, no Redis) {wall_1:.1f} s; '
                                f'processes {secs_r[0]:.1f}-{secs_r[-1]:.1f} s with '
                                f'Redis, {secs_n[0]:.1f}-{secs_n[-1]:.1f} s without'})

        # First calls in fresh processes: cold compile, remote hit, local disk.
        k = specs[:args.first_call]
        redis = Redis(work)
        try:
            cold = first_call(helper, work, 'cold', None, k, args.arch,
                              lambda i: os.path.join(work, f'cold-{i}'))
            seed = first_call(helper, work, 'seed', redis.url, k, args.arch,
                              lambda i: os.path.join(work, f'seed-{i}'))
            remote = first_call(helper, work, 'remote', redis.url, k, args.arch,
                                lambda i: os.path.join(work, f'remote-{i}'))
            disk = first_call(helper, work, 'disk', None, k, args.arch,
                              lambda i: os.path.join(work, f'cold-{i}'))
        finally:
            redis.stop()
        med = {n: statistics.median(v) for n, v in
               (('cold', cold), ('seed', seed), ('remote', remote), ('disk', disk))}
        log(f'first call, medians of {len(k)} kernels in fresh processes: cold compile '
            f'{med["cold"]:.1f} ms, compile + store to Redis {med["seed"]:.1f} ms, remote hit '
            f'{med["remote"]:.2f} ms, local disk {med["disk"]:.2f} ms')
        records.append({'metric': 'remote hit first call vs cold compile', 'kind': 'host_time',
                        'unit': 'ms', 'value': round(med['remote'], 3),
                        'peer_value': round(med['cold'], 3), 'peer_name': 'cold compile (NVRTC)',
                        'card': c,
                        'note': f'ckjit_compile_spec, first call in a fresh process (library '
                                f'initialized before it), empty local cache; median of {len(k)} '
                                f'elementwise kernels for {args.arch}; the cold compile includes '
                                f'loading NVRTC; the remote hit includes connecting, and writing '
                                f'the entry to the local disk cache (not fsynced: a copy)'})
        records.append({'metric': 'remote hit first call vs local disk', 'kind': 'host_time',
                        'unit': 'ms', 'value': round(med['remote'], 3),
                        'peer_value': round(med['disk'], 3), 'peer_name': 'local disk hit',
                        'card': c,
                        'note': f'ckjit_compile_spec, first call in a fresh process (library '
                                f'initialized before it); Redis on a Unix socket of the same host; '
                                f'the remote hit connects, fetches, verifies and writes the entry '
                                f'to the local disk cache (not fsynced); median of {len(k)} kernels'})
        if args.gpu:
            records += gpu_records(bench, work, 3 if args.quick else 9)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [json.dumps(r) for r in records]
    for line in lines:
        print(line)
    if args.out:
        with open(args.out, 'a', encoding='utf-8') as f:
            for line in lines:
                f.write(line + '\n')


if __name__ == '__main__':
    main()
