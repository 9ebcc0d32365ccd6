/* The attention kernel families (kernel_src/attention/): their parameters,
 * the enum constants that cross to the kernels, and the tile policy the
 * default set and the front-end share.
 *
 * The front-end, one concept a file:
 *   attention_family.c  the families: parameters, checks, default sets
 *   validate.c          the descriptor's defaults and checks
 *   pipelines.c         the pipeline table: which family runs a call, its tile
 *   tma.c               attention_wgmma's tensor maps
 *   tune.c              CKJIT_TUNE: attention_wgmma's tiles timed per shape class
 *   attention.c         plan, arguments, run (ckjit_attention)
 *   paged.c             ckjit_paged_attention: the same kernels with PAGE != 0
 *   paged_append.c      ckjit_paged_kv_append's family and front-end
 *   paged_check.c       ckjit_paged_kv_check: the tables, on the host */
#ifndef CKJIT_RUNTIME_OPS_ATTENTION_H
#define CKJIT_RUNTIME_OPS_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "abi/attention_args.h"
#include "abi/paged_append_args.h"
#include "ckjit/paged_attention.h"
#include "runtime/spec.h"

/* Parameters of every attention family, in spec order.
 *   hdim, hdim_v  the head dimensions (64, 96, 128, 192, 256), exactly
 *   mask          none / causal / window (a kernel compiles only its test)
 *   bias          none / f32 / dtype elements
 *   alibi, softcap  0 or 1: the term is compiled in
 *   bm, bn        query rows per tile, keys per step
 *   stages        K/V buffers in flight (mma, wgmma)
 *   warps         warps (NVIDIA) or wave64s (AMD) per block
 *   page          0: dense or varlen K / V; else the slots per page of a
 *                 paged K / V pool (a power of two up to 1024)
 *   kv8           1: the pages hold fp8 e4m3 (decode and simt only) */
enum {
  AT_DTYPE, AT_HDIM, AT_HDIM_V, AT_MASK, AT_BIAS, AT_ALIBI, AT_SOFTCAP,
  AT_BM, AT_BN, AT_STAGES, AT_WARPS, AT_PAGE, AT_KV8, AT_COUNT
};

/* Values of the mask and bias parameters (abi/attention_args.h); the masks
 * in the order of the public ckjit_attention_mask. */
enum { CKJIT_ATTENTION_MASKS(CKJIT_ENUM_CONSTANT) CKJIT_ATTENTION_MASK_COUNT };
enum { CKJIT_ATTENTION_BIASES(CKJIT_ENUM_CONSTANT) CKJIT_ATTENTION_BIAS_COUNT };

/* The attention pipelines, fastest first where several run. */
typedef enum attention_pipeline {
  ATTENTION_DECODE, /* sm_80+: few queries per sequence, the keys split over blocks (flash-decoding) */
  ATTENTION_WGMMA, /* sm_90: TMA-free warp-specialized wgmma (FlashAttention-3 design) */
  ATTENTION_MMA,   /* sm_80+: mma.sync + cp.async (FlashAttention-2 design) */
  ATTENTION_MFMA,  /* AMD gfx908 / gfx90a / gfx94x: MFMA (unverified on hardware) */
  ATTENTION_SIMT,  /* anything else, f32 included */
  ATTENTION_PIPELINE_COUNT
} attention_pipeline;

/* A tile of a pipeline. */
typedef struct attention_tile {
  int bm, bn, stages, warps;
} attention_tile;

/* The tile `pipeline` runs head dims (hdim, hdim_v) and `mask` with: the
 * default set and the front-end's choice (policy in pipelines.c); `page`
 * the spec's page size (0: dense K / V); `keys` the call's (longest) key
 * count, 0 where not known (the default set: long sequences). */
attention_tile ckjit__attention_tile(attention_pipeline pipeline, int hdim, int hdim_v, int mask,
                                     int plain, int page, int64_t keys);

/* attention_wgmma's block: the consumer warpgroups (bm / 64) plus the
 * producer, 4 warps each. */
