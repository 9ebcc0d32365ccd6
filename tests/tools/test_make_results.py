#!/usr/bin/env python3
"""bench/make_results.py on made-up benchmark output (no GPU): records of a
run are tagged with its date and command, a later run replaces only the
metrics it measured, RESULTS.md lists the runs behind its records, and a
run that compiled every default spec retires the cold-compile rows it no
longer produces; the attention records (bench/attention_torch.py) with their
ratios, targets, failed checks and the Attention section of RESULTS.md.

usage: test_make_results.py PATH/TO/make_results.py
"""
import json
import os
import subprocess
import sys
import tempfile

FAILS = []


def check(cond, what):
    print(('ok   ' if cond else 'FAIL ') + what)
    if not cond:
        FAILS.append(what)


def jsonl(path, recs):
    with open(path, 'w', encoding='utf-8') as f:
        for r in recs:
            f.write(json.dumps(r) + '\n')


def bandwidth(impl, op, value, api=None):
    r = {'metric': f'{op} bf16 8192x8192', 'kind': 'bandwidth', 'impl': impl, 'op': op,
         'dtype': 'bf16', 'shape': '8192x8192', 'unit': 'GB/s', 'value': value}
    if api:
        r['api'] = api
    return r


def cold(spec, ms):
    return {'kind': 'cold_compile', 'impl': 'ckjit', 'metric': f'cold compile {spec} sm_90',
            'unit': 'ms', 'value': ms}


def run(tool, d, ck, peers, command, date):
    ckp, pp = os.path.join(d, 'ck.jsonl'), os.path.join(d, 'peers.jsonl')
    jsonl(ckp, ck)
    jsonl(pp, peers)
    r = subprocess.run([sys.executable, tool, '--ckjit', ckp, '--peers', pp,
                        '--results', os.path.join(d, 'results.json'),
                        '--md', os.path.join(d, 'RESULTS.md'), '--card', 'Test Card',
                        '--command', command, '--date', date],
                       capture_output=True, text=True)
    check(r.returncode == 0, f'make_results exits 0 ({command}): {r.stderr.strip()[-300:]}')
    with open(os.path.join(d, 'results.json'), encoding='utf-8') as f:
        res = {x['metric']: x for x in json.load(f)}
    with open(os.path.join(d, 'RESULTS.md'), encoding='utf-8') as f:
        md = f.read()
    return res, md


