/* CKJIT_TUNE's shared record (runtime/ops/tune_record.c) as the attention
 * uses it (runtime/ops/attention/tune.c): attention shape classes stored,
 * looked up and read back by a fresh process, invalid tiles refused, the
 * GEMM's lines still read beside them, each family's file its own; the
 * attention's class strings and candidate tiles; concurrent use (the TSan
 * job's interest).  test_gemm_tune.c keeps the GEMM's file rules.
 *
 * A record reads its file once per process, so the checks that need a
 * fresh reader run this program again as a child (`child` mode). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/ops/attention/attention.h"
#include "runtime/ops/tune_record.h"
#include "test_util.h"
#include "tune_record_gemm.h"

static char *dir;       /* the cache directory of this process's records */
static char self[4096]; /* this program, for the child runs */

static void write_in_dir(const char *d, const char *name, const char *text) {
  char path[4200];
  tu_fmt(path, sizeof path, "%s/%s", d, name);
  assert_int_equal(tu_write_file(path, text, strlen(text)), 0);
}

static int same_tile(attention_tile t, int bm, int bn, int stages, int warps) {
  return t.bm == bm && t.bn == bn && t.stages == stages && t.warps == warps;
}

/* What a fresh process finds: `what` is "attention" or "gemm" (a class's
 * winner, "none" when there is none) or "gemm-any" (whether the GEMM has
 * any winner: its calls' cheap check). */
static void child_lookup(const char *d, const char *what, const char *cls, char *out, size_t len) {
  char cmd[8600];
  tu_fmt(cmd, sizeof cmd, "'%s' child '%s' %s '%s'", self, d, what, cls);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  if (!fgets(out, (int)len, p)) out[0] = '\0';
  assert_int_equal(pclose(p), 0);
  out[strcspn(out, "\n")] = '\0';
}

static int child_main(const char *d, const char *what, const char *cls) {
  if (!strcmp(what, "gemm-any")) return printf("%d\n", gemm_side_any(d)) < 0;
  if (!strcmp(what, "gemm")) {
    int g[4];
    if (!gemm_side_lookup(d, cls, g)) return puts("none") < 0;
    printf("%d %d %d %d\n", g[0], g[1], g[2], g[3]);
    return 0;
  }
  attention_tile t;
  if (!ckjit__attention_tune_lookup(d, cls, &t)) return puts("none") < 0;
  printf("%d %d %d %d\n", t.bm, t.bn, t.stages, t.warps);
  return 0;
}

static const char *const class_128 =
    "sm_90a/bf16/hd128x128/causal/bias-none/alibi0/softcap0/dense/q12k12bh6";
static const char *const class_64 =
    "sm_90a/f16/hd64x64/none/bias-none/alibi0/softcap0/dense/q13k13bh5";

/* The attention's file: strict lines, a later one wins, values the kernel
 * does not take are refused, and the GEMM's file beside it still reads. */
