/* CKJIT_TUNE for attention_wgmma: times the tiles the kernel supports for a
 * shape class once and applies the recorded winner.  The other pipelines
 * keep the policy's tile (pipelines.c).  The record is the one every tuned
 * family shares (runtime/ops/tune_record.h), in
 * `<cache dir>/attention-tune.txt`:
 *   ckjit-attention-tune 1 <class> <bm> <bn> <stages> <warps>
 *
 * A candidate runs through ckjit_attention itself, with the tile forced
 * by a thread-local that the call's hook (ckjit__attention_tune, right
 * after the pipeline is picked) applies: the timing takes exactly the
 * call's path (plan, tensor maps, launch) with no second copy of it. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "attention.h"
#include "base/error.h"
#include "runtime/ops/tune_record.h"
#include "runtime/runtime.h"

static tune_choice to_record(const attention_tile *t) {
  return (tune_choice){{t->bm, t->bn, t->stages, t->warps}};
}

static attention_tile from_record(const tune_choice *t) {
  return (attention_tile){.bm = t->value[0], .bn = t->value[1], .stages = t->value[2],
                          .warps = t->value[3]};
}

/* What a record line or a store may hold: a tile wgmma_check accepts
 * (attention_family.c), of at most 4 stages.  Whether it suits the call
 * (head dims, shared memory) is the candidate list's question, asked when
 * it is applied. */
static int valid(const tune_choice *c) {
  const attention_tile t = from_record(c);
  return ckjit__attention_wgmma_tile_ok(&t) && t.stages <= 4;
}

static tune_record record = TUNE_RECORD_INIT("attention", valid);

int ckjit__attention_tune_lookup(const char *dir, const char *cls, attention_tile *out) {
  tune_choice t;
  if (!ckjit__tune_lookup(&record, dir, cls, &t)) return 0;
  *out = from_record(&t);
  return 1;
}

void ckjit__attention_tune_store(const char *dir, const char *cls, const attention_tile *tile) {
  const tune_choice t = to_record(tile);
  ckjit__tune_store(&record, dir, cls, &t);
}

static int ceil_log2(int64_t x) {
  int r = 0;
  while (((int64_t)1 << r) < x) r++;
  return r;
}

static const char *const mask_names[] = {CKJIT_ATTENTION_MASKS(CKJIT_ENUM_NAME) NULL};
static const char *const bias_names[] = {CKJIT_ATTENTION_BIASES(CKJIT_ENUM_NAME) NULL};

int ckjit__attention_tune_class(const char *arch, const attention_call *call, char *out,
                                size_t len) {
  const ckjit_attention_desc *d = call->desc;
  const int n = snprintf(out, len, "%s/%s/hd%dx%d/%s/bias-%s/alibi%d/softcap%d/%s/q%dk%dbh%d",
                         arch, ckjit_dtype_name(d->dtype), (int)d->head_dim_qk, (int)d->head_dim_v,
                         mask_names[call->mask], bias_names[call->bias], d->alibi_slopes != NULL,
                         d->softcap > 0.0f, d->cu_seqlens_q ? "varlen" : "dense",
                         ceil_log2(d->seqlen_q), ceil_log2(d->seqlen_k),
                         ceil_log2(d->batch * d->num_heads_q));
  return n > 0 && (size_t)n < len && n < TUNE_CLASS_LEN;
}

/* The kernel's tiles for the spec's head dims (wgmma_check, and the
 * kernel's register split, wgmma.cu's setmaxnreg):
 *   head dims up to 128: 128 rows by 176 or 128 keys;
 *   beyond (either): 128 rows by 80 or 64 keys (the Q tile and two K/V
 *     stages of wider key steps do not fit 227 KiB, pipelines.c);
 *   both up to 64: also 192 rows (three consumers) by 128 keys, whose 160
 *     registers hold a 64 x 128 score tile, its packed P and O, but not a
 *     176-key one (88 + 44 + 32 values);
 * each with 2 or 3 stages, where the shared memory fits the device and
 * the kernel's 227 KiB. */
int ckjit__attention_tune_candidates(const ckjit_spec *spec, int max_shared_bytes,
                                     attention_tile *out, int max) {
  const int hd = spec->value[AT_HDIM], hdv = spec->value[AT_HDIM_V];
  const int wide = hd > 128 || hdv > 128, small = hd <= 64 && hdv <= 64;
  attention_tile all[1 + 6];
  int n_all = 0;
  /* The policy's tile first: the automatic choice, which another must beat. */
  all[n_all++] = (attention_tile){spec->value[AT_BM], spec->value[AT_BN], spec->value[AT_STAGES],
                                  spec->value[AT_WARPS]};
  const int w128 = ckjit__attention_wgmma_warps(128), w192 = ckjit__attention_wgmma_warps(192);
  for (int stages = 2; stages <= 3; stages++) {
    all[n_all++] = (attention_tile){128, wide ? 80 : 176, stages, w128};
    all[n_all++] = (attention_tile){128, wide ? 64 : 128, stages, w128};
    if (small) all[n_all++] = (attention_tile){192, 128, stages, w192};
  }
  int n = 0;
  for (int i = 0; i < n_all && n < max; i++) {
    ckjit_spec s = *spec;
    s.value[AT_BM] = all[i].bm, s.value[AT_BN] = all[i].bn;
    s.value[AT_STAGES] = all[i].stages, s.value[AT_WARPS] = all[i].warps;
    int seen = 0;
    for (int j = 0; j < n && !seen; j++) seen = !memcmp(&out[j], &all[i], sizeof all[i]);
    if (seen || ckjit__attention_smem(&s) > (unsigned)max_shared_bytes) continue;
    /* The family's own check (tiles, the kernel's 227 KiB), quietly: a
     * tile it refuses is simply not a candidate. */
    const int quiet = ckjit__error_quiet(1);
    const int ok = ckjit__spec_check(&s) == CKJIT_SUCCESS;
    ckjit__error_quiet(quiet);
    if (ok) out[n++] = all[i];
  }
  return n;
}

