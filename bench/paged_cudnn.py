"""The cuDNN peer of bench/paged_torch.py: torch SDPA's cuDNN backend on the same K/V
stored contiguously (decode; prefill with the bottom-right causal mask its own way),
checked against the float32 reference before it is timed.  The functions import torch
themselves: only the child calls them (the parent runs without torch)."""
import math

from torch_bench_common import capture

# A way is (label, attn, expand, api): attn(k, v) takes BSHD K/V ([b, sk, heads, d]) and
# returns the BHSD output; expand: K/V repeat_interleave-expanded to the query heads
# first (where cuDNN refuses enable_gqa).  Its "contiguous" function runs it on the
# contiguous K/V (expanded before timing); its "gather" function first gathers K/V from
# the pools with index_select (and expands them) inside the timed call.
API_SDPA = 'F.scaled_dot_product_attention under sdpa_kernel(SDPBackend.CUDNN_ATTENTION)'
API_SPLIT = ('torch.ops.aten._scaled_dot_product_cudnn_attention (the op SDPA\'s cuDNN backend '
             'calls) twice, the cached prefix (no mask) and the new keys (causal, sq == keys), '
             'the two merged by their LSE with one lerp_')


def decode_ways(case, q, scale):
    import torch.nn.functional as F
    qv = q.transpose(1, 2)

    def plain(gqa):
        kw = {'scale': scale, **({'enable_gqa': True} if gqa else {})}
        return lambda k, v: F.scaled_dot_product_attention(qv, k.transpose(1, 2), v.transpose(1, 2),
                                                           **kw)
    return [[('enable_gqa=True', plain(True), False, API_SDPA + ', enable_gqa=True'),
             ('K/V expanded', plain(False), True, API_SDPA + ', K/V expanded to the query heads')]]


def prefill_ways(case, q, scale):
    """Torch's cuDNN path takes is_causal as top-left (cudnn_frontend set_causal_mask),
    so the bottom-right mask goes (a) as an additive bf16 attn_mask [1, 1, sq, sk] (cuDNN
    then computes every key of every row), or (b) as two calls, the cached prefix
    without a mask and the sq new keys causal (top-left == bottom-right there), merged by
    their log-sum-exps (the exact work plus one elementwise pass)."""
    import torch
    import torch.nn.functional as F
    qv, sq, sk, prefix = q.transpose(1, 2), case.sq, case.sk, case.sk - case.sq
    rows, keys = torch.arange(sq, device=q.device), torch.arange(sk, device=q.device)
    allowed = keys[None] <= rows[:, None] + prefix
    bias = torch.zeros(1, 1, sq, sk, device=q.device, dtype=q.dtype)
    bias.masked_fill_(~allowed, -math.inf)

    def masked(gqa):
        kw = {'scale': scale, 'attn_mask': bias, **({'enable_gqa': True} if gqa else {})}
        return lambda k, v: F.scaled_dot_product_attention(qv, k.transpose(1, 2), v.transpose(1, 2),
                                                           **kw)

    def split(k, v):
        op = torch.ops.aten._scaled_dot_product_cudnn_attention
        kt, vt = k.transpose(1, 2), v.transpose(1, 2)
        o1, l1 = op(qv, kt[:, :, :prefix], vt[:, :, :prefix], None, True, 0.0, False, False,
                    scale=scale)[:2]
        o2, l2 = op(qv, kt[:, :, prefix:], vt[:, :, prefix:], None, True, 0.0, True, False,
                    scale=scale)[:2]
        # O = (e^l1 O1 + e^l2 O2) / (e^l1 + e^l2) = lerp(O1, O2, sigmoid(l2 - l1))
        w = torch.sigmoid(l2.float() - l1.float()).reshape(o1.shape[:3] + (1,)).to(o1.dtype)
        return o1.lerp_(o2, w)
    api_m = API_SDPA + ', attn_mask = the bottom-right causal mask (additive bf16 [1, 1, sq, sk])'
    return [[('lower-right mask, enable_gqa=True', masked(True), False,
              api_m + ', enable_gqa=True'),
             ('lower-right mask, K/V expanded', masked(False), True,
              api_m + ', K/V expanded to the query heads')],
            [('prefix + causal split, LSE-merged', split, False, API_SPLIT),
             ('prefix + causal split, LSE-merged, K/V expanded', split, True,
              API_SPLIT + ', K/V expanded to the query heads')]]


def cudnn_peer(ctx, case, groups, k, v, refs, gather=None):
    """Per group of alternatives, the first way that runs and agrees with the float32
    reference: [(label, contiguous fn, gather fn or None, api, BSHD output)], notes."""
    r, got, notes = case.hq // case.hkv, [], []
    expanded = {}

    def expand(t):
        return t.repeat_interleave(r, 2)
    for group in groups:
        why = []
        for label, attn, exp, api in group:
            if label.startswith('prefix') and not exp and not (
                    got and got[0][0] == 'lower-right mask, enable_gqa=True'):
                why.append(f'{label}: not tried (SDPA\'s cuDNN path took no enable_gqa here)')
                continue
            if exp and 'kv' not in expanded:
                expanded['kv'] = (expand(k), expand(v))
            kc, vc = expanded['kv'] if exp else (k, v)
            fn = (lambda a=attn, kc=kc, vc=vc: a(kc, vc))
            gfn = None
            if gather:
                gfn = (lambda a=attn, e=exp: a(*((expand(t) for t in gather()) if e else gather())))
            res, err = capture(fn)
            if res is None:
                why.append(f'{label}: {err}')
                continue
            o = res.transpose(1, 2)  # BHSD -> BSHD view
            diff, bad = refs.check(o)
            if bad:
                why.append(f'{label}: differs from the float32 reference (max |diff| {diff:.4g}, '
                           f'{bad} out of tolerance): not timed')
                continue
            if gfn:
                gres, gerr = capture(gfn)
                gbad = gres is None or refs.check(gres.transpose(1, 2))[1]
                if gbad:
                    why.append(f'{label} on gathered K/V: ' + (gerr or 'differs: not timed'))
                    gfn = None
                del gres
            got.append((label, fn, gfn, api, o))
            break
        if why:
            notes.append('; '.join(why))
    return got, notes