static void test_file_rules(void **state) {
  (void)state;
  char text[4096];
  tu_fmt(text, sizeof text,
         "ckjit-attention-tune 1 %s 128 176 2 12\n"
         "ckjit-attention-tune 1 %s 128 128 3 12\n" /* later wins */
         "ckjit-attention-tune 1 %s 192 128 2 16\n"
         "ckjit-attention-tune 2 c/version 128 128 2 12\n"
         "ckjit-attention-tune 1 c/bm64 64 128 2 8\n"
         "ckjit-attention-tune 1 c/bn96 128 96 2 12\n"
         "ckjit-attention-tune 1 c/stages1 128 128 1 12\n"
         "ckjit-attention-tune 1 c/stages5 128 128 5 12\n"
         "ckjit-attention-tune 1 c/warps 192 128 2 12\n" /* 192 rows take 16 warps */
         "ckjit-attention-tune 1 c/trailing 128 128 2 12 junk\n"
         "ckjit-gemm-tune 1 c/gemm-tag 128 128 2 12\n" /* another family's line */
         "garbage line\n"
         "\n"
         "ckjit-attention-tune 1 c/torn 128 12",
         class_128, class_128, class_64);
  write_in_dir(dir, "attention-tune.txt", text);
  write_in_dir(dir, "gemm-tune.txt",
               "ckjit-gemm-tune 1 sm_90/bf16/bf16/rr/m12n12k12/b0/v88 2 256 4 1\n"
               "ckjit-gemm-tune 1 sm_90/f16/f16/rr/m5n5k5/b0/v88 1 2 0 3\n");

  attention_tile t;
  assert_int_equal(ckjit__attention_tune_lookup(dir, class_128, &t), 1);
  assert_true(same_tile(t, 128, 128, 3, 12));
  assert_int_equal(ckjit__attention_tune_lookup(dir, class_64, &t), 1);
  assert_true(same_tile(t, 192, 128, 2, 16));
  const char *ignored[] = {"c/version", "c/bm64", "c/bn96", "c/stages1", "c/stages5", "c/warps",
                           "c/trailing", "c/gemm-tag", "c/torn", "garbage"};
  for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
    assert_int_equal(ckjit__attention_tune_lookup(dir, ignored[i], &t), 0);

  /* The GEMM's lines, in their own file, read as before; neither family
   * sees the other's classes. */
  int g[4]; /* pipe, tile, stages, splits */
  assert_int_equal(gemm_side_any(dir), 1);
  assert_int_equal(gemm_side_lookup(dir, "sm_90/bf16/bf16/rr/m12n12k12/b0/v88", g), 1);
  assert_true(g[0] == 2 && g[1] == 256 && g[2] == 4 && g[3] == 1);
  assert_int_equal(gemm_side_lookup(dir, "sm_90/f16/f16/rr/m5n5k5/b0/v88", g), 1);
  assert_true(g[0] == 1 && g[1] == 2 && g[2] == 0 && g[3] == 3);
  assert_int_equal(gemm_side_lookup(dir, class_128, g), 0);
  assert_int_equal(ckjit__attention_tune_lookup(dir, "sm_90/bf16/bf16/rr/m12n12k12/b0/v88", &t), 0);
}

/* New winners of both families: one appended line each, in the GEMM's
 * unchanged form and the attention's, found again by a fresh process. */
