"""What bench/peers.py and its sections (peers_rows.py, peers_gemm.py) share: the
JSONL output, notes, and torch's CUDA-event timing of bench_ckjit / bench_rows."""
import json
import statistics
import sys

def log(msg):
    print(f'peers.py: {msg}', file=sys.stderr, flush=True)


def emit(rec):
    print(json.dumps(rec), flush=True)


def note(section, text):
    log(f'note ({section}): {text}')
    emit({'metric': f'note {section}', 'unit': None, 'value': None, 'kind': 'note',
          'impl': section, 'note': text})


def median_min(values):
    return statistics.median(values), min(values)


def timing_plan(quick):
    """Warm-up calls and timed runs: bench_ckjit's and bench_rows' numbers."""
    return (2, 10) if quick else (5, 50)


def timed(fn, warmup, runs):
    """Median and min ms of `runs` calls of fn, each between two CUDA events
    on the current stream and synchronized (as bench_ckjit / bench_rows)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(runs):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
    return median_min(ms)


_TORCH_DEVICE_EMITTED = False


def emit_torch_device():
    global _TORCH_DEVICE_EMITTED
    import torch

    if _TORCH_DEVICE_EMITTED:
        return
    _TORCH_DEVICE_EMITTED = True
    emit({'metric': 'device', 'unit': None, 'value': None, 'kind': 'info', 'impl': 'torch',
          'name': torch.cuda.get_device_name(0),
          'capability': '%d.%d' % torch.cuda.get_device_capability(0),
          'torch_version': torch.__version__, 'torch_cuda': torch.version.cuda})


def rand_tensor(shape, dtype, gen):
    """Uniform in [-4, 4) with |x| >= 1/16: random and never zero (as the C
    benches)."""
    import torch

    x = torch.rand(*shape, device='cuda', generator=gen, dtype=torch.float32) * 8 - 4
    x = torch.where(x.abs() < 0.0625, x + torch.sign(x) * 0.5 + (x == 0) * 0.5, x)
    return x.to(dtype)
