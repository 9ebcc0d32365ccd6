/* attention_decode's launch (split-KV) and attention_combine, the family
 * that sums the splits (kernel_src/attention/decode_combine.cu). */
#include <string.h>

#include "attention.h"
#include "base/error.h"
#include "base/int_math.h"
#include "runtime/dispatch.h"
#include "runtime/ops/op_frame.h"
#include "runtime/runtime.h"

enum { CB_DTYPE, CB_HDIM_V, CB_COUNT };

static const ckjit_param_desc combine_params[CB_COUNT] = {
    [CB_DTYPE] = CKJIT_DTYPE_PARAM_NAMED("dtype", 2),
    [CB_HDIM_V] = CKJIT_INT_PARAM("hdim_v", 64, 256, 128),
};

static ckjit_status combine_check(const ckjit_spec *s) {
  if (s->value[CB_HDIM_V] % 4)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "spec: attention_combine hdim_v=%d must be a multiple of 4", s->value[CB_HDIM_V]);
  return CKJIT_SUCCESS;
}

/* Default set: what attention_decode's defaults need (f16, bf16 x head
 * dims 64, 128, 256). */
static int combine_default(size_t i, ckjit_spec *out) {
  static const int hdims[] = {64, 128, 256};
  if (i >= 6) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_ATTENTION_COMBINE;
  out->value[CB_DTYPE] = 1 + (int)(i / 3);
  out->value[CB_HDIM_V] = hdims[i % 3];
  return 1;
}

const ckjit_family ckjit__family_attention_combine = {
    .name = "attention_combine",
    .source = "attention/decode_combine.cu",
    .kernel = "ckjit_attention_combine",
    .n_params = CB_COUNT,
    .params = combine_params,
    .check = combine_check,
    .default_spec = combine_default,
};

/* How many parts the key range of each (entry, K/V head, row block) is
 * split into.  When the blocks fit in one round of the device's resident
 * blocks: as many parts as keep them one round (a second round, even a
 * full one, ran slower than one round a third empty: bench/NOTES.md #193).
 * Otherwise about two rounds, the count between 2/3 of that and that whose
 * last round is fullest (a part's fixed cost, Q, the merge, its partial row
 * and the combine, outweighs a short round: two rounds ran faster than
 * four).  At least four key steps a part, and paged, enough that a part's
 * page ids fit the kernel's staged copy of them (pages of 1 slot), at most
 * 64 parts.
 * `keys`: a bound of the entries' key counts when the host knows one
 * (dense: seqlen_k; paged padded form: the table's capacity), else 2^30. */
static int64_t split_count(const ckjit_gpu *gpu, const ckjit_launch_plan *p, int64_t blocks,
                           int64_t keys, int64_t page, int64_t forced) {
  const int64_t smem = (int64_t)p->shared_bytes + 1024;
  int64_t resident = ((int64_t)gpu->device.max_shared_bytes + 1024) / smem;
  if (resident < 1) resident = 1;
  if (resident > 4) resident = 4;
  const int64_t slots = resident * gpu->device.multiprocessors;
  const int64_t most = ckjit__ceil_div(ckjit__ceil_div(keys, p->spec.value[AT_BN]), 4);
  int64_t splits;
  if (blocks <= slots) {
    splits = slots / blocks < most ? slots / blocks : most;
  } else {
    const int64_t want = ckjit__ceil_div(2 * slots, blocks);
    splits = want < most ? want : most;
    /* The fullest last round: s / rounds(s) largest, rounds(s) = ceil(blocks
     * s / slots), kept up to date by additions (this runs on every call). */
    int64_t best_rounds = ckjit__ceil_div(blocks * splits, slots);
    const int64_t first = ckjit__ceil_div(2 * want, 3);
    int64_t rounds = ckjit__ceil_div(blocks * first, slots);
    for (int64_t s = first; s <= want && s <= most && s <= 64; s++) {
      while (rounds * slots < blocks * s) rounds++;
      if (s * best_rounds > splits * rounds) splits = s, best_rounds = rounds;
    }
  }
  if (forced > 0) splits = forced;
  if (page > 0 && keys < ((int64_t)1 << 30)) {
    /* a part's keys start on a page: steps * bn / page + 1 ids at most */
    const int64_t steps = (CKJIT_ATTENTION_DECODE_STAGED_IDS - 1) * page / p->spec.value[AT_BN];
    const int64_t staged = steps > 0 ? ckjit__ceil_div(ckjit__ceil_div(keys, p->spec.value[AT_BN]), steps) : 1;
    if (staged > splits) splits = staged;
  }
  if (splits > 64) splits = 64;
  return splits < 1 ? 1 : splits;
}