static void test_store_and_persist(void **state) {
  (void)state;
  const char *fresh = "sm_90a/bf16/hd256x256/none/bias-f32/alibi1/softcap0/varlen/q11k11bh4";
  const attention_tile w = {128, 64, 2, 12};
  ckjit__attention_tune_store(dir, fresh, &w);
  attention_tile t;
  assert_int_equal(ckjit__attention_tune_lookup(dir, fresh, &t), 1);
  assert_true(same_tile(t, 128, 64, 2, 12));
  const int gw[4] = {2, 128, 6, -1}; /* wgmma, BN 128, 6 stages, Stream-K */
  gemm_side_store(dir, "sm_90/f16/f32/cc/m7n7k7/b1/v88", gw);

  char path[4200], expect[512];
  tu_fmt(path, sizeof path, "%s/attention-tune.txt", dir);
  char *text = tu_read_file(path, NULL);
  assert_non_null(text);
  /* The torn last line was closed first, so the new one stands alone. */
  tu_fmt(expect, sizeof expect,
         "ckjit-attention-tune 1 c/torn 128 12\nckjit-attention-tune 1 %s 128 64 2 12\n", fresh);
  assert_non_null(strstr(text, expect));
  free(text);
  tu_fmt(path, sizeof path, "%s/gemm-tune.txt", dir);
  text = tu_read_file(path, NULL);
  assert_non_null(text);
  assert_non_null(strstr(text, "\nckjit-gemm-tune 1 sm_90/f16/f32/cc/m7n7k7/b1/v88 2 128 6 -1\n"));
  free(text);

  char got[256];
  child_lookup(dir, "attention", fresh, got, sizeof got);
  assert_string_equal(got, "128 64 2 12");
  child_lookup(dir, "attention", class_128, got, sizeof got);
  assert_string_equal(got, "128 128 3 12");
  child_lookup(dir, "gemm", "sm_90/f16/f32/cc/m7n7k7/b1/v88", got, sizeof got);
  assert_string_equal(got, "2 128 6 -1");
  child_lookup(dir, "gemm", "sm_90/bf16/bf16/rr/m12n12k12/b0/v88", got, sizeof got);
  assert_string_equal(got, "2 256 4 1");
  child_lookup(dir, "attention", "c/bm64", got, sizeof got);
  assert_string_equal(got, "none");

  /* Invalid tiles and class names that would not read back are not
   * recorded. */
  const attention_tile bad[] = {{64, 128, 2, 8}, {128, 96, 2, 12}, {128, 128, 1, 12},
                                {128, 128, 5, 12}, {192, 128, 2, 12}, {128, 176, 2, 16}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ckjit__attention_tune_store(dir, "c/bad", &bad[i]);
    assert_int_equal(ckjit__attention_tune_lookup(dir, "c/bad", &t), 0);
  }
  const char *bad_names[] = {"", "c x", "c\tx", "c\nx"};
  for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
    ckjit__attention_tune_store(dir, bad_names[i], &w);
    assert_int_equal(ckjit__attention_tune_lookup(dir, bad_names[i], &t), 0);
  }
  char long_name[TUNE_CLASS_LEN + 1];
  memset(long_name, 'x', TUNE_CLASS_LEN);
  long_name[TUNE_CLASS_LEN] = '\0';
  ckjit__attention_tune_store(dir, long_name, &w);
  assert_int_equal(ckjit__attention_tune_lookup(dir, long_name, &t), 0);
  long_name[TUNE_CLASS_LEN - 1] = '\0'; /* 127 characters: the longest kept */
  ckjit__attention_tune_store(dir, long_name, &w);
  child_lookup(dir, "attention", long_name, got, sizeof got);
  assert_string_equal(got, "128 64 2 12");
}

/* Each family's cheap "any winner?" check is its own: a directory with
 * only attention winners leaves the GEMM's calls without a lookup. */
static void test_families_apart(void **state) {
  (void)state;
  char *only = tu_mkdtemp("tune-only");
  assert_non_null(only);
  write_in_dir(only, "attention-tune.txt", "ckjit-attention-tune 1 c/x 128 128 2 12\n");
  char got[64];
  child_lookup(only, "gemm-any", "-", got, sizeof got);
  assert_string_equal(got, "0");
  child_lookup(only, "attention", "c/x", got, sizeof got);
  assert_string_equal(got, "128 128 2 12");
  tu_rm_rf(only);
  free(only);
}

/* The attention's shape class: every field named, lengths in log2 buckets
 * rounded up. */
static void test_class(void **state) {
  (void)state;
  ckjit_attention_desc d;
  ckjit_attention_desc_init(&d);
  d.batch = 4, d.num_heads_q = d.num_heads_kv = 16;
  d.seqlen_q = d.seqlen_k = 4096;
  d.head_dim_qk = d.head_dim_v = 128;
  attention_call c = {.desc = &d, .mask = MASK_CAUSAL, .bias = BIAS_NONE};
  char cls[TUNE_CLASS_LEN];
  assert_int_equal(ckjit__attention_tune_class("sm_90a", &c, cls, sizeof cls), 1);
  assert_string_equal(cls, class_128);

  /* One past a power of two is the next bucket; a zero length is bucket 0. */
  d.dtype = CKJIT_F16, d.seqlen_q = 4097, d.seqlen_k = 0, d.batch = 3, d.num_heads_q = 3;
  d.head_dim_qk = 192;
  static const float slopes[1];
  static const int32_t cu[2];
  d.alibi_slopes = slopes, d.softcap = 30.0f, d.cu_seqlens_q = d.cu_seqlens_k = cu;
  c.mask = MASK_WINDOW, c.bias = BIAS_DTYPE;
  assert_int_equal(ckjit__attention_tune_class("sm_90", &c, cls, sizeof cls), 1);
  assert_string_equal(cls, "sm_90/f16/hd192x128/window/bias-dtype/alibi1/softcap1/varlen/q13k0bh4");

  /* A class that would not fit a record line is no class. */
  char arch[80];
  memset(arch, 'a', sizeof arch - 1);
  arch[sizeof arch - 1] = '\0';
  assert_int_equal(ckjit__attention_tune_class(arch, &c, cls, sizeof cls), 0);
  assert_int_equal(ckjit__attention_tune_class("sm_90", &c, cls, 16), 0);
}

