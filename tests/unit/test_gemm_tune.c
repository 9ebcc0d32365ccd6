/* CKJIT_TUNE's record of measured GEMM configurations (runtime/ops/gemm/tune_record.c):
 * the file's lines are parsed strictly (bad, torn and out-of-range lines
 * are ignored, a later line wins) and new winners are appended. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/ops/gemm/tune.h"
#include "test_util.h"

static char dir[256];

static void write_file(const char *text) {
  char path[300];
  snprintf(path, sizeof path, "%s/gemm-tune.txt", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_file_rules(void **state) {
  (void)state;
  write_file("ckjit-gemm-tune 1 sm_90/bf16/bf16/rr/m12n12k12/b0/v88 2 256 4 1\n"
             "ckjit-gemm-tune 1 sm_90/bf16/bf16/rr/m12n12k12/b0/v88 2 128 6 2\n" /* later wins */
             "ckjit-gemm-tune 2 sm_90/f16/f16/rr/m1n1k1/b0/v88 2 256 4 1\n"       /* version */
             "ckjit-gemm-tune 1 sm_90/f16/f16/rr/m2n2k2/b0/v88 2 256 4 99\n"      /* splits */
             "ckjit-gemm-tune 1 sm_90/f16/f16/rr/m3n3k3/b0/v88 7 256 4 1\n"       /* pipe */
             "ckjit-gemm-tune 1 sm_90/f16/f16/rr/m4n4k4/b0/v88 2 256 4 1 junk\n"  /* trailing */
             "garbage line\n"
             "ckjit-gemm-tune 1 sm_90/f16/f16/rr/m5n5k5/b0/v88 1 2 0 3\n"
             "ckjit-gemm-tune 1 sm_90/f16/f16/rr/m6n6k6/b0/v88 2 25"); /* torn */
  gemm_choice c;
  assert_int_equal(ckjit__gemm_tune_any(dir), 1); /* reads the file: the calls' cheap check */
  assert_int_equal(ckjit__gemm_tune_lookup(dir, "sm_90/bf16/bf16/rr/m12n12k12/b0/v88", &c), 1);
  assert_int_equal(c.pipe, 2);
  assert_int_equal(c.tile, 128);
  assert_int_equal(c.stages, 6);
  assert_int_equal(c.splits, 2);
  const char *ignored[] = {"sm_90/f16/f16/rr/m1n1k1/b0/v88", "sm_90/f16/f16/rr/m2n2k2/b0/v88",
                           "sm_90/f16/f16/rr/m3n3k3/b0/v88", "sm_90/f16/f16/rr/m4n4k4/b0/v88",
                           "sm_90/f16/f16/rr/m6n6k6/b0/v88", "garbage"};
  for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
    assert_int_equal(ckjit__gemm_tune_lookup(dir, ignored[i], &c), 0);
  assert_int_equal(ckjit__gemm_tune_lookup(dir, "sm_90/f16/f16/rr/m5n5k5/b0/v88", &c), 1);
  assert_int_equal(c.pipe, 1);
  assert_int_equal(c.tile, 2);
  assert_int_equal(c.splits, 3);

  /* A new winner is appended as one line and found again. */
  gemm_choice w = {2, 256, 4, 5};
  ckjit__gemm_tune_store(dir, "sm_80/f16/f32/cc/m7n7k7/b1/v88", &w);
  assert_int_equal(ckjit__gemm_tune_lookup(dir, "sm_80/f16/f32/cc/m7n7k7/b1/v88", &c), 1);
  assert_int_equal(c.splits, 5);
  char path[300], line[256], last[256] = "";
  snprintf(path, sizeof path, "%s/gemm-tune.txt", dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  while (fgets(line, sizeof line, f)) snprintf(last, sizeof last, "%s", line);
  fclose(f);
  assert_string_equal(last, "ckjit-gemm-tune 1 sm_80/f16/f32/cc/m7n7k7/b1/v88 2 256 4 5\n");

  /* The 64 x 64 wgmma tile's 14 stages (the most a wgmma spec takes) are
   * recorded; one more is not. */
  gemm_choice deep = {2, 64, 14, 1}, deeper = {2, 64, 15, 1};
  ckjit__gemm_tune_store(dir, "sm_90/bf16/bf16/rr/m6n12k12/b0/v88", &deep);
  assert_int_equal(ckjit__gemm_tune_lookup(dir, "sm_90/bf16/bf16/rr/m6n12k12/b0/v88", &c), 1);
  assert_int_equal(c.stages, 14);
  ckjit__gemm_tune_store(dir, "sm_90/bf16/bf16/rr/m6n6k12/b0/v88", &deeper);
  assert_int_equal(ckjit__gemm_tune_lookup(dir, "sm_90/bf16/bf16/rr/m6n6k12/b0/v88", &c), 0);

  /* Invalid winners and class names with spaces are not recorded. */
  gemm_choice bad = {2, 256, 4, 0};
  ckjit__gemm_tune_store(dir, "sm_90/x", &bad);
  assert_int_equal(ckjit__gemm_tune_lookup(dir, "sm_90/x", &c), 0);
  ckjit__gemm_tune_store(dir, "sm_90 x", &w);
  assert_int_equal(ckjit__gemm_tune_lookup(dir, "sm_90 x", &c), 0);
}

static void test_mode(void **state) {
  (void)state;
  unsetenv("CKJIT_TUNE");
  assert_int_equal(ckjit__gemm_tune_mode(), 0);
  setenv("CKJIT_TUNE", "1", 1);
  assert_int_equal(ckjit__gemm_tune_mode(), 1);
  setenv("CKJIT_TUNE", "0", 1);
  assert_int_equal(ckjit__gemm_tune_mode(), -1);
  unsetenv("CKJIT_TUNE");
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/ckjit-test-tune-XXXXXX");
  if (!mkdtemp(dir)) return 1;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_file_rules), cmocka_unit_test(test_mode)};
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[320];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) rc = rc ? rc : 1;
  return rc;
}
