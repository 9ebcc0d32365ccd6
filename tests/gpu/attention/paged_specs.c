/* The kernel specs test_paged_gpu requests on an H100, from the library's
 * own choice (ckjit__paged_attention_call and ckjit__paged_append_plan,
 * the front-ends' own checks, then ckjit__attention_pick for the automatic choice and each forced
 * pipeline of paged_cases.c's table, on a device described by hand: wgmma
 * and mma.sync, 227 KiB of shared memory), for the descriptors the GPU test
 * builds (paged_device.c, at fake addresses): every case, the bad tables'
 * and the large pool's problems.  A CPU test:
 *
 *   test_paged_specs                 every pipeline the H100 must run
 *                                    (pg_must_run) takes every f16 / bf16
 *                                    case, the tensor-core ones refuse f32,
 *                                    those without fp8 pages (wgmma, mma,
 *                                    mfma) refuse the fp8 cases,
 *                                    every spec passes its family's check,
 *                                    and, where NVRTC is present, compiles
 *                                    for sm_90 (so a paged spec outside the
 *                                    default set that does not compile shows
 *                                    here, not on the GPU machine)
 *   test_paged_specs --print [ARCH]  the record lines, sorted (default
 *                                    sm_90), for `ckjit-prewarm --manifest`
 *
 * One thing is restated here from the library: attention_combine's spec
 * (decode.c: the dtype and head_dim_v), which decode runs when it splits
 * the keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paged_gpu.h"
#include "runtime/backend.h"
#include "runtime/ops/attention/attention.h"
#include "runtime/ops/op_frame.h"
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

static int by_text(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The spec's record line (newline cut) into out; returns the problems (printed). */
static int add_spec(const ckjit_spec *spec, const char *arch, const char *what, lines *out) {
  char line[1024];
  if (ckjit__spec_check(spec) != CKJIT_SUCCESS) {
    printf("FAIL %s: the spec fails its family's check: %s\n", what, ckjit_last_error());
    return 1;
  }
  if (ckjit__record_line(spec, arch, line, sizeof line) < 0) {
    printf("FAIL %s: no record line\n", what);
    return 1;
  }
  line[strcspn(line, "\n")] = '\0';
  push(out, line);
  return 0;
}

static int add_text(const char *text, const char *arch, const char *what, lines *out) {
  ckjit_spec spec;
  if (ckjit__spec_parse(text, &spec) != CKJIT_SUCCESS) {
    printf("FAIL %s: %s does not parse: %s\n", what, text, ckjit_last_error());
    return 1;
  }
  return add_spec(&spec, arch, what, out);
}

/* A problem's buffers at fake, well-aligned device addresses (tables all at one). */
static void fake_dev(pg_dev *v, pg_problem *p) {
  memset(v, 0, sizeof *v);
  v->p = p;
  gt_buf *bufs[] = {&v->pool[0], &v->pool[1], &v->q, &v->o, &v->lse, &v->newb, &v->tab, &v->err, &v->scale};
  const ckjit_dtype dt = p->c->dt, pdt = pg_pool_dtype(p->c);
  const ckjit_dtype dts[] = {pdt, pdt, dt, dt, CKJIT_F32, dt, CKJIT_I32, CKJIT_I32, CKJIT_F32};
  for (int i = 0; i < 9; i++) {
    if ((i < 2 && !p->pool_elems[i]) || (bufs[i] == &v->lse && !p->c->lse) || (bufs[i] == &v->scale && !p->c->fp8))
      continue;
    bufs[i]->dev = (void *)(uintptr_t)(0x100000000ull * (uint64_t)(i + 1));
    bufs[i]->dt = dts[i];
  }
}