def main():
    tool = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        # Run 1: copy and relu against torch, two cold compiles and the total.
        peers = [bandwidth('torch', 'copy', 2500.0, 'torch.clone'),
                 bandwidth('torch', 'relu', 2400.0, 'torch.relu')]
        ck1 = [bandwidth('ckjit', 'copy', 2600.0), bandwidth('ckjit', 'relu', 2550.0),
               cold('a:x=1', 10.0), cold('b:x=2', 20.0),
               {'kind': 'cold_compile_total', 'impl': 'ckjit',
                'metric': 'cold compile all default specs sm_90', 'unit': 'ms', 'value': 30.0}]
        res, md = run(tool, d, ck1, peers, 'first command', '2026-01-01 10:00 UTC')
        check(set(res) >= {'copy bf16 8192x8192 vs torch', 'relu bf16 8192x8192 vs torch',
                           'relu bf16 8192x8192 vs copy', 'cold compile a:x=1 sm_90'},
              'run 1 records present')
        check(all(r.get('run') == '2026-01-01 10:00 UTC | first command' for r in res.values()),
              'every record of run 1 names run 1')
        rel = res['relu bf16 8192x8192 vs torch']
        check(abs(rel['ratio'] - 2550.0 / 2400.0) < 1e-3, 'rate ratio = ckjit / peer')
        check('- 2026-01-01 10:00 UTC: `first command`:' in md, 'RESULTS.md lists run 1')

        # Run 2 measures only relu (and no cold compiles): copy keeps run 1's
        # number and tag; relu gets run 2's.
        ck2 = [bandwidth('ckjit', 'relu', 2700.0)]
        res, md = run(tool, d, ck2, peers, 'second command', '2026-01-02 11:00 UTC')
        check(res['relu bf16 8192x8192 vs torch']['ckjit'] == 2700.0, 'run 2 replaces relu')
        check(res['relu bf16 8192x8192 vs torch']['run'].endswith('| second command'),
              'relu names run 2')
        check(res['copy bf16 8192x8192 vs torch']['ckjit'] == 2600.0 and
              res['copy bf16 8192x8192 vs torch']['run'].endswith('| first command'),
              'copy keeps run 1 (number and tag)')
        i1, i2 = md.find('`first command`'), md.find('`second command`')
        check(0 <= i2 < i1, 'RESULTS.md lists both runs, newest first')
        check('cold compile a:x=1 sm_90' in res, 'a partial run keeps cold-compile rows')

        # Run 3 compiles every default spec again, and b is no longer one.
        ck3 = [cold('a:x=1', 11.0),
               {'kind': 'cold_compile_total', 'impl': 'ckjit',
                'metric': 'cold compile all default specs sm_90', 'unit': 'ms', 'value': 11.0}]
        res, md = run(tool, d, ck3, peers, 'third command', '2026-01-03 12:00 UTC')
        check('cold compile b:x=2 sm_90' not in res, 'a full cold run retires specs it did not compile')
        check(res['cold compile a:x=1 sm_90']['ckjit'] == 11.0, 'and replaces the others')

        # A run stopped by its time budget neither claims "all" nor retires rows.
        ck_partial = [cold('a:x=1', 12.0),
                      {'kind': 'cold_compile_total', 'impl': 'ckjit', 'complete': False, 'specs': 1,
                       'metric': 'cold compile all default specs sm_90', 'unit': 'ms', 'value': 12.0}]
        res, md = run(tool, d, ck3 + [cold('c:x=3', 5.0)], peers, 'third command b',
                      '2026-01-03 12:30 UTC')
        res, md = run(tool, d, ck_partial, peers, 'partial command', '2026-01-03 13:00 UTC')
        check('cold compile c:x=3 sm_90' in res, 'a partial cold run retires nothing')
        check('cold compile of the first 1 default specs (time budget) sm_90' in res and
              res['cold compile all default specs sm_90']['ckjit'] == 11.0,
              'a partial total is named so and leaves the full total alone')

        # Records from before runs were kept (no "run") are listed as such.
        path = os.path.join(d, 'results.json')
        with open(path, encoding='utf-8') as f:
            recs = json.load(f)
        recs.append({'metric': 'legacy metric', 'card': 'Test Card', 'ckjit': 1.0, 'peer': None,
                     'peer_name': None, 'unit': 'us', 'ratio': None})
        with open(path, 'w', encoding='utf-8') as f:
            json.dump(recs, f)
        res, md = run(tool, d, ck2, peers, 'fourth command', '2026-01-04 13:00 UTC')
        check('legacy metric' in res and 'run' not in res['legacy metric'], 'untagged record kept')
        check('earlier runs (before the run of each record was kept)' in md,
              'RESULTS.md names the untagged records')
        check('`second command`' not in md, 'a run with no records left is not listed')

        # GEMM launch host time: paired with torch's record of the same shape only.
        def gemm_launch(impl, shape, us):
            return {'metric': f'launch host time gemm bf16 {shape} ({impl})', 'unit': 'us',
                    'value': us, 'kind': 'launch_gemm', 'impl': impl, 'op': 'gemm',
                    'dtype': 'bf16', 'shape': shape}
        res, md = run(tool, d, [gemm_launch('ckjit', '128x128x128', 3.0),
                                gemm_launch('ckjit', '16x128x128', 2.5)],
                      [gemm_launch('torch', '16x128x128', 7.5)], 'fifth command',
                      '2026-01-05 14:00 UTC')
        g = res.get('launch host time gemm bf16 16x128x128 vs torch')
        check(g is not None and g['ckjit'] == 2.5 and g['peer'] == 7.5 and
              abs(g['ratio'] - 3.0) < 1e-3, 'gemm launch time vs torch of the same shape (time ratio)')
        check('launch host time gemm bf16 128x128x128 vs torch' not in res,
              'no gemm launch comparison without a torch record of that shape')

        # A GEMM timing still unsteady after its second series gets a note.
        def gemm(impl, med, mn):
            return {'metric': f'gemm bf16 1024x1024x1024 rr ({impl})', 'kind': 'gemm',
                    'impl': impl, 'dtype': 'bf16', 'shape': '1024x1024x1024', 'variant': 'rr',
                    'unit': 'TFLOP/s', 'value': 2 * 1024 ** 3 / (med * 1e-3) / 1e12,
                    'flops': 2 * 1024 ** 3, 'median_ms': med, 'min_ms': mn, 'check': 'ok',
                    'l2_flush': True}
        res, md = run(tool, d, [gemm('ckjit', 0.012, 0.0118)], [gemm('torch', 0.042, 0.022)],
                      'sixth command', '2026-01-06 15:00 UTC')
        g = res.get('gemm bf16 1024x1024x1024 rr vs cublas')
        check(g is not None and 'torch timing unsteady' in (g.get('note') or ''),
              'an unsteady peer timing is noted on its comparison')
        res, md = run(tool, d, [gemm('ckjit', 0.012, 0.0118)], [gemm('torch', 0.0096, 0.0094)],
                      'seventh command', '2026-01-07 15:00 UTC')
        g = res.get('gemm bf16 1024x1024x1024 rr vs cublas')
        check(g is not None and 'unsteady' not in (g.get('note') or ''), 'steady timings: no note')

        # Attention (bench/attention_torch.py): both sides in one record.
        def attn(case, peer, ck_ms, peer_ms, check='ok', **kw):
            flops = 4 * 4 * 16 * 4096 * 4096 * int(case.split()[3][1:])
            r = {'metric': f'attention bf16 {case} vs {peer}', 'kind': 'attention',
                 'impl': 'ckjit', 'unit': 'TFLOP/s', 'peer': peer, 'case': case,
                 'value': flops / ck_ms / 1e9, 'peer_value': flops / peer_ms / 1e9,
                 'peer_name': f'sdpa {peer}', 'flops': flops, 'check': check,
                 'ckjit_ms': ck_ms, 'ckjit_min_ms': ck_ms, 'peer_ms': peer_ms,
                 'peer_min_ms': peer_ms}
            r.update(kw)
            return r

        def compile_rec(spec, ms):
            return {'metric': f'attention compile {spec} sm_90', 'kind': 'attention_compile',
                    'impl': 'ckjit', 'unit': 'ms', 'value': ms, 'jobs': 16}

        def compile_total(ms):
            return {'metric': 'attention compile all default attention specs sm_90',
                    'kind': 'attention_compile_total', 'impl': 'ckjit', 'unit': 'ms',
                    'value': ms, 'specs': 2}
        ck_attn = [attn('b4 h16 s4096 d128', 'cudnn', 1.0, 1.1),
                   attn('b4 h16 s4096 d128', 'flash', 1.0, 1.5, note='flash: a note'),
                   attn('b4 h16 s4096 d256', 'cudnn', 2.0, 2.0),
                   attn('b4 h16 s4096 d64 causal', 'cudnn', 1.0, 1.0, check='failed',
                        status='CHECK_FAILED', error='max |diff| 0.5'),
                   {'metric': 'attention launch host time bf16 b1 h1 s128 d128 vs ckjit_gemm '
                              'bf16 128x128x128', 'kind': 'attention_launch', 'impl': 'ckjit',
                    'unit': 'us', 'value': 4.0, 'peer_value': 3.0, 'check': 'ok',
                    'peer_name': 'ckjit_gemm via ctypes'},
                   compile_rec('attention_wgmma:a=1', 900.0),
                   compile_rec('attention_wgmma:a=2', 1100.0), compile_total(1500.0),
                   {'metric': 'attention settings', 'kind': 'info', 'impl': 'attention',
                    'value': None, 'torch_version': '2.11', 'cudnn_version': 91900}]
        res, md = run(tool, d, ck_attn, [], 'attention command', '2026-01-08 16:00 UTC')
        a = res.get('attention bf16 b4 h16 s4096 d128 vs cudnn')
        check(a is not None and abs(a['ratio'] - 1.1) < 1e-3 and a['unit'] == 'TFLOP/s' and
              a['details']['ckjit_ms'] == 1.0 and a['details']['peer_ms'] == 1.1 and
              a['check'] == 'ok', 'attention vs cudnn: ratio = peer time / ckjit time, ms kept')
        check(a is not None and a['target'] == '>= 1x cudnn' and a['target_met'] is True,
              'attention vs cudnn: target 1.0x, met')
        f = res.get('attention bf16 b4 h16 s4096 d128 vs flash')
        check(f is not None and f['target_met'] is False and 'flash: a note' in f.get('note', ''),
              'attention vs flash: 1.5x misses the 1.8x target; the note is kept')
        w = res.get('attention bf16 b4 h16 s4096 d256 vs cudnn')
        check(w is not None and '700 TFLOP/s' in w['target'] and w['target_met'] is False,
              'attention d256 non-causal: the 700 TFLOP/s target too')
        x = res.get('attention bf16 b4 h16 s4096 d64 causal vs cudnn')
        check(x is not None and x['ckjit'] is None and x['ratio'] is None and
              'CHECK_FAILED' in x.get('note', '') and x['check'] == 'failed',
              'attention: a failed check posts no ckjit number')
        lh = res.get('attention launch host time bf16 b1 h1 s128 d128 vs ckjit_gemm bf16 '
                     '128x128x128')
        check(lh is not None and abs(lh['ratio'] - 0.75) < 1e-3,
              'attention launch host time: ratio = gemm us / attention us')
        check(res.get('attention compile attention_wgmma:a=1 sm_90', {}).get('ckjit') == 900.0,
              'attention compile times are records')
        check('## Attention' in md and '| bf16 b4 h16 s4096 d128 | cudnn |' in md and
              'cuDNN 91900' in md, 'RESULTS.md has the Attention section and the peer versions')
        check('attention bf16' not in md.split('## Attention')[0],
              'attention rows only in their section')
        check('copy bf16 8192x8192 vs torch' in res, 'other records are kept')
        res, md = run(tool, d, [compile_rec('attention_wgmma:a=1', 950.0), compile_total(950.0)],
                      [], 'attention compile again', '2026-01-09 16:00 UTC')
        check('attention compile attention_wgmma:a=2 sm_90' not in res and
              res['attention compile attention_wgmma:a=1 sm_90']['ckjit'] == 950.0 and
              'attention bf16 b4 h16 s4096 d128 vs cudnn' in res,
              'a full attention compile run retires the specs it did not compile, nothing else')
    print(f'{len(FAILS)} failures')
    return 1 if FAILS else 0


if __name__ == '__main__':
    sys.exit(main())