static inline int ckjit__attention_wgmma_warps(int bm) { return 4 * (bm / 64 + 1); }
/* A tile attention_wgmma's spec check accepts (its rows, warps, keys and
 * stages; head dims and shared memory are the spec's questions). */
int ckjit__attention_wgmma_tile_ok(const attention_tile *t);

/* Head dims every attention family compiles: 64, 96, 128, 192, 256. */
static inline int ckjit__attention_is_head_dim(int64_t d) {
  return d == 64 || d == 96 || d == 128 || d == 192 || d == 256;
}

/* A public stride set as the kernels' (b, h, s, d). */
static inline ckjit_attention_stride4 ckjit__attention_stride4(const ckjit_attention_strides *s) {
  return (ckjit_attention_stride4){.b = s->batch, .h = s->head, .s = s->seq, .d = s->dim};
}

/* Bytes of dynamic shared memory of a spec (the ABI header's formulas). */
unsigned ckjit__attention_smem(const ckjit_spec *spec);

/* Threads per block of a spec. */
unsigned ckjit__attention_threads(const ckjit_spec *spec);

/* A validated call (validate.c): the descriptor and what the checks found. */
typedef struct attention_call {
  const ckjit_attention_desc *desc; /* paged: derived by paged.c, k and v the pools */
  const ckjit_paged_kv *paged;      /* NULL: dense or varlen K / V */
  int kv8;                          /* the pages hold fp8 e4m3 */
  int mask;                       /* MASK_*: WINDOW narrowed to CAUSAL or NONE where it is one */
  int window_left, window_right;  /* clamped to [0, CKJIT_ATTENTION_UNBOUNDED] */
  int bias;                       /* BIAS_* */
  float scale;                    /* the softmax scale (its default filled in) */
  int rows_aligned;               /* the tensor-core layout: head-dim stride 1, 16-byte
                                     aligned pointers, strides multiples of 8 elements */
  int empty;                      /* nothing to compute (no batch entry, head or query row) */
} attention_call;

/* Checks `desc` into `call`; a bad argument gets a status and a message. */
ckjit_status ckjit__attention_validate(const ckjit_attention_desc *desc, void *stream,
                                       attention_call *call);
/* The same checks under `api`'s name; with `paged`, desc's k and v are the
 * pools (checked by the caller) and the K lengths are on the device. */
ckjit_status ckjit__attention_validate_as(const char *api, const ckjit_attention_desc *desc,
                                          const ckjit_paged_kv *paged, void *stream,
                                          attention_call *call);
/* One tensor of `batch` x `heads` x `seq` x `dim` elements of `es` bytes:
 * non-NULL, aligned, non-negative strides, inside the address space. */
ckjit_status ckjit__attention_check_tensor(const char *api, const char *name, const void *p,
                                           size_t es, const ckjit_attention_strides *st,
                                           int64_t batch, int64_t heads, int64_t seq, int64_t dim);
/* Whether the tensor-core kernels can read its rows (16-byte pieces). */
int ckjit__attention_rows_aligned(const void *p, const ckjit_attention_strides *st, size_t es,
                                  int64_t batch, int64_t heads, int64_t seq);

/* The pool and the tables' shapes of a paged cache (paged.c), for
 * ckjit_paged_attention and ckjit_paged_kv_append: _sizes the page size
 * (UNSUPPORTED), the page count and the max_seqlen_k hint; the whole
 * check also the pools' extents, one complete table form, aligned tables on the
 * device; *rows_aligned: whether the tensor-core kernels can read the pools. */
ckjit_status ckjit__paged_kv_validate_sizes(const char *api, const ckjit_paged_kv *kv);
ckjit_status ckjit__paged_kv_validate(const char *api, const ckjit_paged_kv *kv, ckjit_dtype dtype,
                                      int64_t heads_kv, int64_t hd, int64_t hdv, void *stream,
                                      int *rows_aligned);

