/* ckjit__key_compute / _hex / _parse / _equal. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/key.h"

/* A key input whose strings live in writable storage, so each test can
 * mutate one field. */
typedef struct input {
  char library_version[32];
  char backend[32];
  char compiler[64];
  char arch[64];
  char opt[3][64];
  const char *opts[3];
  char src[256];
  char hname[3][64];
  char hsrc[3][128];
  const char *hnames[3];
  const char *hsrcs[3];
  ckjit_key_input in;
} input;

static void input_init(input *x) {
  memset(x, 0, sizeof *x);
  strcpy(x->library_version, "0.1.0");
  strcpy(x->backend, "cuda");
  strcpy(x->compiler, "nvrtc 13.0 /usr/local/cuda/lib64/libnvrtc.so.13");
  strcpy(x->arch, "sm_90");
  strcpy(x->opt[0], "--gpu-architecture=sm_90");
  strcpy(x->opt[1], "-std=c++17");
  strcpy(x->opt[2], "-default-device");
  strcpy(x->src, "extern \"C\" __global__ void k(float *x) { x[0] = 1.0f; }\n");
  strcpy(x->hname[0], "ckjit_prelude.h");
  strcpy(x->hname[1], "other.h");
  strcpy(x->hname[2], "third.h");
  strcpy(x->hsrc[0], "#pragma once\ntypedef int ckjit_int;\n");
  strcpy(x->hsrc[1], "#pragma once\n#define X 1\n");
  strcpy(x->hsrc[2], "#pragma once\n");
  for (int i = 0; i < 3; i++) {
    x->opts[i] = x->opt[i];
    x->hnames[i] = x->hname[i];
    x->hsrcs[i] = x->hsrc[i];
  }
  x->in.format_version = CKJIT_CACHE_FORMAT_VERSION;
  x->in.library_version = x->library_version;
  x->in.backend = x->backend;
  x->in.compiler = x->compiler;
  x->in.arch = x->arch;
  x->in.n_options = 2;
  x->in.options = x->opts;
  x->in.source = x->src;
  x->in.source_len = strlen(x->src);
  x->in.n_headers = 2;
  x->in.header_names = x->hnames;
  x->in.header_sources = x->hsrcs;
}

static ckjit_key key_of(const input *x) {
  ckjit_key k;
  memset(&k, 0xA5, sizeof k);
  assert_int_equal(ckjit__key_compute(&x->in, &k), 0);
  return k;
}

static ckjit_key base_key(void) {
  input x;
  input_init(&x);
  return key_of(&x);
}

/* --- every mutation below must give a key different from the base key and
 * from every other mutation. */
#define MAX_KEYS 128
static ckjit_key g_keys[MAX_KEYS];
static const char *g_names[MAX_KEYS];
static int g_nkeys;

static void record(const char *name, const input *x) {
  assert_true(g_nkeys < MAX_KEYS);
  g_keys[g_nkeys] = key_of(x);
  g_names[g_nkeys] = name;
  g_nkeys++;
}

