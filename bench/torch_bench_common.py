"""What bench/attention_torch.py and bench/paged_torch.py share: both drive libckjit
through ctypes over torch tensors, one child process per run of cases, and write JSONL
records for bench/make_results.py.

Here: the ctypes mirrors both use (ckjit_attention_strides, ckjit_attention_desc) and
their check against the C headers; the JSONL/stderr reporting; the child's torch
context (library bindings, event timing with an L2 flush, first-call timing, peers
that may refuse a case); the parent's library search (find_library), device check
(cuda_device) and watchdog that runs the cases in children; the command line both
take.  Each script keeps its cases, records and peers.

The scripts are run as `python3 bench/X.py`; they put their own folder on sys.path
before importing this module (bench/ is not a package).
"""
import argparse
import ctypes
import importlib.util
import json
import math
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BF16, MASK_NONE, MASK_CAUSAL = 2, 0, 1  # ckjit_dtype / ckjit_attention_mask values
ATOL, RTOL = 2e-2, 1e-2  # a bf16 output element agrees when |diff| <= ATOL + RTOL |ref|
UNSTEADY = 1.25   # median > UNSTEADY * min: the series is measured once more
CASE_LIMIT = 150  # seconds a case may run in the child (its first call may compile)
SPIN_CYCLES = 1 << 20  # GPU cycles (~0.5 ms) of torch.cuda._sleep before each start event
torch = F = None  # imported by the child only (import_torch): the parent runs without it

# ---- ctypes mirrors of include/ckjit/ckjit.h -------------------------------------------
I64, INT, FLT, PTR = ctypes.c_int64, ctypes.c_int, ctypes.c_float, ctypes.c_void_p


class Strides(ctypes.Structure):  # ckjit_attention_strides
    _fields_ = [('batch', I64), ('head', I64), ('seq', I64), ('dim', I64)]


class AttentionDesc(ctypes.Structure):  # ckjit_attention_desc (enums are int)
    _fields_ = [('dtype', INT), ('batch', I64), ('num_heads_q', I64), ('num_heads_kv', I64),
                ('seqlen_q', I64), ('seqlen_k', I64), ('head_dim_qk', I64), ('head_dim_v', I64),
                ('q', PTR), ('q_strides', Strides), ('k', PTR), ('k_strides', Strides),
                ('v', PTR), ('v_strides', Strides), ('o', PTR), ('o_strides', Strides),
                ('lse', PTR), ('lse_strides', Strides), ('cu_seqlens_q', PTR),
                ('cu_seqlens_k', PTR), ('softmax_scale', FLT), ('mask', INT),
                ('window_left', I64), ('window_right', I64), ('bias', PTR), ('bias_dtype', INT),
                ('bias_strides', Strides), ('alibi_slopes', PTR), ('alibi_stride_batch', I64),
                ('softcap', FLT)]


# Offsets by hand, LP64 (int/enum/float 4 bytes, int64/pointer 8, aligned to size;
# strides 32, aligned 8): attention_strides: batch 0 .. dim 24: sizeof 32.  attention:
# dtype 0 (+4), batch..head_dim_v 8..56, q 64, q_strides 72, k 104, 112, v 144, 152, o 184,
# 192, lse 224, 232, cu_seqlens_q/k 264/272, softmax_scale 280, mask 284, window_left/right
# 288/296, bias 304, bias_dtype 312 (+4), bias_strides 320, alibi_slopes 352,
# alibi_stride_batch 360, softcap 368 (+4): sizeof 376.  Each script's STRUCTS table
# carries these (sizeof, offset of the last field) for layout_check().
STRIDES_LAYOUT = (Strides, 32, 24)
ATTENTION_DESC_LAYOUT = (AttentionDesc, 376, 368)


class GemmDesc(ctypes.Structure):  # ckjit_gemm_desc (include/ckjit/gemm.h; enums are int)
    _fields_ = [('m', I64), ('n', I64), ('k', I64), ('ab_dtype', INT), ('out_dtype', INT),
                ('a', PTR), ('lda', I64), ('a_order', INT), ('b', PTR), ('ldb', I64),
                ('b_order', INT), ('d', PTR), ('ldd', I64), ('c', PTR), ('ldc', I64),
                ('alpha', FLT), ('beta', FLT), ('bias', PTR), ('bias_mode', INT),
                ('activation', INT), ('d0', PTR), ('ldd0', I64), ('d1', PTR), ('ldd1', I64),
                ('batch', I64), ('stride_a', I64), ('stride_b', I64), ('stride_c', I64),
                ('stride_d', I64), ('stride_d0', I64), ('stride_d1', I64), ('split_k', INT),
                ('allow_tf32', INT)]