ckjit_status ckjit__attention_run_decode(ckjit_gpu *gpu, const attention_call *c,
                                         ckjit_launch_plan *p, const ckjit_attention_args *args,
                                         void *stream) {
  const ckjit_attention_desc *d = c->desc;
  const ckjit_paged_kv *kv = c->paged;
  const int64_t group = d->num_heads_q / d->num_heads_kv;
  const int64_t row_blocks = ckjit__ceil_div(group * d->seqlen_q, CKJIT_ATTENTION_DECODE_ROWS);
  const int64_t blocks = d->batch * d->num_heads_kv * row_blocks;
  if (blocks > INT32_MAX)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "ckjit_attention: %lld decode blocks (batch x num_heads_kv x row blocks) "
                       "exceed the grid",
                       (long long)blocks);
  int64_t keys = d->seqlen_k;
  if (kv) keys = kv->kv_indptr ? (int64_t)1 << 30 : kv->max_pages_per_seq * kv->page_size;
  if (kv && kv->max_seqlen_k > 0 && kv->max_seqlen_k < keys) keys = kv->max_seqlen_k;
  if (keys > ((int64_t)1 << 30)) keys = (int64_t)1 << 30;
  p->block[0] = ckjit__attention_threads(&p->spec);
  p->shared_bytes = ckjit__attention_smem(&p->spec);
  /* CKJIT_ATTENTION_DECODE_SPLITS: the count for measurements (paged, at
   * least what the staged page ids need). */
  int forced = 0;
  ckjit_status st = ckjit__knob_int("ckjit_attention", "CKJIT_ATTENTION_DECODE_SPLITS", 1, 64, &forced);
  if (st) return st;
  const int64_t splits = split_count(gpu, p, blocks, keys, kv ? kv->page_size : 0, forced);
  p->grid[0] = (unsigned)blocks;
  p->grid[1] = (unsigned)splits;
  ckjit_attention_decode_args x;
  memset(&x, 0, sizeof x);
  x.p = *args;
  x.splits = (int)splits;
  x.row_blocks = (int)row_blocks;
  x.rows = d->batch * d->num_heads_q * d->seqlen_q;
  if (splits == 1) return ckjit__op_run(gpu, p, &x, &ckjit_abi_by_value, stream);

  const size_t bytes = (size_t)splits * (size_t)x.rows * (size_t)(d->head_dim_v + 1) * sizeof(float);
  void *scratch;
  st = ckjit__scratch_alloc(gpu, bytes, stream, &scratch);
  if (st) return st;
  x.part_o = scratch;
  x.part_lse = x.part_o + (size_t)splits * (size_t)x.rows * (size_t)d->head_dim_v;
  st = ckjit__op_run(gpu, p, &x, &ckjit_abi_by_value, stream);
  if (!st) {
    ckjit_launch_plan cp;
    ckjit__plan_init(&cp, CKJIT_FAMILY_ATTENTION_COMBINE);
    cp.spec.value[CB_DTYPE] = p->spec.value[AT_DTYPE];
    cp.spec.value[CB_HDIM_V] = (int32_t)d->head_dim_v;
    const int64_t cap = 8 * (int64_t)gpu->device.multiprocessors; /* then grid-stride */
    int64_t grid = ckjit__ceil_div(x.rows, CKJIT_ATTENTION_COMBINE_ROWS);
    if (grid > cap) grid = cap;
    cp.grid[0] = (unsigned)grid;
    cp.block[0] = 32 * CKJIT_ATTENTION_COMBINE_ROWS;
    const ckjit_attention_combine_args y = {
        .p = *args, .part_o = x.part_o, .part_lse = x.part_lse, .rows = x.rows, .splits = x.splits};
    st = ckjit__op_run(gpu, &cp, &y, &ckjit_abi_by_value, stream);
  }
  const ckjit_status freed = ckjit__scratch_free(gpu, scratch, stream);
  return st ? st : freed;
}