/* The wgmma spec the pipeline table picks for these head dims and mask. */
static ckjit_spec wgmma_spec(int hd, int hdv, int mask) {
  ckjit_spec s;
  memset(&s, 0, sizeof s);
  s.family = (uint32_t)CKJIT_FAMILY_ATTENTION_WGMMA;
  s.value[AT_DTYPE] = ckjit__dtype_param_value(CKJIT_BF16);
  s.value[AT_HDIM] = hd, s.value[AT_HDIM_V] = hdv, s.value[AT_MASK] = mask;
  const attention_tile t = ckjit__attention_tile(ATTENTION_WGMMA, hd, hdv, mask, 1, 0, 0);
  s.value[AT_BM] = t.bm, s.value[AT_BN] = t.bn, s.value[AT_STAGES] = t.stages;
  s.value[AT_WARPS] = t.warps;
  return s;
}

/* Checks the candidates of (hd, hdv, mask) on `smem` bytes against
 * `expect` (bm, bn, stages per tile, the policy's first); each fits. */
static void check_candidates(int hd, int hdv, int mask, int smem, const int (*expect)[3], int n) {
  const ckjit_spec s = wgmma_spec(hd, hdv, mask);
  attention_tile got[8];
  const int count = ckjit__attention_tune_candidates(&s, smem, got, 8);
  if (count != n)
    fail_msg("hd %d/%d mask %d smem %d: %d candidates, expected %d", hd, hdv, mask, smem, count, n);
  for (int i = 0; i < n; i++) {
    if (!same_tile(got[i], expect[i][0], expect[i][1], expect[i][2], 4 * (expect[i][0] / 64 + 1)))
      fail_msg("hd %d/%d mask %d: candidate %d is %d x %d x %d (warps %d), expected %d x %d x %d",
               hd, hdv, mask, i, got[i].bm, got[i].bn, got[i].stages, got[i].warps, expect[i][0],
               expect[i][1], expect[i][2]);
    ckjit_spec c = s;
    c.value[AT_BM] = got[i].bm, c.value[AT_BN] = got[i].bn, c.value[AT_STAGES] = got[i].stages;
    c.value[AT_WARPS] = got[i].warps;
    assert_true(ckjit__attention_smem(&c) <= (unsigned)smem);
  }
}

/* The candidate tiles per head dims on sm_90's 227 KiB, and fewer where
 * the shared memory is smaller. */
static void test_candidates(void **state) {
  (void)state;
  const int h100 = 227 * 1024;
  /* Head dim 128: 176 keys x 3 stages (297 KiB) does not fit. */
  static const int d128[][3] = {{128, 176, 2}, {128, 128, 2}, {128, 128, 3}};
  check_candidates(128, 128, MASK_NONE, h100, d128, 3);
  static const int d128_causal[][3] = {{128, 128, 2}, {128, 176, 2}, {128, 128, 3}};
  check_candidates(128, 128, MASK_CAUSAL, h100, d128_causal, 3);
  check_candidates(96, 96, MASK_NONE, h100, d128, 3); /* 96 columns take 128's panels */
  /* Head dim 64: every tile fits, 192 rows too. */
  static const int d64[][3] = {{192, 128, 2}, {128, 176, 2}, {128, 128, 2},
                               {128, 176, 3}, {128, 128, 3}, {192, 128, 3}};
  check_candidates(64, 64, MASK_NONE, h100, d64, 6);
  /* Beyond 128: 80 or 64 keys; MLA's 192 / 128 takes three stages. */
  static const int d192_128[][3] = {{128, 80, 2}, {128, 64, 2}, {128, 80, 3}, {128, 64, 3}};
  check_candidates(192, 128, MASK_CAUSAL, h100, d192_128, 4);
  static const int d192[][3] = {{128, 80, 2}, {128, 64, 2}, {128, 64, 3}};
  check_candidates(192, 192, MASK_NONE, h100, d192, 3);
  static const int d256[][3] = {{128, 80, 2}, {128, 64, 2}};
  check_candidates(256, 256, MASK_CAUSAL, h100, d256, 2);
  /* A smaller budget keeps only what fits (with O's 2 KiB a consumer warp:
   * 192 x 128 x 2 takes 113 KiB, 128 x 128 x 2 97, 128 x 176 x 2 121). */
  static const int d64_small[][3] = {{192, 128, 2}, {128, 128, 2}};
  check_candidates(64, 64, MASK_NONE, 120 * 1024, d64_small, 2);
  check_candidates(256, 256, MASK_NONE, 64 * 1024, NULL, 0);
}