# By hand: m n k 0 8 16, dtypes 24 28, a 32, lda 40, a_order 48 (+4), b 56, ldb 64, b_order
# 72 (+4), d 80, ldd 88, c 96, ldc 104, alpha/beta 112/116, bias 120, bias_mode 128,
# activation 132, d0 136, ldd0 144, d1 152, ldd1 160, batch 168, stride_a..d1 176..216,
# split_k 224, allow_tf32 228: sizeof 232 (layout_check compares it with the C compiler's).
GEMM_DESC_LAYOUT = (GemmDesc, 232, 228)


def layout_check(structs, headers, tag, hand_message_names_last=True):
    """(mismatches, how checked) of structs {C name: (ctypes struct, sizeof, offset of the
    last field)}: against those hand numbers and against offsetof()/sizeof of a C program
    that includes headers (paths below include/; the last one must exist for the C
    check).  hand_message_names_last: a hand-number mismatch also says both offsets of
    the last field (attention_torch.py's message has only said the sizes)."""
    bad, ours = [], {}
    src = ['#include <stdio.h>', '#include <stddef.h>'] + [
        f'#include "{h}"' for h in headers] + ['int main(void) {']
    for cname, (st, size, last) in structs.items():
        ours[cname] = dict({f[0]: getattr(st, f[0]).offset for f in st._fields_},
                           sizeof=ctypes.sizeof(st))
        last_at = getattr(st, st._fields_[-1][0]).offset
        if (ctypes.sizeof(st), last_at) != (size, last):
            bad.append(f'{cname}: ctypes sizeof {ctypes.sizeof(st)}, ' + (
                f'last field at {last_at}; by hand {size}, {last}' if hand_message_names_last
                else f'by hand {size}'))
        src += [f'printf("{cname} {k} %zu\\n", ' + (
            f'sizeof({cname}));' if k == 'sizeof' else f'offsetof({cname}, {k}));')
            for k in ours[cname]]
    names = [os.path.basename(h) for h in headers]
    cc = shutil.which(os.environ.get('CC', 'cc')) or shutil.which('gcc')
    if not cc or not os.path.exists(os.path.join(ROOT, 'include', headers[-1])):
        return bad, f'sizeof by hand only (no C compiler or no {names[-1]} here)'
    with tempfile.TemporaryDirectory(prefix=f'ckjit-{tag}-layout-') as d:
        with open(os.path.join(d, 'l.c'), 'w') as f:
            f.write('\n'.join(src) + '\nreturn 0; }\n')
        p = subprocess.run([cc, '-std=c11', '-I', os.path.join(ROOT, 'include'),
                            os.path.join(d, 'l.c'), '-o', os.path.join(d, 'l')],
                           capture_output=True, text=True)
        if p.returncode:  # e.g. a field the header no longer has
            return bad + [f'the C layout program failed: {p.stderr.strip()[-400:]}'], cc
        out = subprocess.run([os.path.join(d, 'l')], capture_output=True, text=True).stdout
    c_val = {tuple(ln.split()[:2]): int(ln.split()[2]) for ln in out.splitlines()}
    bad += [f'{cname}.{k}: ctypes {v}, C {c_val.get((cname, k))}' for cname in ours
            for k, v in ours[cname].items() if c_val.get((cname, k)) != v]
    return bad, (f'ctypes == offsetof()/sizeof from {cc} on {" and ".join(names)} '
                 '(and sizeof by hand)')


