#!/usr/bin/env python3
"""Merges bench_ckjit and peers.py JSONL output into bench/results.json and
bench/RESULTS.md.

usage: make_results.py --ckjit CKJIT.jsonl [--ckjit ...] --peers PEERS.jsonl [--peers ...]
                       [--results bench/results.json] [--md bench/RESULTS.md]
                       [--card NAME] [--command CMD] [--date DATE]

results.json is a list of {"metric", "card", "ckjit", "peer", "peer_name",
"unit", "ratio", "run"} ("run": the date and command of the run that
measured it; RESULTS.md lists the runs behind its records).  `ratio` says how many times better ckjit is: peer/ckjit for
times (us, ms), ckjit/peer for rates (GB/s); null without a peer.  Records of
an existing results.json whose metric is not re-measured are kept (merged by
metric name); RESULTS.md is rewritten from the merged list.

Row-wise ops (kind "rows": bench_rows and `peers.py --only rows`) give
"OP bf16 RxC vs torch" (GB/s; the same bytes on both sides, so the ratio is
torch time / ckjit time), "OP bf16 RxC vs copy" (ckjit GB/s / the same run's
torch.clone GB/s at that shape: the fraction of copy bandwidth) and
"topk_softmax bf16 TxE kK vs torch" (us; ratio torch / ckjit).  These records
may also carry "note" (why ckjit or torch has no number, or a failed result
check) and "bytes_formula"; a case whose op failed is written with "ckjit":
null and its note, replacing an older number.

GEMM (kind "gemm": bench_gemm and `peers.py --only gemm`) gives "gemm DTYPE
SHAPE VARIANT vs PEER" in TFLOP/s (ratio ckjit / peer = peer time / ckjit
time): SHAPE is m x n x k ("grouped8" for the grouped case, whose problems
are in "problems"), VARIANT rr/rc/cr/cc (a_order b_order), bias_gelu or
batchN; PEER "cublas" (torch.matmul / torch.bmm), "torch unfused" (matmul,
+ bias, gelu: bias_gelu), "torch loop" (a Python loop of torch.matmul:
grouped) or "cupy" (cupy.matmul).  A ckjit record whose result check is not
"ok" counts as no number; a ratio is refused (peer kept, ratio null, a note)
when the two sides' "flops" or "l2_flush" differ.

Attention (bench/attention_torch.py, which measures both sides in one
process and writes ckjit's "value" and the peer's "peer_value" in one record)
gives "attention bf16 CASE vs cudnn|flash" (TFLOP/s, ratio ckjit / peer; a
record whose check is not "ok" has no ckjit number; "details" keeps the ms of
each side and how torch ran the case; "target" / "target_met": issue 17's
>= 1.0x cuDNN, >= 1.8x flash, >= 700 TFLOP/s for d256 non-causal), "attention
launch host time ... vs ckjit_gemm ..." (us, ratio gemm / attention) and
"attention compile SPEC ARCH" (ms, no peer; a run with "attention compile all
default attention specs ARCH" retires the rows of specs it did not compile).

Paged attention (bench/paged_torch.py, kind "paged", both sides in one record
as attention's) gives "paged decode bf16 CASE vs copy|cudnn|dense" (GB/s of K/V
read; vs copy: ckjit's K/V bytes per second / the same run's copy bandwidth
counted as bytes read + written, the fraction of copy), "paged prefill bf16
CASE vs dense|cudnn|cudnn+gather" (TFLOP/s of the exact causal work, ratio =
peer time / ckjit time) and "paged append bf16 CASE vs copy" (GB/s read +
written, ratio = copy time / ckjit time); a record whose check is not "ok"
has no ckjit number; "details" keeps each side's ms, the byte or flop count
and how torch ran the case; a "vs copy" record keeps its bandwidth
"definition" (also in its note).

FP8 GEMM (bench/fp8_torch.py, kind "gemm_fp8", both sides in one record as
attention's) gives "gemm fp8 MxNxK tensor|rowwise vs scaled_mm" (TFLOP/s of
ckjit_gemm_fp8 against torch._scaled_mm on the same e4m3 inputs and scales,
ratio ckjit / peer = peer time / ckjit time), "gemm fp8 MxNxK blockwise"
(1x128 / 128x128 block scales; no peer, ratio null), "gemm fp8 MxNxK blockwise
vs scaled_mm rowwise" (the peer is torch's row-wise GEMM at that shape, the
issue's reference for block scaling) and, where torch takes block scales, "gemm
fp8 MxNxK blockwise vs scaled_mm blockwise".  A record whose check is not "ok"
has no ckjit number; "details" keeps each side's ms, the shape, scaling, torch
version and the peer's kernels; "target" / "target_met": >= 1.0x scaled_mm for
tensor and rowwise, blockwise >= 0.95x row-wise and >= 1400 TFLOP/s at
4096x7168x16384 (target_met is worked out here again from the record's
"target_ratio" / "target_tflops" and the numbers kept).

Fused MoE (bench/fused_moe_torch.py, kind "fused_moe", both sides in one record
as attention's) gives "fused_moe bf16 TN EN kN HN IN vs torch loop|dense gemm"
(TFLOP/s of ckjit_fused_moe, 2*T*k*H*2I + 2*T*k*I*H; the peers: a torch loop over
the experts, and two dense torch.matmul of the same flops; ratio = peer time / ckjit
time), "fused_moe fp8 [rowwise] TN ... vs bf16" (FP8 weights, block or row scales,
against ckjit_fused_moe with the bf16 weights: ratio = bf16 time / fp8 time) and
"fused_moe decode TN ... vs copy" (GB/s of the weights of the experts used, against
the same run's copy bandwidth counted as bytes read + written; its "definition" is
kept).  A record whose check is not "ok" has no ckjit number; "details" keeps each
side's ms and the case.  (ckjit_moe_sort's record is bench/moe_fp8_torch.py's
"moe_sort ... vs torch stable sort", kind "host_time".)

bf16 GEMM through ctypes (bench/gemm_torch.py, kind "gemm_ctypes", both sides in one
record as the FP8 GEMM's) gives "gemm bf16 MxNxK rr vs cublas (ctypes)" (TFLOP/s of
ckjit_gemm against torch.matmul on the same inputs and stream; target >= 1.0x, >= 1.05x at
4096^3 and 8192^3) and "gemm bf16 MxNxK rr cluster 2x1|1x2 vs 1x1 (ctypes)" (ckjit with
CKJIT_GEMM_CLUSTER set to that shape against 1x1, no target).

Host time measured on both sides in one process (kind "host_time":
bench/multi_gpu.py's "two gpu launch host time vs one gpu" and
bench/python_host_time.py's "python OP host time vs torch") carries
"value" (ckjit, us) and "peer_value"; ratio = peer / ckjit.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

from results_build import build, log
from results_md import write_md


def read_jsonl(path):
    recs = []
    if not path:
        return recs
    if not os.path.exists(path):
        log(f'{path}: missing, ignored')
        return recs
    with open(path, encoding='utf-8', errors='replace') as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line.startswith('{'):
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                log(f'{path}:{n}: not JSON ({e}), ignored')
                continue
            if isinstance(rec, dict) and 'metric' in rec:
                recs.append(rec)
    return recs


def card_name(recs, override):
    if override:
        return override
    for impl in ('torch', 'ckjit'):
        r = next((r for r in recs if r.get('kind') == 'info' and r.get('metric') == 'device'
                  and r.get('impl') == impl and r.get('name')), None)
        if r:
            return r['name']
    try:
        out = subprocess.run(['nvidia-smi', '--query-gpu=name', '--format=csv,noheader'],
                             capture_output=True, text=True, timeout=20)
        name = out.stdout.strip().splitlines()[0].strip() if out.returncode == 0 else ''
        if name:
            return name
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    return 'unknown GPU'


def merge(old, new):
    """The old records with the new ones in place.  A run that compiled every
    default spec for an arch ("cold compile all default specs ARCH") drops
    that arch's per-spec cold-compile rows it did not produce: specs that are
    no longer defaults must not linger beside the current ones.  Likewise
    "attention compile all default attention specs ARCH" for the "attention
    compile SPEC ARCH" rows."""
    new_metrics = {r.get('metric') for r in new}
    full = {prefix: {str(m).rsplit(' ', 1)[-1] for m in new_metrics
                     if str(m).startswith(total)}
            for prefix, total in (('cold compile ', 'cold compile all default specs '),
                                  ('attention compile ',
                                   'attention compile all default attention specs '))}

    def retired(r):
        m = str(r.get('metric', ''))
        return m not in new_metrics and any(m.startswith(prefix) and m.rsplit(' ', 1)[-1] in archs
                                            for prefix, archs in full.items())

    merged = [r for r in old if not retired(r)]
    index = {r.get('metric'): i for i, r in enumerate(merged)}
    for r in new:
        i = index.get(r['metric'])
        if i is None:
            index[r['metric']] = len(merged)
            merged.append(r)
        else:
            merged[i] = r
    return merged