static void test_every_field_matters(void **state) {
  (void)state;
  input x;
  g_nkeys = 0;

  input_init(&x);
  record("base", &x);

  input_init(&x); x.in.format_version = CKJIT_CACHE_FORMAT_VERSION + 1; record("format_version", &x);
  input_init(&x); x.in.format_version = 0; record("format_version 0", &x);
  input_init(&x); strcpy(x.library_version, "0.1.1"); record("library_version", &x);
  input_init(&x); strcpy(x.library_version, ""); record("library_version empty", &x);
  input_init(&x); strcpy(x.backend, "hip"); record("backend", &x);
  input_init(&x); strcpy(x.compiler, "nvrtc 13.1 /usr/local/cuda/lib64/libnvrtc.so.13"); record("compiler", &x);
  input_init(&x); strcpy(x.arch, "sm_90a"); record("arch", &x);
  input_init(&x); strcpy(x.arch, "sm_80"); record("arch 2", &x);
  input_init(&x); strcpy(x.opt[0], "--gpu-architecture=sm_80"); record("option 0", &x);
  input_init(&x); strcpy(x.opt[1], "-std=c++20"); record("option 1", &x);
  input_init(&x); x.in.n_options = 3; record("option count 3", &x);
  input_init(&x); x.in.n_options = 1; record("option count 1", &x);
  input_init(&x); x.in.n_options = 0; record("option count 0", &x);
  input_init(&x); x.opts[0] = x.opt[1]; x.opts[1] = x.opt[0]; record("option order", &x);
  input_init(&x); x.src[0] = 'E'; record("source first byte", &x);
  input_init(&x); x.src[x.in.source_len - 1] = ' '; record("source last byte", &x);
  input_init(&x); x.in.source_len -= 1; record("source length", &x);
  input_init(&x); x.in.source_len = 0; record("source empty", &x);
  input_init(&x); strcpy(x.hname[0], "ckjit_prelude2.h"); record("header name 0", &x);
  input_init(&x); strcpy(x.hname[1], "Other.h"); record("header name 1", &x);
  input_init(&x); x.hsrc[0][0] = '/'; record("header content 0", &x);
  input_init(&x); strcat(x.hsrc[1], " "); record("header content 1", &x);
  input_init(&x); x.in.n_headers = 3; record("header count 3", &x);
  input_init(&x); x.in.n_headers = 1; record("header count 1", &x);
  input_init(&x); x.in.n_headers = 0; record("header count 0", &x);
  input_init(&x);
  x.hnames[0] = x.hname[1]; x.hnames[1] = x.hname[0];
  x.hsrcs[0] = x.hsrc[1]; x.hsrcs[1] = x.hsrc[0];
  record("header order", &x);
  input_init(&x); x.hsrcs[0] = x.hsrc[1]; x.hsrcs[1] = x.hsrc[0]; record("header contents swapped", &x);

  /* Bytes moved between adjacent fields: the length prefixes must tell. */
  input_init(&x); strcpy(x.backend, "cud"); strcpy(x.compiler, "anvrtc 13.0 /usr/local/cuda/lib64/libnvrtc.so.13");
  record("backend|compiler shift", &x);
  input_init(&x); strcpy(x.library_version, "0.1.0c"); strcpy(x.backend, "uda"); record("version|backend shift", &x);
  input_init(&x); strcpy(x.compiler, "nvrtc 13.0 /usr/local/cuda/lib64/libnvrtc.so.13s");
  strcpy(x.arch, "m_90"); record("compiler|arch shift", &x);
  input_init(&x); strcpy(x.opt[0], "--gpu-architecture=sm_90-"); strcpy(x.opt[1], "std=c++17"); record("option|option shift", &x);
  input_init(&x); strcpy(x.opt[1], "-std=c++17e"); strcpy(x.src, "xtern \"C\" __global__ void k(float *x) { x[0] = 1.0f; }\n");
  x.in.source_len = strlen(x.src); record("option|source shift", &x);
  input_init(&x); strcpy(x.hname[0], "ckjit_prelude.h#"); strcpy(x.hsrc[0], "pragma once\ntypedef int ckjit_int;\n");
  record("header name|content shift", &x);
  input_init(&x); strcat(x.hsrc[0], "o"); strcpy(x.hname[1], "ther.h"); record("header content|next name shift", &x);
  input_init(&x); strcpy(x.arch, "sm_9"); strcpy(x.opt[0], "0--gpu-architecture=sm_90"); record("arch|option shift", &x);
  /* One option "a" "b" versus one option "ab" and an empty one. */
  input_init(&x); strcpy(x.opt[0], "--gpu-architecture=sm_90-std=c++17"); strcpy(x.opt[1], ""); record("options merged", &x);

  for (int i = 0; i < g_nkeys; i++) {
    for (int j = i + 1; j < g_nkeys; j++) {
      if (ckjit__key_equal(&g_keys[i], &g_keys[j]) ||
          memcmp(&g_keys[i], &g_keys[j], sizeof(ckjit_key)) == 0) {
        print_error("keys of \"%s\" and \"%s\" are equal\n", g_names[i], g_names[j]);
        fail();
      }
    }
  }
}