# ---- records -----------------------------------------------------------------------------
def load_structs():
    """python/ckjit/_structs.py: the ctypes mirrors of the public structs that the CPU
    suite checks against the headers (loaded by path: importing the ckjit package
    would load a libckjit of its own choosing)."""
    spec = importlib.util.spec_from_file_location(
        'ckjit_structs', os.path.join(ROOT, 'python', 'ckjit', '_structs.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Reporter:
    """JSONL records on stdout (what make_results.py reads), progress on stderr prefixed by
    the script's name; tag names the script's info and note records ('attention', ...)."""

    def __init__(self, script, tag):
        self.script, self.tag = script, tag

    def log(self, msg):
        print(f'{self.script}: {msg}', file=sys.stderr, flush=True)

    @staticmethod
    def emit(rec):
        print(json.dumps(rec), flush=True)

    def note(self, text):
        self.log(f'note: {text}')
        self.emit({'metric': f'note {self.tag}', 'unit': None, 'value': None, 'kind': 'note',
                   'impl': self.tag, 'note': text})


class FileReporter(Reporter):
    """Reporter whose records also go to a --json file: the parent names it to its
    children in the environment variable `env`; each process appends its own lines,
    none twice."""

    def __init__(self, script, tag, env):
        super().__init__(script, tag)
        self.env = env

    def emit(self, rec):
        super().emit(rec)
        path = os.environ.get(self.env)
        if path:
            with open(path, 'a', encoding='utf-8') as f:
                f.write(json.dumps(rec) + '\n')


def jnum(x):  # JSON has no NaN
    return x if math.isfinite(x) else repr(x)


def exit_status(statuses):
    """0 when every case was measured or CKJIT_ERROR_UNSUPPORTED, 2 when a check failed,
    else 1 (the records' status fields)."""
    return 2 if 'CHECK_FAILED' in statuses else int(
        any(s and s != 'CKJIT_ERROR_UNSUPPORTED' for s in statuses))


# ---- the child: torch and ckjit in one process ------------------------------------------
class CkjitFailed(Exception):
    """args: (ckjit status name, ckjit_last_error())."""


def import_torch():
    """torch and torch.nn.functional, imported here for this module too; only the child
    imports torch (its absence is then the child's '#fatal' line, not a parent crash)."""
    global torch, F
    import torch
    import torch.nn.functional as F
    return torch, F


def import_cuda_torch():
    """import_torch() in a child that needs a CUDA device (RuntimeError without one),
    with TF32 off for torch's f32 matmuls (the float32 references stay float32)."""
    import_torch()
    if not torch.cuda.is_available():
        raise RuntimeError('no CUDA device')
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch, F


def bind_library(path, ops):
    """libckjit at path, each (op, desc struct) of ops bound as op(desc *, stream) -> status
    and op_desc_init(desc *), and the status / last-error strings."""
    lib = ctypes.CDLL(path)
    for op, st in ops:
        getattr(lib, op).argtypes, getattr(lib, op).restype = [ctypes.POINTER(st), PTR], INT
        getattr(lib, op + '_desc_init').argtypes = [ctypes.POINTER(st)]
        getattr(lib, op + '_desc_init').restype = None
    lib.ckjit_status_string.argtypes = [INT]
    lib.ckjit_status_string.restype = lib.ckjit_last_error.restype = ctypes.c_char_p
    return lib


def status_error(lib, st):
    """CkjitFailed's args for status st of a call into lib."""
    return (lib.ckjit_status_string(st).decode(),
            (lib.ckjit_last_error() or b'').decode(errors='replace').strip())


class BenchContext:
    """The library, torch's current stream, the inputs' generator and the timing settings
    (from the command line a) that a child's cases share.  A subclass imports torch
    (import_torch) before calling this, and sets self.spin to torch.cuda._sleep to have
    the GPU wait SPIN_CYCLES before each timed start event."""
    spin = None

    def __init__(self, a, ops):
        self.lib = bind_library(a.lib, ops)
        self.stream = PTR(torch.cuda.current_stream().cuda_stream)
        self.quick, self.lse, self.gen = a.quick, not a.no_lse, torch.Generator(device='cuda')
        self.warmup, self.runs = (3, 20) if a.quick else (10, 50)
        # A cold L2 before each timed run: writes over twice its size (at least 256 MiB).
        self.flush_bytes = 0 if a.no_flush_l2 else max(2 * (getattr(
            torch.cuda.get_device_properties(0), 'L2_cache_size', 0) or 0), 256 << 20)
        self.flush = self.flush_bytes and torch.empty(self.flush_bytes // 4, dtype=torch.int32,
                                                      device='cuda')

    def call(self, fn, desc):
        """A no-argument callable of fn(&desc, stream) that raises CkjitFailed on a status.
        The library is the one set now (bench/compare_attention.py swaps ctx.lib)."""
        ref, stream, lib = ctypes.byref(desc), self.stream, self.lib

        def run():
            st = fn(ref, stream)
            if st:
                raise CkjitFailed(*status_error(lib, st))
        return run

    def time_sides(self, sides):
        """name -> (median ms per call, min ms) of rounds alternating over sides (the
        order rotating each round).  Without the L2 flush: two CUDA events around a loop of
        `calls` calls, one sample per loop.  With it: each call of the loop between its
        own two events after the flush buffer is overwritten (outside the events, so the
        flush is not timed), one sample per call.  A GPU sleep opens each loop, so the
        host enqueues ahead of the GPU and launch overhead is not timed.  Needs
        self.rounds and self.calls (the subclass sets them)."""
        for _ in range(self.warmup // 2 + 1):
            for fn in sides.values():
                fn()
        torch.cuda.synchronize()
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2 * self.calls)]
        names, per = list(sides), {n: [] for n in sides}
        for r in range(self.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                fn = sides[name]
                if self.spin:
                    self.spin(SPIN_CYCLES)
                if self.flush_bytes:
                    for i in range(self.calls):
                        self.flush.fill_(r * self.calls + i)
                        ev[2 * i].record()
                        fn()
                        ev[2 * i + 1].record()
                    ev[-1].synchronize()
                    per[name] += [ev[2 * i].elapsed_time(ev[2 * i + 1]) for i in range(self.calls)]
                else:
                    ev[0].record()
                    for _ in range(self.calls):
                        fn()
                    ev[1].record()
                    ev[1].synchronize()
                    per[name].append(ev[0].elapsed_time(ev[1]) / self.calls)
        return {n: (statistics.median(v), min(v)) for n, v in per.items()}

    def measure(self, fns, group=1):
        """Event-timed groups of `group` calls, alternating over fns: name -> (median ms
        per call, min, remeasured)."""
        for fn in list(fns.values()) * self.warmup:  # alternating too
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def series():
            ms = {k: [] for k in fns}
            for i in range(self.runs):
                for k, fn in fns.items():
                    if self.flush_bytes:
                        self.flush.fill_(i)
                    if self.spin:
                        self.spin(SPIN_CYCLES)
                    s.record()
                    for _ in range(group):
                        fn()
                    e.record()
                    e.synchronize()
                    ms[k].append(s.elapsed_time(e) / group)
            return {k: (statistics.median(v), min(v)) for k, v in ms.items()}
        first = series()
        if all(med <= UNSTEADY * mn for med, mn in first.values()):
            return {k: v + (False,) for k, v in first.items()}
        again = series()  # as bench_gemm: once more, the lower median kept
        return {k: (again[k] if again[k][0] < first[k][0] else first[k]) + (True,) for k in fns}


def with_env(name, value, call):
    """call with the environment variable name set to value (ckjit reads it per call)."""
    def run():
        old = os.environ.get(name)
        os.environ[name] = value
        try:
            call()
        finally:
            if old is None:
                del os.environ[name]
            else:
                os.environ[name] = old
    return run


def first_call_ms(ck):
    """ms of the first call (it may compile or load), synchronized."""
    t0 = time.perf_counter()
    ck()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def compare(got, ref):
    """(max |got - ref|, elements outside ATOL + RTOL |ref|; NaN counts)."""
    g, r = got.float(), ref.float()
    diff = (g - r).abs()
    return float(diff.max()) if diff.numel() else 0.0, int((~(diff <= ATOL + RTOL * r.abs())).sum())


def capture(fn):
    """(fn()'s output, None) synchronized, or (None, why torch refused it)."""
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter('always')
        try:
            out = fn()
            torch.cuda.synchronize()
            return out, None
        except Exception as e:  # a backend that refuses the case: a note, not a failure
            why = [f'{type(e).__name__}: {e}'] + [str(w.message) for w in ws][:4]
            return None, ' | '.join((x.strip().splitlines() or [''])[0] for x in why)[:600]


def run_child(a, indices, make_ctx, cases, run_one, fail_records, report):
    """The child: cases[i] for i in indices through run_one(ctx, case), each between
    '#start i' and '#done i' lines for the parent's watchdog; its exit status."""
    try:
        ctx = make_ctx(a)
    except Exception as e:  # no torch, no GPU, no library
        return print(f'#fatal {type(e).__name__}: {e}'.replace('\n', ' ')[:600]) or 2
    report.emit({'metric': f'{report.tag} settings', 'kind': 'info', 'impl': report.tag,
                 'value': None, 'device': torch.cuda.get_device_name(0),
                 'torch_version': torch.__version__,
                 'cudnn_version': torch.backends.cudnn.version(), 'lib': a.lib})
    for i in indices:
        print(f'#start {i}', flush=True)
        try:
            run_one(ctx, cases[i])
        except Exception as e:  # out of memory, a CUDA error
            fail_records(cases[i], 'ERROR', f'{type(e).__name__}: {e}')
        print(f'#done {i}', flush=True)
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:  # a kernel fault lost the context: a new child takes the next cases
            return 3
    return 0


# ---- the parent: the library, the device, children -------------------------------------------
def find_library(given):
    """(path, how): --lib, CKJIT_LIBRARY (file or directory), build-gpu/libckjit.so, or
    what python/ckjit's loader finds; (None, why) when none is there."""
    env = os.environ.get('CKJIT_LIBRARY')
    if given:
        return os.path.abspath(given), '--lib'
    if env:  # as python/ckjit/_lib.py: a directory holds libckjit.so
        path = os.path.join(env, 'libckjit.so') if os.path.isdir(env) else env
        return os.path.abspath(path), 'CKJIT_LIBRARY'
    built = os.path.join(ROOT, 'build-gpu', 'libckjit.so')
    if os.path.exists(built):
        return built, 'build-gpu/libckjit.so'
    try:
        sys.path.insert(0, os.path.join(ROOT, 'python'))
        import ckjit  # its loader: next to the package, the dynamic loader, installed
        return ckjit.library_path, 'the python package (python/ckjit)'
    except Exception as e:  # noqa: BLE001 (LibraryNotFoundError and friends)
        return None, f'no --lib, no CKJIT_LIBRARY, no {built}; python/ckjit: ' + ' '.join(
            str(e).split())[:400]


def cuda_device():
    """None when a CUDA device is usable through torch, else why not (the parent imports
    torch only here, locally: its children import it for their cases)."""
    if importlib.util.find_spec('torch') is None:
        return 'torch is not installed'
    import torch as t
    return None if t.cuda.is_available() else 'torch.cuda.is_available() is False'


def run_children(a, script, cases, pending, deadline, fail_records, report):
    """cases[i] for i in pending, in child processes of script (`--child i,j,...`), a new one
    after a crash or hang; the children's records forwarded; the records' statuses."""
    args = [sys.executable, os.path.abspath(script), '--lib', a.lib] + [
        f for f, on in (('--quick', a.quick), ('--no-flush-l2', a.no_flush_l2),
                        ('--no-lse', a.no_lse)) if on]
    statuses = []
    while pending:
        if deadline - time.time() < 10:
            for i in pending:
                fail_records(cases[i], 'SKIPPED', 'not started: --budget spent')
            return statuses + ['SKIPPED']
        p = subprocess.Popen(args + ['--child', ','.join(map(str, pending))],
                             stdout=subprocess.PIPE, start_new_session=True)
        buf, current, done, fatal, killed, t_case = b'', None, set(), None, False, time.time()
        while True:
            left = max(min(deadline, t_case + CASE_LIMIT) - time.time(), 0)
            killed = not select.select([p.stdout], [], [], left)[0]
            chunk = b'' if killed else os.read(p.stdout.fileno(), 1 << 16)
            if not chunk:
                if killed:
                    os.killpg(p.pid, signal.SIGKILL)
                break
            *lines, buf = (buf + chunk).split(b'\n')
            for line in (x.decode(errors='replace') for x in lines):
                if line.startswith('#start '):
                    current, t_case = int(line[7:]), time.time()
                elif line.startswith('#done '):
                    current = done.add(int(line[6:]))  # None
                elif line.startswith('#fatal '):
                    fatal = line[7:]
                elif line.startswith('{'):
                    try:
                        statuses.append(json.loads(line).get('status'))
                    except ValueError:
                        report.log(f'a child line that is not JSON: {line[:200]}')
                        continue
                    print(line, flush=True)
        rc = p.wait()
        if current is not None:
            statuses.append('CHILD_TIMEOUT' if killed else 'CHILD_DIED')
            fail_records(cases[current], statuses[-1],
                         f'no output for {CASE_LIMIT} s or --budget spent' if killed else
                         f'the child process died (exit {rc}; its stderr is in the log)')
            done.add(current)
        if not done:  # it ended before its first case: do not start it again
            why = fatal or ('no output' if killed else f'exit {rc}')
            report.note(f'the benchmark child could not start: {why}')
            for i in pending:
                fail_records(cases[i], 'CHILD_FAILED', why)
            return statuses + ['CHILD_FAILED']
        pending = [i for i in pending if i not in done]
    return statuses


def parse_args(description, only_examples, add_after_lib=None):
    """The command line both scripts take; only_examples: the --only help's examples;
    add_after_lib(parser): a script's own options, listed after --lib."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument('--lib', default=os.path.join(ROOT, 'build-gpu', 'libckjit.so'))
    if add_after_lib:
        add_after_lib(ap)
    ap.add_argument('--quick', action='store_true', help='fewer warm-up and timed runs')
    ap.add_argument('--only', action='append', metavar='SUBSTRING', help='only the cases whose '
                    f'metric contains this (repeatable: {only_examples})')
    ap.add_argument('--budget', type=float, help='seconds; cases not started by then: SKIPPED')
    for flag, what in (('--no-flush-l2', 'no L2 flush before each run'), ('--no-lse',
                       'ckjit writes no LSE'), ('--check-layout', 'only check the ctypes structs')):
        ap.add_argument(flag, action='store_true', help=what)
    ap.add_argument('--child', help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.lib = os.path.abspath(a.lib)  # the children run with the same library
    return a


def parse_library_args(doc, only_examples, header, argv=None):
    """The command line of the scripts that find the library themselves (find_library)
    and may write --json: doc, the script's docstring (its first paragraph describes
    it); only_examples: the --only help's examples; header: what --check-layout checks."""
    ap = argparse.ArgumentParser(description=' '.join(doc.split('\n\n')[0].split()))
    ap.add_argument('--lib', help='libckjit.so (default: CKJIT_LIBRARY, build-gpu/libckjit.so, '
                    'the python package\'s loader)')
    ap.add_argument('--json', metavar='FILE', help='also write the records here (JSON lines)')
    ap.add_argument('--quick', action='store_true', help='fewer rounds and calls')
    ap.add_argument('--only', action='append', metavar='SUBSTRING', help='only the cases one '
                    f'of whose metrics contains this (repeatable: {only_examples})')
    ap.add_argument('--budget', type=float, help='seconds; cases not started by then: SKIPPED')
    ap.add_argument('--no-flush-l2', action='store_true', help='no L2 flush between calls')
    ap.add_argument('--check-layout', action='store_true',
                    help=f'only check the ctypes struct against {header} (no GPU needed)')
    ap.add_argument('--child', help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.no_lse = False  # the child runner and context read it
    return a


def layout_gate(a, checked, mirror_of, report):
    """The struct check before anything runs: an exit status to return now (a mismatch: 1,
    --check-layout: 0), or None to go on.  checked: layout_check()'s answer; mirror_of:
    what the ctypes mirror copies, for the mismatch note."""
    bad, how = checked
    if bad:
        return report.note(f'the ctypes mirror differs from {mirror_of}, nothing run: ' +
                           '; '.join(bad)) or 1
    if a.check_layout:
        return print(f'layout ok: {how}') or 0
    report.log(f'struct layout: {how}')
    return None


def run_parent(a, script, cases, json_env, fail_records, report, before=None):
    """The parent of a script whose cases need a CUDA device through torch and the
    library (--lib, find_library): the records also into --json (json_env tells the
    children the file), the cases --only selects (by any of case.metrics) run in
    children; before(): the script's own last step before they start."""
    log, note = report.log, report.note
    why = cuda_device()
    if why:
        log(f'no CUDA device ({why}): nothing run')
        return 1
    a.lib, how = find_library(a.lib)
    if not a.lib or not os.path.exists(a.lib):
        log(f'no libckjit: {how if not a.lib else a.lib + " (" + how + ") does not exist"}')
        return 1
    log(f'library: {a.lib} ({how})')
    if before:
        before()
    if a.json:  # the children append to it too (FileReporter)
        open(a.json, 'w').close()
        os.environ[json_env] = os.path.abspath(a.json)
    pending = [i for i, c in enumerate(cases)
               if not a.only or any(s in m for s in a.only for m in c.metrics)]
    if not pending:
        note(f'no case matches --only {a.only}')
        return 1
    t0 = time.time()
    statuses = run_children(a, script, cases, pending, t0 + a.budget if a.budget else math.inf,
                            fail_records, report)
    log(f'done in {time.time() - t0:.1f} s')
    return exit_status(statuses)