/* ckjit_paged_attention's checks (paged.c): `d`, the caller's storage, is
 * made the dense descriptor of the problem (K and V the pools) and `c` the
 * validated call over it. */
ckjit_status ckjit__paged_attention_call(const ckjit_paged_attention_desc *pd, void *stream,
                                         ckjit_attention_desc *d, attention_call *c);

/* ckjit_paged_kv_append's checks and plan (paged_append.c): *empty when it
 * writes nothing; else the launch in *p and its argument in *a. */
struct ckjit_launch_plan;
ckjit_status ckjit__paged_append_plan(const ckjit_paged_kv_append_desc *d, void *stream, int *empty,
                                      struct ckjit_launch_plan *p, ckjit_paged_append_args *a);

/* The kernels' view of a validated cache's tables. */
ckjit_attention_paging ckjit__paging_args(const ckjit_paged_kv *kv);

/* Runs a validated, non-empty call (attention.c): pick, tune, plan, launch. */
ckjit_status ckjit__attention_run(const attention_call *call, void *stream);

struct ckjit_gpu;
/* The spec of the first pipeline that runs `call` on the device. */
ckjit_status ckjit__attention_pick(const struct ckjit_gpu *gpu, const attention_call *call,
                                   ckjit_spec *spec);

/* CKJIT_TUNE (tune.c): attention_wgmma's tile from the record of measured
 * winners for the call's shape class, measured first under CKJIT_TUNE=1
 * (each candidate run on the call's stream and buffers, the stream
 * synchronized: not under graph capture).  Other families' specs, and
 * the spec when nothing is known, stay as picked. */
void ckjit__attention_tune(struct ckjit_gpu *gpu, const attention_call *call, ckjit_spec *spec,
                           void *stream);
/* Its pieces, for the unit tests.  The shape class of `call` on `arch`
 * (0 when it would not fit `len` or a record line):
 *   <arch>/<dtype>/hd<qk>x<v>/<mask>/bias-<bias>/alibi<0|1>/softcap<0|1>/
 *   <dense|varlen>/q<a>k<b>bh<c>
 * with a, b, c the base-2 logarithms, rounded up, of seqlen_q, seqlen_k
 * (varlen: the largest lengths) and batch * num_heads_q. */
int ckjit__attention_tune_class(const char *arch, const attention_call *call, char *out,
                                size_t len);
/* The tiles timed for wgmma `spec` on a device of `max_shared_bytes`, the
 * spec's own first; at most `max`.  Returns how many. */
int ckjit__attention_tune_candidates(const ckjit_spec *spec, int max_shared_bytes,
                                     attention_tile *out, int max);
/* The record (runtime/ops/tune_record.h) as tiles: bm, bn, stages, warps. */
int ckjit__attention_tune_lookup(const char *dir, const char *cls, attention_tile *out);
void ckjit__attention_tune_store(const char *dir, const char *cls, const attention_tile *tile);

/* attention_wgmma's tensor maps for `call` (tma.c): 1 when Q's, K's and
 * V's were made (a dense problem whose strides TMA takes, on a driver that
 * makes them), else 0 and the kernel copies with cp.async. */
int ckjit__attention_encode_maps(const struct ckjit_gpu *gpu, const attention_call *call,
                                 const ckjit_spec *spec, ckjit_attention_tma_args *x);

/* attention_decode: the block's query rows (heads x queries of one K/V
 * head), and the most queries per sequence it takes. */
#define CKJIT_ATTENTION_DECODE_ROWS 16
/* Launches attention_decode for `call` (decode.c): the split-KV plan, the
 * partials' scratch and attention_combine when the keys are split. */
struct ckjit_launch_plan;
ckjit_status ckjit__attention_run_decode(struct ckjit_gpu *gpu, const attention_call *call,
                                         struct ckjit_launch_plan *plan,
                                         const ckjit_attention_args *args, void *stream);

/* The family of each pipeline. */
extern const ckjit_family_id ckjit__attention_families[ATTENTION_PIPELINE_COUNT];

#endif