/* The specs of case c on every pipeline into out; returns the problems found. */
static int case_specs(const ckjit_gpu *gpu, const pg_case *c, unsigned required, const char *arch, lines *out) {
  pg_problem p;
  if (pg_problem_plan(&p, c, 1)) {
    printf("FAIL [%s]: host memory\n", c->name);
    pg_problem_free(&p);
    return 1;
  }
  pg_dev v;
  fake_dev(&v, &p);
  int bad = 0;
  char what[256];
  ckjit_paged_attention_desc pd;
  ckjit_attention_desc d;
  attention_call call;
  for (int csr = 1; csr >= 0; csr--) { /* both forms validate; the padded call's specs are kept */
    pg_dev_desc(&v, csr, &pd);
    if (ckjit__paged_attention_call(&pd, NULL, &d, &call) != CKJIT_SUCCESS) {
      printf("FAIL [%s] (%s tables): the descriptor is refused: %s\n", c->name, csr ? "CSR" : "padded", ckjit_last_error());
      pg_problem_free(&p);
      return 1;
    }
  }
  if (call.kv8 != c->fp8) {
    printf("FAIL [%s]: the descriptor's kv.page_dtype is not the case's\n", c->name);
    bad++;
  }
  for (int pipe = 0; pipe < pg_npipes && !call.empty; pipe++) {
    ckjit_spec spec;
    pg_pipe_select(pipe);
    const ckjit_status st = ckjit__attention_pick(gpu, &call, &spec);
    pg_pipe_select(0);
    snprintf(what, sizeof what, "[%s] on %s", c->name, pg_pipes[pipe].name);
    if (pg_must_refuse(pipe, c)) {
      if (st != CKJIT_ERROR_UNSUPPORTED)
        printf("FAIL %s: the pipeline takes %s\n", what, c->fp8 ? "fp8 pages" : "f32 (a tensor-core pipeline)"), bad++;
      continue;
    }
    if (st == CKJIT_ERROR_UNSUPPORTED && !pg_must_run(pipe, required, p.max_q)) continue;
    if (st != CKJIT_SUCCESS) {
      printf("FAIL %s: %s (the H100 must run it)\n", what, ckjit_last_error());
      bad++;
      continue;
    }
    if (spec.value[AT_KV8] != c->fp8) printf("FAIL %s: a spec with kv8=%d\n", what, spec.value[AT_KV8]), bad++;
    bad += add_spec(&spec, arch, what, out);
    if (spec.family == CKJIT_FAMILY_ATTENTION_DECODE) { /* its splits' sum */
      char text[128];
      snprintf(text, sizeof text, "attention_combine:dtype=%s,hdim_v=%lld", ckjit_dtype_name(c->dt), LL(c->d));
      bad += add_text(text, arch, what, out);
    }
  }
  if (c->append) {
    ckjit_paged_kv_append_desc a;
    pg_dev_append_desc(&v, 0, &a);
    ckjit_launch_plan plan;
    ckjit_paged_append_args args;
    int empty = 0;
    snprintf(what, sizeof what, "[%s] append", c->name);
    if (ckjit__paged_append_plan(&a, NULL, &empty, &plan, &args) != CKJIT_SUCCESS || empty) {
      printf("FAIL %s: the descriptor is refused or empty: %s\n", what, ckjit_last_error());
      bad++;
    } else {
      bad += add_spec(&plan.spec, arch, what, out);
    }
  }
  pg_problem_free(&p);
  return bad;
}

/* Compiles every line's spec for its arch (NVRTC missing: a SKIP line). */
static int compile_all(const lines *l) {
  int bad = 0;
  for (size_t i = 0; i < l->n; i++) {
    char arch[64], spec[900];
    if (sscanf(l->v[i], "ckjit-spec 1 %63s %899s", arch, spec) != 2) {
      printf("FAIL: cannot read the line %s\n", l->v[i]);
      bad++;
      continue;
    }
    ckjit_compile_result r;
    const ckjit_status st = ckjit_compile_spec(spec, arch, &r);
    if (st == CKJIT_ERROR_BACKEND_UNAVAILABLE && i == 0) {
      printf("SKIP compiling the specs: no compiler for %s (%s)\n", arch, ckjit_last_error());
      return 0;
    }
    if (st != CKJIT_SUCCESS) {
      printf("FAIL: %s for %s: %s: %s\n", spec, arch, ckjit_status_string(st), ckjit_last_error());
      bad++;
    }
  }
  if (!bad) printf("paged specs: all %zu compiled\n", l->n);
  return bad;
}

int main(int argc, char **argv) {
  const int print = argc > 1 && !strcmp(argv[1], "--print");
  if (argc > 1 && !print) {
    fprintf(stderr, "usage: %s [--print [ARCH]]\n", argv[0]);
    return 2;
  }
  const char *arch = print && argc > 2 ? argv[2] : "sm_90";
  setenv("CKJIT_DEVICE_CHECKS", "0", 1); /* the fake addresses are never looked up */
  char *tmp = NULL;
  if (!print) { /* the compiles go to a cache of their own */
    tmp = tu_mkdtemp("paged-specs");
    if (!tmp) return 1;
    setenv("CKJIT_CACHE_DIR", tmp, 1);
  }
  ckjit_gpu gpu; /* an H100 */
  memset(&gpu, 0, sizeof gpu);
  gpu.device.matrix_units = CKJIT_MATRIX_MMA_SYNC | CKJIT_MATRIX_WGMMA; /* an H100 */
  gpu.device.max_shared_bytes = 227 * 1024;
  gpu.device.multiprocessors = 132;
  ckjit_device_info h100;
  memset(&h100, 0, sizeof h100);
  snprintf(h100.device_arch, sizeof h100.device_arch, "sm_90");
  const unsigned required = pg_pipes_required(&h100);
  lines need = {0};
  int bad = 0;
  pg_build_cases();
  for (size_t i = 0; i < pg_ncases; i++) bad += case_specs(&gpu, &pg_cases[i], required, arch, &need);
  const pg_case others[3] = {pg_bad_tables_case(0), pg_bad_tables_case(1), pg_large_case()};
  for (int i = 0; i < 3; i++) bad += case_specs(&gpu, &others[i], required, arch, &need);
  qsort(need.v, need.n, sizeof *need.v, by_text);
  if (print) {
    for (size_t i = 0; i < need.n; i++) printf("%s\n", need.v[i]);
  } else {
    printf("paged specs: %zu needed on %s (%d problems)\n", need.n, arch, bad);
    if (!bad) bad += compile_all(&need);
  }
  for (size_t i = 0; i < need.n; i++) free(need.v[i]);
  free(need.v);
  pg_free_cases();
  ckjit_shutdown();
  if (tmp) tu_rm_rf(tmp);
  free(tmp);
  return bad ? 1 : 0;
}
