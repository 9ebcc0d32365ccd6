/* CKJIT_TUNE's record of the GEMM: the configurations measured fastest per
 * shape class (tune.c), in the shared record (runtime/ops/tune_record.h)
 * as its four values, in `<cache dir>/gemm-tune.txt`:
 *   ckjit-gemm-tune 1 <class> <pipe> <tile> <stages> <splits>
 * (splits -1: Stream-K, wgmma only; the class names the arch). */
#include "tune.h"

#include "runtime/ops/tune_record.h"

static gemm_choice from_record(const tune_choice *t) {
  return (gemm_choice){t->value[0], t->value[1], t->value[2], t->value[3]};
}

static tune_choice to_record(const gemm_choice *c) {
  return (tune_choice){{c->pipe, c->tile, c->stages, c->splits}};
}

/* What a line or a store may hold: pipes SIMT..WGMMA (MFMA is not tuned),
 * tiles up to 256 (an mma tile index or a wgmma BN), at most the stages a
 * wgmma spec takes, 1..32 slices or (wgmma) Stream-K.  Whether the
 * combination is one this build makes is tune.c's apply_choice. */
static int valid(const tune_choice *t) {
  const gemm_choice c = from_record(t);
  return c.pipe >= 0 && c.pipe <= 2 && c.tile >= 0 && c.tile <= 256 && c.stages >= 0 &&
         c.stages <= CKJIT_GEMM_WGMMA_MAX_STAGES &&
         ((c.splits >= 1 && c.splits <= 32) || (c.pipe == 2 && c.splits == -1));
}

static tune_record record = TUNE_RECORD_INIT("gemm", valid);

int ckjit__gemm_tune_mode(void) { return ckjit__tune_mode(); }

int ckjit__gemm_tune_any(const char *dir) { return ckjit__tune_any(&record, dir); }

int ckjit__gemm_tune_lookup(const char *dir, const char *cls, gemm_choice *out) {
  tune_choice t;
  if (!ckjit__tune_lookup(&record, dir, cls, &t)) return 0;
  *out = from_record(&t);
  return 1;
}

void ckjit__gemm_tune_store(const char *dir, const char *cls, const gemm_choice *c) {
  const tune_choice t = to_record(c);
  ckjit__tune_store(&record, dir, cls, &t);
}
