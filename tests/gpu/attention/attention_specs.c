/* The kernel specs test_attention_gpu requests on an H100, computed by the
 * library's own choice (ckjit__attention_validate, then
 * ckjit__attention_pick for the automatic choice and each forced
 * pipeline, on a device described by hand: wgmma and mma.sync, 227 KiB of
 * shared memory), for the descriptors the GPU test builds
 * (attention_layout.c, at fake addresses).  So the list follows the tile
 * policy and the mask narrowing of runtime/ops/attention/pipelines.c and
 * validate.c instead of copying them.
 *
 *   test_attention_specs FILE            every line must be in FILE
 *                                        (bench/gpu-test-specs.txt, which
 *                                        scripts/gpu-check.sh prewarms before
 *                                        the GPU tests); the missing ones are
 *                                        printed, exit 1
 *   test_attention_specs --print [ARCH]  the lines, sorted (default sm_90)
 *
 * Every spec must also pass its family's check (a spec the policy makes
 * but the family refuses would fail to compile on the GPU).  The large
 * problems (attention_large.c) and the API checks use bf16, head dim 128,
 * no mask or causal on tensor-core layouts: two descriptors of those
 * kinds are added here so their specs are listed whatever the cases do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_gpu.h"
#include "runtime/backend.h"
#include "runtime/ops/attention/attention.h"
#include "runtime/record.h"
#include "runtime/runtime.h"

typedef struct lines {
  char **v;
  size_t n, cap;
} lines;

static void push(lines *l, const char *s) {
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->v[i], s)) return;
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->v = realloc(l->v, l->cap * sizeof *l->v);
    if (!l->v) abort();
  }
  l->v[l->n] = strdup(s);
  if (!l->v[l->n++]) abort();
}

static void free_lines(lines *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
}

static int by_text(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The specs of case c (each pipeline that takes it) into out; returns the
 * problems found (printed). */
static int case_specs(const ckjit_gpu *gpu, const att_case *c, const char *arch, lines *out) {
  att_plan pl;
  plan_case(c, &pl);
  void *base[NBUF];
  for (int i = 0; i < NBUF; i++) base[i] = (void *)(uintptr_t)(0x100000000ull * (uint64_t)(i + 1));
  ckjit_attention_desc d;
  plan_desc(c, &pl, base, &d);
  attention_call call;
  if (ckjit__attention_validate(&d, NULL, &call) != CKJIT_SUCCESS) {
    printf("FAIL [%s]: the descriptor is refused: %s\n", c->name, ckjit_last_error());
    return 1;
  }
  if (call.empty) return 0;
  int bad = 0;
  for (int pipe = 0; pipe < PIPE_COUNT; pipe++) {
    ckjit_spec spec;
    pipe_select(pipe);
    const ckjit_status st = ckjit__attention_pick(gpu, &call, &spec);
    pipe_select(PIPE_AUTO);
    if (st == CKJIT_ERROR_UNSUPPORTED) continue; /* the device or the layout: no kernel */
    char line[1024];
    if (st != CKJIT_SUCCESS) {
      printf("FAIL [%s] on %s: %s\n", c->name, pipe_names[pipe], ckjit_last_error());
      bad++;
    } else if (ckjit__spec_check(&spec) != CKJIT_SUCCESS) {
      printf("FAIL [%s] on %s: the pipeline's spec fails its family's check: %s\n", c->name, pipe_names[pipe],
             ckjit_last_error());
      bad++;
    } else if (ckjit__record_line(&spec, arch, line, sizeof line) < 0) {
      printf("FAIL [%s] on %s: no record line\n", c->name, pipe_names[pipe]);
      bad++;
    } else {
      line[strcspn(line, "\n")] = '\0';
      push(out, line);
    }
  }
  return bad;
}

/* Descriptors of the kinds the large problems and the API checks use. */
static void other_calls(att_case out[2]) {
  memset(out, 0, 2 * sizeof *out);
  for (int i = 0; i < 2; i++) {
    att_case *c = &out[i];
    snprintf(c->name, sizeof c->name, "large / API, %s", i ? "causal" : "no mask");
    c->dt = CKJIT_BF16, c->batch = 2, c->hq = 4, c->hk = 2, c->sq = 37, c->sk = 300, c->dqk = c->dv = 128;
    c->layout = LAY_BSHD, c->mask = i ? CKJIT_ATTENTION_MASK_CAUSAL : CKJIT_ATTENTION_MASK_NONE;
    c->wl = c->wr = -1, c->lse = 1;
  }
}

static int read_lines(const char *path, lines *out) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char buf[2048];
  while (fgets(buf, sizeof buf, f)) {
    buf[strcspn(buf, "\r\n")] = '\0';
    if (buf[0]) push(out, buf);
  }
  fclose(f);
  return 0;
}

int main(int argc, char **argv) {
  const int print = argc > 1 && !strcmp(argv[1], "--print");
  if (argc < 2 || (!print && argc != 2)) {
    fprintf(stderr, "usage: %s SPEC_FILE | --print [ARCH]\n", argv[0]);
    return 2;
  }
  const char *arch = print && argc > 2 ? argv[2] : "sm_90";
  setenv("CKJIT_DEVICE_CHECKS", "0", 1); /* the fake addresses are never looked up */
  ckjit_gpu gpu; /* an H100 */
  memset(&gpu, 0, sizeof gpu);
  gpu.device.matrix_units = CKJIT_MATRIX_MMA_SYNC | CKJIT_MATRIX_WGMMA; /* an H100 */
  gpu.device.max_shared_bytes = 227 * 1024;
  lines need = {0};
  int bad = 0;
  build_cases();
  for (size_t i = 0; i < g_ncases; i++) bad += case_specs(&gpu, &g_cases[i], arch, &need);
  att_case other[2];
  other_calls(other);
  for (int i = 0; i < 2; i++) bad += case_specs(&gpu, &other[i], arch, &need);
  qsort(need.v, need.n, sizeof *need.v, by_text);
  lines have = {0};
  size_t missing = 0;
  if (print) {
    for (size_t i = 0; i < need.n; i++) printf("%s\n", need.v[i]);
  } else if (read_lines(argv[1], &have)) {
    printf("FAIL: cannot read %s\n", argv[1]);
    bad++;
  } else {
    for (size_t i = 0; i < need.n; i++) {
      size_t j = 0;
      while (j < have.n && strcmp(have.v[j], need.v[i])) j++;
      if (j == have.n) {
        if (!missing++) printf("FAIL: %s lacks specs the attention GPU test requests (add them; "
                               "`test_attention_specs --print` lists all):\n", argv[1]);
        printf("%s\n", need.v[i]);
      }
    }
    printf("attention specs: %zu needed on %s, %zu missing from %s\n", need.n, arch, missing, argv[1]);
  }
  free_lines(&need);
  free_lines(&have);
  free(g_cases);
  ckjit_shutdown();
  return missing || bad ? 1 : 0;
}
