/* ckjit_attention: validate, plan, arguments, run. */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "base/error.h"
#include "base/int_math.h"
#include "runtime/ops/op_frame.h"
#include "runtime/runtime.h"

/* Pairs are coarse: `pairs` over `sms` persistent blocks leave the last
 * round part-empty.  Under 90% of the rounds' capacity in use, one block
 * per tile (the hardware balancing single tiles) measured faster
 * (bench/NOTES.md: head dim 64, causal, 704 pairs on 132 SMs). */
static int pairs_fill_the_rounds(int64_t pairs, int64_t sms) {
  const int64_t rounds = (pairs + sms - 1) / sms;
  return pairs >= rounds * sms * 9 / 10;
}

/* The grid walks the tiles of kernel_src/attention/problem.h.
 * attention_wgmma on a dense problem is persistent, one block per
 * multiprocessor (its shared memory admits one), so a block's producer
 * fetches the next tile's Q, K and V while its consumers finish the last
 * one: without a mask over single tiles (equal work), with one over pairs
 * of query tiles whose work adds up to the same (a persistent walk over
 * single masked tiles measured slower than one block per tile).  Varlen
 * and paged tiles (key counts differ between entries), and masked pairs that fill the rounds badly, get one block per
 * tile, heaviest first, handed out by the hardware as SMs free up.
 * Returns whether the walk is over pairs (ckjit_attention_args.paired). */
static int plan(const ckjit_gpu *gpu, const attention_call *c, int64_t m_blocks,
                ckjit_launch_plan *p) {
  const ckjit_attention_desc *d = c->desc;
  const int64_t sms = gpu->device.multiprocessors, heads = d->num_heads_q * d->batch;
  const int64_t pairs = CKJIT_ATTENTION_PAIRS(m_blocks) * heads;
  int persistent = p->spec.family == CKJIT_FAMILY_ATTENTION_WGMMA && !d->cu_seqlens_q && !c->paged;
  if (c->mask != MASK_NONE) persistent = persistent && pairs_fill_the_rounds(pairs, sms);
  const int paired = persistent && c->mask != MASK_NONE;
  int64_t blocks = paired ? pairs : m_blocks * heads;
  if (persistent && blocks > sms) blocks = sms;
  p->grid[0] = ckjit__grid_x(blocks);
  p->block[0] = ckjit__attention_threads(&p->spec);
  p->shared_bytes = ckjit__attention_smem(&p->spec);
  return paired;
}


static ckjit_attention_args arguments(const attention_call *c, int64_t m_blocks, int paired) {
  const ckjit_attention_desc *d = c->desc;
  const ckjit_paged_kv *kv = c->paged;
  ckjit_attention_args a = {
      .q = d->q, .k = d->k, .v = d->v, .o = d->o, .lse = d->lse,
      .cu_seqlens_q = d->cu_seqlens_q, .cu_seqlens_k = d->cu_seqlens_k,
      .bias = d->bias, .alibi_slopes = d->alibi_slopes,
      .q_stride = ckjit__attention_stride4(&d->q_strides),
      .k_stride = ckjit__attention_stride4(&d->k_strides),
      .v_stride = ckjit__attention_stride4(&d->v_strides),
      .o_stride = ckjit__attention_stride4(&d->o_strides),
      .lse_stride = ckjit__attention_stride4(&d->lse_strides),
      .bias_stride = ckjit__attention_stride4(&d->bias_strides),
      .alibi_stride_b = d->alibi_stride_batch,
      .m_blocks = m_blocks,
      .batch = (int)d->batch, .heads_q = (int)d->num_heads_q, .heads_kv = (int)d->num_heads_kv,
      .seqlen_q = (int)d->seqlen_q, .seqlen_k = (int)d->seqlen_k,
      .head_dim_qk = (int)d->head_dim_qk, .head_dim_v = (int)d->head_dim_v,
      .window_left = c->window_left, .window_right = c->window_right,
      .scale_log2 = c->scale * 1.4426950408889634f,
      .softcap = d->softcap > 0.0f ? d->softcap : 0.0f,
      .paired = paired};
  if (kv) a.paging = ckjit__paging_args(kv);
  return a;
}

ckjit_status ckjit__attention_run(const attention_call *c, void *stream) {
  ckjit_gpu *gpu;
  ckjit_status st;
  if ((st = ckjit__stream_gpu(stream, &gpu))) return st;
  ckjit_launch_plan p;
  ckjit__plan_init(&p, CKJIT_FAMILY_ATTENTION_SIMT);
  if ((st = ckjit__attention_pick(gpu, c, &p.spec))) return st;
  ckjit__attention_tune(gpu, c, &p.spec, stream); /* CKJIT_TUNE: a measured wgmma tile */
  /* Query tiles per (head, entry): the grid's and the kernel's walk. */
  const int64_t m_blocks = ckjit__ceil_div(c->desc->seqlen_q, p.spec.value[AT_BM]);
  if (p.spec.family == CKJIT_FAMILY_ATTENTION_DECODE) {
    const ckjit_attention_args args = arguments(c, m_blocks, 0);
    return ckjit__attention_run_decode(gpu, c, &p, &args, stream);
  }
  const int paired = plan(gpu, c, m_blocks, &p);
  if (p.spec.family == CKJIT_FAMILY_ATTENTION_WGMMA) {
    ckjit_attention_tma_args x;
    memset(&x, 0, sizeof x);
    x.p = arguments(c, m_blocks, paired);
    x.p.tma = ckjit__attention_encode_maps(gpu, c, &p.spec, &x);
    return ckjit__op_run(gpu, &p, &x, &ckjit_abi_by_value, stream);
  }
  const ckjit_attention_args args = arguments(c, m_blocks, paired);
  return ckjit__op_run(gpu, &p, &args, &ckjit_abi_by_value, stream);
}

ckjit_status ckjit_attention(const ckjit_attention_desc *desc, void *stream) {
  attention_call c;
  ckjit_status st = ckjit__attention_validate(desc, stream, &c);
  if (st || c.empty) return st;
  return ckjit__attention_run(&c, stream);
}
