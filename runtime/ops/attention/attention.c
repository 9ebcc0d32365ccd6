/* ckjit_attention: validate, plan, arguments, run. */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "base/error.h"
#include "base/int_math.h"
#include "runtime/ops/op_frame.h"
#include "runtime/runtime.h"

/* The grid walks (query tile, head, batch entry) tiles grid-stride
 * (kernel_src/attention/problem.h): one block per tile up to the grid's x
 * limit.  attention_wgmma without a mask or varlen (tiles of equal work)
 * is persistent, one block per multiprocessor (its shared memory admits
 * one), so a block's producer fetches the next tile's Q, K and V while
 * its consumers finish the last one; with tiles of unequal work (causal,
 * window, varlen) a static split measured slower than the hardware
 * handing out one block per tile, heaviest first (bench/NOTES.md). */
static void plan(const ckjit_runtime *rt, const attention_call *c, int64_t m_blocks,
                 ckjit_launch_plan *p) {
  const ckjit_attention_desc *d = c->desc;
  int64_t blocks = m_blocks * d->num_heads_q * d->batch;
  const int even = c->mask == MASK_NONE && !d->cu_seqlens_q;
  if (p->spec.family == CKJIT_FAMILY_ATTENTION_WGMMA && even && blocks > rt->device.multiprocessors)
    blocks = rt->device.multiprocessors;
  p->grid[0] = ckjit__grid_x(blocks);
  p->block[0] = ckjit__attention_threads(&p->spec);
  p->shared_bytes = ckjit__attention_smem(&p->spec);
}

static ckjit_attention_stride4 stride4(const ckjit_attention_strides *s) {
  return (ckjit_attention_stride4){.b = s->batch, .h = s->head, .s = s->seq, .d = s->dim};
}

static ckjit_attention_args arguments(const attention_call *c, int64_t m_blocks) {
  const ckjit_attention_desc *d = c->desc;
  return (ckjit_attention_args){
      .q = d->q, .k = d->k, .v = d->v, .o = d->o, .lse = d->lse,
      .cu_seqlens_q = d->cu_seqlens_q, .cu_seqlens_k = d->cu_seqlens_k,
      .bias = d->bias, .alibi_slopes = d->alibi_slopes,
      .q_stride = stride4(&d->q_strides), .k_stride = stride4(&d->k_strides),
      .v_stride = stride4(&d->v_strides), .o_stride = stride4(&d->o_strides),
      .lse_stride = stride4(&d->lse_strides), .bias_stride = stride4(&d->bias_strides),
      .alibi_stride_b = d->alibi_stride_batch,
      .m_blocks = m_blocks,
      .batch = (int)d->batch, .heads_q = (int)d->num_heads_q, .heads_kv = (int)d->num_heads_kv,
      .seqlen_q = (int)d->seqlen_q, .seqlen_k = (int)d->seqlen_k,
      .head_dim_qk = (int)d->head_dim_qk, .head_dim_v = (int)d->head_dim_v,
      .window_left = c->window_left, .window_right = c->window_right,
      .scale_log2 = c->scale * 1.4426950408889634f,
      .softcap = d->softcap > 0.0f ? d->softcap : 0.0f};
}

ckjit_status ckjit_attention(const ckjit_attention_desc *desc, void *stream) {
  attention_call c;
  ckjit_status st = ckjit__attention_validate(desc, &c);
  if (st || c.empty) return st;
  ckjit_runtime *rt;
  if ((st = ckjit__runtime_device(&rt))) return st;
  ckjit_launch_plan p;
  ckjit__plan_init(&p, CKJIT_FAMILY_ATTENTION_SIMT);
  if ((st = ckjit__attention_pick(rt, &c, &p.spec))) return st;
  ckjit__attention_tune(rt, &c, &p.spec, stream); /* CKJIT_TUNE: a measured wgmma tile */
  /* Query tiles per (head, entry): the grid's and the kernel's walk. */
  const int64_t m_blocks = ckjit__ceil_div(desc->seqlen_q, p.spec.value[AT_BM]);
  plan(rt, &c, m_blocks, &p);
  if (p.spec.family == CKJIT_FAMILY_ATTENTION_WGMMA) {
    ckjit_attention_tma_args x;
    memset(&x, 0, sizeof x);
    x.p = arguments(&c, m_blocks);
    x.p.tma = ckjit__attention_encode_maps(rt, &c, &p.spec, &x);
    return ckjit__op_run(&p, &x, &ckjit_abi_by_value, stream);
  }
  const ckjit_attention_args args = arguments(&c, m_blocks);
  return ckjit__op_run(&p, &args, &ckjit_abi_by_value, stream);
}