def run_info(ck, peers):
    """(label, text) lines for RESULTS.md's header: the versions behind the run."""
    info = []
    dev = next((r for r in ck if r.get('kind') == 'info' and r.get('metric') == 'device'), None)
    if dev:
        drv = dev.get('cuda_driver_version')
        drv_s = f'{drv // 1000}.{drv % 1000 // 10}' if isinstance(drv, int) else '?'
        info.append(('ckjit', f"{dev.get('ckjit_version', '?')}, arch {dev.get('arch', '?')}, "
                              f"compiler {dev.get('compiler') or '?'}, CUDA driver API {drv_s}"))
    tdev = next((r for r in peers if r.get('kind') == 'info' and r.get('impl') == 'torch'), None)
    versions = []
    if tdev:
        versions.append(f"torch {tdev.get('torch_version')} (CUDA {tdev.get('torch_cuda')})")
    for impl in ('cupy', 'triton'):
        v = next((r for r in peers if r.get('kind') == 'info' and r.get('impl') == impl), None)
        if v:
            versions.append(f"{impl} {v.get('version')}")
    if versions:
        info.append(('Peers', ', '.join(versions)))
    # Each family's settings record: the peers' versions behind its numbers.
    settings = (
        ('attention settings', 'Attention peers', lambda r: (
            f"torch {r.get('torch_version')}, cuDNN {r.get('cudnn_version')} "
            "(torch.backends.cudnn.version()), FlashAttention-2 as built into torch")),
        ('paged settings', 'Paged attention peers', lambda r: (
            f"torch {r.get('torch_version')}, cuDNN {r.get('cudnn_version')} "
            "(torch.backends.cudnn.version())")),
        ('gemm_fp8 settings', 'FP8 GEMM peers', lambda r: (
            f"torch {r.get('torch_version')} (torch._scaled_mm)")),
        ('fused_moe settings', 'Fused MoE peers', lambda r: (
            f"torch {r.get('torch_version')} (torch.matmul: the torch loop over the experts "
            "and the dense GEMMs)")))
    for metric, label, text in settings:
        rec = next((r for r in ck + peers if r.get('kind') == 'info'
                    and r.get('metric') == metric), None)
        if rec:
            info.append((label, text(rec)))
    return info


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ckjit', action='append', default=[],
                    help='bench_ckjit / bench_rows / bench_gemm JSONL output (repeatable)')
    ap.add_argument('--peers', action='append', default=[],
                    help='peers.py JSONL output (repeatable)')
    ap.add_argument('--results', default=os.path.join(here, 'results.json'))
    ap.add_argument('--md', default=os.path.join(here, 'RESULTS.md'))
    ap.add_argument('--card', help='card name (default: from the JSONL, else nvidia-smi)')
    ap.add_argument('--command', default='bash scripts/gpu-check.sh',
                    help='the command that produced the numbers (for RESULTS.md)')
    ap.add_argument('--date', help='when the numbers were measured (default: now, UTC)')
    a = ap.parse_args()

    ck = [r for path in a.ckjit for r in read_jsonl(path)]
    peers = [r for path in a.peers for r in read_jsonl(path)]
    card = card_name(peers + ck, a.card)
    new = build(ck, peers, card)
    date = a.date or datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    for r in new:  # which run measured it, for RESULTS.md's list of runs
        r['run'] = f'{date} | {a.command}'

    old = []
    if os.path.exists(a.results):
        try:
            with open(a.results, encoding='utf-8') as f:
                old = json.load(f)
            if not isinstance(old, list):
                log(f'{a.results}: not a list, replaced')
                old = []
        except (OSError, json.JSONDecodeError) as e:
            log(f'{a.results}: unreadable ({e}), replaced')
            old = []
    merged = merge(old, new)
    with open(a.results + '.tmp', 'w', encoding='utf-8') as f:
        json.dump(merged, f, indent=2)
        f.write('\n')
    os.replace(a.results + '.tmp', a.results)

    notes = [f"{r.get('impl', '?')}: {r.get('note')}" for r in ck + peers
             if r.get('kind') == 'note']
    info = run_info(ck, peers)
    write_md(a.md, merged, card, date, notes, info)
    log(f'{len(new)} records from this run, {len(merged)} in {a.results}; wrote {a.md}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