/* Threads storing and looking up both families at once (under TSan, the
 * record's lock and its lock-free check). */
enum { THREADS = 4, PER_THREAD = 40 };
static void *store_and_find(void *arg) {
  const int id = (int)(intptr_t)arg;
  for (int i = 0; i < PER_THREAD; i++) {
    char cls[64];
    tu_fmt(cls, sizeof cls, "t%d/c%d", id, i);
    const attention_tile w = {128, i % 2 ? 176 : 128, 2 + i % 2, 12};
    const int g[4] = {2, 128, 6, 1 + i % 4};
    ckjit__attention_tune_store(i % 3 ? dir : NULL, cls, &w);
    gemm_side_store(i % 3 ? dir : NULL, cls, g);
    attention_tile t;
    int gc[4];
    if (!gemm_side_any(dir) || !ckjit__attention_tune_lookup(dir, cls, &t) ||
        !same_tile(t, w.bm, w.bn, w.stages, w.warps) || !gemm_side_lookup(dir, cls, gc) ||
        gc[3] != g[3])
      return (void *)1;
  }
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, store_and_find, (void *)(intptr_t)i), 0);
  for (int i = 0; i < THREADS; i++) {
    void *rc;
    assert_int_equal(pthread_join(th[i], &rc), 0);
    assert_null(rc);
  }
  /* What went to the file (two stores in three) reads back elsewhere. */
  char got[64];
  child_lookup(dir, "attention", "t3/c1", got, sizeof got);
  assert_string_equal(got, "128 176 3 12");
  child_lookup(dir, "attention", "t3/c3", got, sizeof got);
  assert_string_equal(got, "none"); /* stored without a directory: memory only */
}

/* The calls read CKJIT_TUNE once: every family sees the same setting. */
static void test_mode(void **state) {
  (void)state;
  setenv("CKJIT_TUNE", "1", 1);
  assert_int_equal(ckjit__tune_mode(), 1);
  assert_int_equal(ckjit__tune_mode_cached(), 1);
  setenv("CKJIT_TUNE", "0", 1);
  assert_int_equal(ckjit__tune_mode(), -1);
  assert_int_equal(gemm_side_mode(), -1);
  assert_int_equal(ckjit__tune_mode_cached(), 1);
  setenv("CKJIT_TUNE", "", 1);
  assert_int_equal(ckjit__tune_mode(), 0);
  unsetenv("CKJIT_TUNE");
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "child")) return child_main(argv[2], argv[3], argv[4]);
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  dir = tu_mkdtemp("test-tune-record");
  if (!dir) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_file_rules), cmocka_unit_test(test_store_and_persist),
      cmocka_unit_test(test_families_apart), cmocka_unit_test(test_class),
      cmocka_unit_test(test_candidates), cmocka_unit_test(test_threads),
      cmocka_unit_test(test_mode)};
  const int rc = cmocka_run_group_tests(tests, NULL, NULL);
  tu_rm_rf(dir);
  free(dir);
  return rc;
}