static void test_same_input_same_key(void **state) {
  (void)state;
  ckjit_key a = base_key(), b = base_key();
  ckjit_key zero;
  memset(&zero, 0, sizeof zero);
  assert_false(ckjit__key_equal(&a, &zero)); /* the key was written */
  assert_true(ckjit__key_equal(&a, &b));
  assert_memory_equal(&a, &b, sizeof a);

  /* Same contents at other addresses: the key hashes bytes, not pointers. */
  input *x = malloc(sizeof *x);
  assert_non_null(x);
  input_init(x);
  char *copies[16];
  int nc = 0;
  copies[nc++] = strdup(x->library_version);
  x->in.library_version = copies[nc - 1];
  copies[nc++] = strdup(x->compiler);
  x->in.compiler = copies[nc - 1];
  copies[nc++] = strdup(x->src);
  x->in.source = copies[nc - 1];
  copies[nc++] = strdup(x->opt[0]);
  x->opts[0] = copies[nc - 1];
  copies[nc++] = strdup(x->hsrc[1]);
  x->hsrcs[1] = copies[nc - 1];
  ckjit_key c = key_of(x);
  assert_true(ckjit__key_equal(&a, &c));
  for (int i = 0; i < nc; i++) free(copies[i]);
  free(x);

  /* Bytes past source_len, past n_options and past n_headers don't matter. */
  input y;
  input_init(&y);
  strcat(y.src, "trailing garbage");
  ckjit_key d = key_of(&y);
  assert_true(ckjit__key_equal(&a, &d));
  input_init(&y);
  strcpy(y.opt[2], "something else");
  strcpy(y.hname[2], "x.h");
  ckjit_key e = key_of(&y);
  assert_true(ckjit__key_equal(&a, &e));
}

static void test_key_equal(void **state) {
  (void)state;
  ckjit_key a, b;
  for (int i = 0; i < 16; i++) a.bytes[i] = b.bytes[i] = (uint8_t)(i * 17 + 3);
  assert_true(ckjit__key_equal(&a, &b));
  for (int i = 0; i < 16; i++) {
    b = a;
    b.bytes[i] ^= 0x01;
    assert_false(ckjit__key_equal(&a, &b));
  }
}

static void test_hex_round_trip(void **state) {
  (void)state;
  ckjit_key keys[4];
  keys[0] = base_key();
  memset(&keys[1], 0, sizeof keys[1]);
  memset(&keys[2], 0xFF, sizeof keys[2]);
  for (int i = 0; i < 16; i++) keys[3].bytes[i] = (uint8_t)(0x0F + i * 0x10);
  for (int k = 0; k < 4; k++) {
    char hex[40];
    memset(hex, 'Z', sizeof hex);
    ckjit__key_hex(&keys[k], hex);
    assert_int_equal(hex[32], '\0');
    assert_int_equal(strlen(hex), 32);
    for (int i = 0; i < 32; i++) assert_true(isxdigit((unsigned char)hex[i]));
    assert_int_equal(hex[33], 'Z'); /* wrote no more than 33 bytes */
    /* The hex text is the key bytes in order, two digits each. */
    for (int i = 0; i < 16; i++) {
      unsigned v;
      char two[3] = {hex[2 * i], hex[2 * i + 1], 0};
      assert_int_equal(sscanf(two, "%x", &v), 1);
      assert_int_equal(v, keys[k].bytes[i]);
    }
    ckjit_key back;
    memset(&back, 0x5A, sizeof back);
    assert_int_equal(ckjit__key_parse(hex, &back), 0);
    assert_true(ckjit__key_equal(&keys[k], &back));
  }
}

static void test_parse_rejects(void **state) {
  (void)state;
  const char *bad[] = {
      "",
      "0",
      "0123456789abcdef0123456789abcde",   /* 31 digits */
      "0123456789abcdef0123456789abcdef0", /* 33 digits */
      "0123456789abcdef0123456789abcdeg",  /* non-hex */
      " 0123456789abcdef0123456789abcdef",
      "0123456789abcdef0123456789abcde ",
      "0123456789abcdef 0123456789abcdef",
      "0x23456789abcdef0123456789abcdef",
      "-123456789abcdef0123456789abcdef",
      "0123456789abcdef0123456789abcdef.ckjit",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ckjit_key k;
    if (ckjit__key_parse(bad[i], &k) != -1) {
      print_error("ckjit__key_parse(\"%s\") accepted\n", bad[i]);
      fail();
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_field_matters),
      cmocka_unit_test(test_same_input_same_key),
      cmocka_unit_test(test_key_equal),
      cmocka_unit_test(test_hex_round_trip),
      cmocka_unit_test(test_parse_rejects),
  };
  return cmocka_run_group_tests_name("key", tests, NULL, NULL);
}