/* The tile a candidate run forces (measure() below; NULL otherwise). */
static _Thread_local const attention_tile *forced_tile;

static void apply_tile(ckjit_spec *spec, const attention_tile *t) {
  spec->value[AT_BM] = t->bm, spec->value[AT_BN] = t->bn;
  spec->value[AT_STAGES] = t->stages, spec->value[AT_WARPS] = t->warps;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds a run of the forced tile takes: the best of `trials` trials of
 * `runs` back-to-back calls, one synchronization per trial.  < 0: a call
 * or a synchronization failed. */
static double time_runs(const ckjit_attention_desc *d, void *stream, int runs, int trials) {
  double best = -1;
  for (int t = 0; t < trials; t++) {
    const double t0 = now_s();
    for (int r = 0; r < runs; r++)
      if (ckjit_attention(d, stream)) return -1;
    if (ckjit_synchronize(stream)) return -1;
    const double dt = (now_s() - t0) / runs;
    if (best < 0 || dt < best) best = dt;
  }
  return best;
}

/* Times each candidate on the caller's own buffers: the op only reads Q,
 * K, V, the bias and the slopes and writes O and LSE, which overlap none
 * of them (ckjit.h), so the runs are repeatable and the call's own run,
 * after this, leaves its result.  Per candidate: one run to compile and
 * warm up, one timed run, then the best of three trials of TRIAL_RUNS
 * back-to-back runs (one synchronization per trial, so launch and sync
 * latency do not swamp a kernel of tens of microseconds), or of single
 * runs where one takes over a millisecond (the sync is noise there, and
 * five runs of every candidate of a long call would cost seconds).  The
 * policy's tile goes first, and another must beat the best so far by 3%
 * to replace it: timing noise must not record a slower choice.  Returns 1
 * with the winner in *best. */
enum { TRIAL_RUNS = 5 };
static int measure(const attention_call *call, const attention_tile *cand, int n, void *stream,
                   attention_tile *best) {
  const ckjit_attention_desc *d = call->desc;
  double best_s = 0;
  for (int i = 0; i < n; i++) {
    forced_tile = &cand[i];
    if (ckjit_attention(d, stream) || ckjit_synchronize(stream)) continue;
    const double one = time_runs(d, stream, 1, 1);
    const double s = one < 0 ? -1 : time_runs(d, stream, one < 1e-3 ? TRIAL_RUNS : 1, 3);
    if (s > 0 && (best_s == 0 || s < 0.97 * best_s)) best_s = s, *best = cand[i];
  }
  forced_tile = NULL;
  return best_s > 0;
}

enum { MAX_CANDIDATES = 8 };

void ckjit__attention_tune(ckjit_gpu *gpu, const attention_call *call, ckjit_spec *spec,
                           void *stream) {
  /* Paged tiles keep the policy's key step: whole pages through TMA. */
  if (spec->family != (uint32_t)CKJIT_FAMILY_ATTENTION_WGMMA || call->paged) return;
  if (forced_tile) { /* a candidate's run inside measure() */
    apply_tile(spec, forced_tile);
    return;
  }
  const int mode = ckjit__tune_mode_cached();
  if (mode < 0) return;
  const ckjit_runtime *rt = ckjit__runtime_if_ready(); /* initialized: the call found its GPU */
  const char *dir = rt->disk_enabled && rt->disk.usable ? rt->disk.dir : NULL;
  /* Without recorded winners and without tuning, the call costs no more. */
  if (mode == 0 && !ckjit__tune_any(&record, dir)) return;
  char cls[TUNE_CLASS_LEN];
  if (!ckjit__attention_tune_class(gpu->device.arch, call, cls, sizeof cls)) return;
  attention_tile won;
  const int found = ckjit__attention_tune_lookup(dir, cls, &won);
  /* The candidates (a spec check each) only where a winner is to be
   * checked or measured: not for every call of a class without one. */
  if (!found && mode <= 0) return;
  attention_tile cand[MAX_CANDIDATES];
  const int n = ckjit__attention_tune_candidates(spec, gpu->device.max_shared_bytes, cand,
                                                 MAX_CANDIDATES);
  if (found) {
    /* Only a tile this call can run (an older or edited record, another
     * device's shared memory: the policy's tile stays). */
    for (int i = 0; i < n; i++)
      if (!memcmp(&cand[i], &won, sizeof won)) apply_tile(spec, &won);
    return;
  }
  if (n < 2) return;
  /* A candidate that fails is not the call's error: the call itself runs
   * after, with the winner or the policy's tile. */
  const int quiet = ckjit__error_quiet(1);
  const int measured = measure(call, cand, n, stream, &won);
  ckjit__error_quiet(quiet);
  if (measured) {
    ckjit__attention_tune_store(rt->disk_enabled && rt->disk.writable ? dir : NULL, cls, &won);
    apply_tile(spec, &won);
  }
}
