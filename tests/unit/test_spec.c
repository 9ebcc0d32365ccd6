/* Specs: text form parse/format round trip, error reporting, rendering. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "base/buffer.h"
#include "runtime/spec.h"
#include "test_util.h"

/* ---- helpers ------------------------------------------------------------ */

typedef struct parse_job {
  const char *text;
  ckjit_status status;
  char message[1024];
} parse_job;

static void *parse_fresh(void *p) {
  parse_job *j = p;
  ckjit_spec s;
  j->status = ckjit__spec_parse(j->text, &s);
  snprintf(j->message, sizeof j->message, "%s", ckjit_last_error());
  return NULL;
}

/* Parses on a fresh thread (pristine error state) and expects
 * CKJIT_ERROR_INVALID_ARGUMENT with a message of its own. */
static void expect_parse_error(const char *text) {
  parse_job j = {text, CKJIT_SUCCESS, {0}};
  assert_int_equal(tu_run_in_thread(parse_fresh, &j), 0);
  if (j.status != CKJIT_ERROR_INVALID_ARGUMENT)
    print_error("parse(\"%s\") returned %s, want CKJIT_ERROR_INVALID_ARGUMENT\n", text,
                ckjit_status_string(j.status));
  assert_int_equal(j.status, CKJIT_ERROR_INVALID_ARGUMENT);
  if (!j.message[0]) print_error("parse(\"%s\") failed without a message\n", text);
  assert_true(j.message[0] != 0);
}

static void expect_parse_ok(const char *text, ckjit_spec *out) {
  ckjit_status st = ckjit__spec_parse(text, out);
  if (st != CKJIT_SUCCESS) print_error("parse(\"%s\"): %s\n", text, ckjit_last_error());
  assert_int_equal(st, CKJIT_SUCCESS);
}

static size_t default_count(void) {
  size_t n = ckjit_default_spec_count();
  assert_true(n > 0);
  assert_true(n < 100000);
  return n;
}

/* ---- tests -------------------------------------------------------------- */

static void test_default_specs_round_trip(void **state) {
  (void)state;
  size_t n = default_count();
  ckjit_spec *all = calloc(n, sizeof *all);
  assert_non_null(all);
  int seen_family[CKJIT_FAMILY_COUNT_] = {0};
  for (size_t i = 0; i < n; i++) {
    char text[CKJIT_SPEC_TEXT_MAX], again[CKJIT_SPEC_TEXT_MAX], third[CKJIT_SPEC_TEXT_MAX];
    assert_int_equal(ckjit_default_spec(i, text, sizeof text), CKJIT_SUCCESS);
    assert_true(strlen(text) > 0);
    ckjit_spec s1, s2;
    expect_parse_ok(text, &s1);
    assert_int_equal(ckjit__spec_check(&s1), CKJIT_SUCCESS);
    assert_int_equal(ckjit__spec_format(&s1, again, sizeof again), CKJIT_SUCCESS);
    /* Default specs are written in canonical form. */
    assert_string_equal(again, text);
    expect_parse_ok(again, &s2);
    assert_true(ckjit__spec_equal(&s1, &s2));
    assert_int_equal(ckjit__spec_hash(&s1), ckjit__spec_hash(&s2));
    assert_int_equal(ckjit__spec_format(&s2, third, sizeof third), CKJIT_SUCCESS);
    assert_string_equal(third, again);
    /* "family:" prefix names the family. */
    const ckjit_family *fam = ckjit__family_get(s1.family);
    assert_non_null(fam);
    assert_int_equal(strncmp(text, fam->name, strlen(fam->name)), 0);
    assert_int_equal(text[strlen(fam->name)], ':');
    assert_true(s1.family < CKJIT_FAMILY_COUNT_);
    seen_family[s1.family] = 1;
    all[i] = s1;
  }
  /* Every family has defaults, and no default is listed twice. */
  for (int f = 0; f < CKJIT_FAMILY_COUNT_; f++) assert_true(seen_family[f]);
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (ckjit__spec_equal(&all[i], &all[j])) {
        print_error("default specs %zu and %zu are the same\n", i, j);
        fail();
      }
  free(all);
}

static void test_default_spec_errors(void **state) {
  (void)state;
  size_t n = default_count();
  char buf[CKJIT_SPEC_TEXT_MAX];
  assert_int_equal(ckjit_default_spec(n, buf, sizeof buf), CKJIT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(ckjit_default_spec((size_t)-1, buf, sizeof buf), CKJIT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(ckjit_default_spec(0, NULL, 64), CKJIT_ERROR_INVALID_ARGUMENT);
  /* Too small a buffer: an error, never an overrun. */
  char small[12];
  memset(small, 'Z', sizeof small);
  assert_int_not_equal(ckjit_default_spec(0, small, 4), CKJIT_SUCCESS);
  for (int i = 4; i < 12; i++) assert_int_equal(small[i], 'Z');
  memset(small, 'Z', sizeof small);
  assert_int_not_equal(ckjit_default_spec(0, small, 0), CKJIT_SUCCESS);
  for (int i = 0; i < 12; i++) assert_int_equal(small[i], 'Z');
}

static void test_format_small_buffer(void **state) {
  (void)state;
  char text[CKJIT_SPEC_TEXT_MAX];
  assert_int_equal(ckjit_default_spec(0, text, sizeof text), CKJIT_SUCCESS);
  ckjit_spec s;
  expect_parse_ok(text, &s);
  size_t need = strlen(text) + 1;
  char *buf = malloc(need + 8);
  assert_non_null(buf);
  for (size_t len = 0; len < need; len++) {
    memset(buf, 'Z', need + 8);
    assert_int_not_equal(ckjit__spec_format(&s, buf, len), CKJIT_SUCCESS);
    for (size_t k = len; k < need + 8; k++) assert_int_equal(buf[k], 'Z');
  }
  assert_int_equal(ckjit__spec_format(&s, buf, need), CKJIT_SUCCESS);
  assert_string_equal(buf, text);
  free(buf);
}

static void test_omitted_keys_default(void **state) {
  (void)state;
  for (uint32_t id = 0; id < CKJIT_FAMILY_COUNT_; id++) {
    const ckjit_family *fam = ckjit__family_get(id);
    assert_non_null(fam);
    /* One key at a time, with every value it can take: the text parses
     * (or is rejected by the family's combination check), and the other
     * keys take their defaults. */
    for (int p = 0; p < fam->n_params; p++) {
      const ckjit_param_desc *d = &fam->params[p];
      int32_t lo = d->names ? 0 : d->min, hi = d->min;
      if (d->names) {
        while (d->names[hi]) hi++;
        hi--;
      } else {
        hi = d->max;
      }
      int64_t span = (int64_t)hi - lo;
      for (int64_t vv = lo; vv <= hi; vv += span > 2048 ? span / 64 + 1 : 1) {
        int32_t v = (int32_t)vv;
        char text[CKJIT_SPEC_TEXT_MAX];
        if (d->names) snprintf(text, sizeof text, "%s:%s=%s", fam->name, d->name, d->names[v]);
        else snprintf(text, sizeof text, "%s:%s=%d", fam->name, d->name, (int)v);
        ckjit_spec s;
        ckjit_status st = ckjit__spec_parse(text, &s);
        if (st != CKJIT_SUCCESS) {
          /* Only the combination check may refuse an in-range value. */
          assert_int_equal(st, CKJIT_ERROR_INVALID_ARGUMENT);
          continue;
        }
        assert_int_equal(s.family, id);
        for (int q = 0; q < fam->n_params; q++) {
          if (q == p) assert_int_equal(s.value[q], v);
          /* An omitted vec follows the dtype (test_vec_default_follows_dtype). */
          else if (strcmp(fam->params[q].name, "vec")) assert_int_equal(s.value[q], fam->params[q].def);
        }
        for (int q = fam->n_params; q < CKJIT_MAX_PARAMS; q++) assert_int_equal(s.value[q], 0);
        char canon[CKJIT_SPEC_TEXT_MAX];
        assert_int_equal(ckjit__spec_format(&s, canon, sizeof canon), CKJIT_SUCCESS);
        char needle[128];
        if (d->names) snprintf(needle, sizeof needle, "%s=%s", d->name, d->names[v]);
        else snprintf(needle, sizeof needle, "%s=%d", d->name, (int)v);
        assert_non_null(strstr(canon, needle));
      }
    }
  }
}

static void test_bad_texts(void **state) {
  (void)state;
  char text[CKJIT_SPEC_TEXT_MAX];
  assert_int_equal(ckjit_default_spec(0, text, sizeof text), CKJIT_SUCCESS);
  /* Bad family / syntax. */
  expect_parse_error("");
  expect_parse_error(":");
  expect_parse_error("nosuchfamily:dtype=f32");
  expect_parse_error("Elementwise:dtype=f32");
  expect_parse_error("elementwise_:dtype=f32");
  expect_parse_error(":dtype=f32");
  expect_parse_error("elementwise:dtype");
  expect_parse_error("elementwise:dtype=");
  expect_parse_error("elementwise:=f32");
  expect_parse_error("elementwise:dtype=f32,,op=relu");
  expect_parse_error("elementwise:dtype=f32;op=relu");
  expect_parse_error("elementwise:dtype==f32");
  /* Bad key. */
  expect_parse_error("elementwise:bogus=1");
  expect_parse_error("elementwise:DTYPE=f32");
  expect_parse_error("transpose:op=relu");
  /* Bad enum value. */
  expect_parse_error("elementwise:dtype=f64");
  expect_parse_error("elementwise:dtype=F32");
  expect_parse_error("elementwise:dtype=i8");
  expect_parse_error("elementwise:op=tanh");
  /* Trailing garbage after a complete default spec. */
  char longer[CKJIT_SPEC_TEXT_MAX + 16];
  snprintf(longer, sizeof longer, "%s,bogus=1", text);
  expect_parse_error(longer);
  snprintf(longer, sizeof longer, "%s ", text);
  expect_parse_error(longer);
  /* A very long text. */
  char *huge = malloc(100000);
  assert_non_null(huge);
  memcpy(huge, "elementwise:dtype=", 18);
  memset(huge + 18, 'f', 100000 - 19);
  huge[99999] = 0;
  expect_parse_error(huge);
  free(huge);
}

static void test_bad_integer_values(void **state) {
  (void)state;
  int tested = 0;
  for (uint32_t id = 0; id < CKJIT_FAMILY_COUNT_; id++) {
    const ckjit_family *fam = ckjit__family_get(id);
    for (int p = 0; p < fam->n_params; p++) {
      const ckjit_param_desc *d = &fam->params[p];
      if (d->names) {
        /* An integer where a name is expected. */
        char t[CKJIT_SPEC_TEXT_MAX];
        snprintf(t, sizeof t, "%s:%s=%d", fam->name, d->name, 999);
        expect_parse_error(t);
        continue;
      }
      char t[CKJIT_SPEC_TEXT_MAX];
      const long long out[] = {(long long)d->max + 1, (long long)d->min - 1, 2147483648LL,
                               -2147483649LL, 4294967297LL};
      for (size_t k = 0; k < sizeof out / sizeof out[0]; k++) {
        snprintf(t, sizeof t, "%s:%s=%lld", fam->name, d->name, out[k]);
        expect_parse_error(t);
      }
      const char *junk[] = {"abc", "8x", "0x8", "8 ", "+", "-", "1e3", "99999999999999999999", "4.0"};
      for (size_t k = 0; k < sizeof junk / sizeof junk[0]; k++) {
        snprintf(t, sizeof t, "%s:%s=%s", fam->name, d->name, junk[k]);
        expect_parse_error(t);
      }
      tested++;
    }
  }
  assert_true(tested > 0);
}

static void test_vec_default_follows_dtype(void **state) {
  (void)state;
  static const struct { const char *text; int vec; } cases[] = {
      {"elementwise:dtype=f32,op=relu", 4},  {"elementwise:dtype=f16,op=relu", 8},
      {"elementwise:dtype=bf16", 8},         {"elementwise:dtype=bf16,vec=2", 2},
      {"transpose:dtype=f32", 4},            {"transpose:dtype=bf16", 8},
      {"transpose:dtype=f16,vec=1", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ckjit_spec s;
    assert_int_equal(ckjit__spec_parse(cases[i].text, &s), CKJIT_SUCCESS);
    char canon[CKJIT_SPEC_TEXT_MAX], needle[16];
    assert_int_equal(ckjit__spec_format(&s, canon, sizeof canon), CKJIT_SUCCESS);
    snprintf(needle, sizeof needle, ",vec=%d,", cases[i].vec);
    if (!strstr(canon, needle)) print_error("%s -> %s, wanted %s\n", cases[i].text, canon, needle);
    assert_non_null(strstr(canon, needle));
  }
}

static void test_check_built_specs(void **state) {
  (void)state;
  ckjit_spec s;
  memset(&s, 0, sizeof s);
  s.family = CKJIT_FAMILY_COUNT_;
  assert_int_equal(ckjit__spec_check(&s), CKJIT_ERROR_INVALID_ARGUMENT);
  char buf[CKJIT_SPEC_TEXT_MAX];
  assert_int_not_equal(ckjit__spec_format(&s, buf, sizeof buf), CKJIT_SUCCESS);
  ckjit_buffer src = {0};
  assert_int_not_equal(ckjit__spec_render(&s, &src), CKJIT_SUCCESS);
  ckjit__buf_free(&src);
  assert_null(ckjit__family_get(CKJIT_FAMILY_COUNT_));
  assert_null(ckjit__family_get(0xFFFFFFFFu));

  /* Each value of a valid spec pushed out of range is refused. */
  assert_int_equal(ckjit_default_spec(0, buf, sizeof buf), CKJIT_SUCCESS);
  ckjit_spec good;
  expect_parse_ok(buf, &good);
  const ckjit_family *fam = ckjit__family_get(good.family);
  for (int p = 0; p < fam->n_params; p++) {
    const ckjit_param_desc *d = &fam->params[p];
    int32_t n_names = 0;
    if (d->names)
      while (d->names[n_names]) n_names++;
    const int32_t bad[] = {d->names ? n_names : d->max + 1, d->names ? -1 : d->min - 1, INT32_MIN,
                           INT32_MAX};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
      s = good;
      s.value[p] = bad[k];
      assert_int_equal(ckjit__spec_check(&s), CKJIT_ERROR_INVALID_ARGUMENT);
      assert_int_not_equal(ckjit__spec_format(&s, buf, sizeof buf), CKJIT_SUCCESS);
      src = (ckjit_buffer){0};
      assert_int_not_equal(ckjit__spec_render(&s, &src), CKJIT_SUCCESS);
      ckjit__buf_free(&src);
    }
  }
  /* Unused trailing values must be zero. */
  if (fam->n_params < CKJIT_MAX_PARAMS) {
    s = good;
    s.value[CKJIT_MAX_PARAMS - 1] = 1;
    assert_int_equal(ckjit__spec_check(&s), CKJIT_ERROR_INVALID_ARGUMENT);
  }
}

static void test_render_default_specs(void **state) {
  (void)state;
  size_t n = default_count();
  for (size_t i = 0; i < n; i++) {
    char text[CKJIT_SPEC_TEXT_MAX];
    assert_int_equal(ckjit_default_spec(i, text, sizeof text), CKJIT_SUCCESS);
    ckjit_spec s;
    expect_parse_ok(text, &s);
    ckjit_buffer a = {0}, b = {0};
    ckjit_status st = ckjit__spec_render(&s, &a);
    if (st != CKJIT_SUCCESS) print_error("render(%s): %s\n", text, ckjit_last_error());
    assert_int_equal(st, CKJIT_SUCCESS);
    assert_int_equal(ckjit__spec_render(&s, &b), CKJIT_SUCCESS);
    assert_true(a.size > 0);
    assert_int_equal(strlen(a.data), a.size);
    /* Deterministic, fully specialized, defines the family's kernel. */
    assert_int_equal(a.size, b.size);
    assert_memory_equal(a.data, b.data, a.size);
    if (strchr(a.data, '@')) {
      const char *at = strchr(a.data, '@');
      print_error("render(%s) left a placeholder: \"%.40s\"\n", text, at);
      fail();
    }
    const ckjit_family *fam = ckjit__family_get(s.family);
    assert_non_null(strstr(a.data, fam->kernel));
    ckjit__buf_free(&a);
    ckjit__buf_free(&b);
  }
  /* Different specs render different sources. */
  if (n >= 2) {
    char t0[CKJIT_SPEC_TEXT_MAX], t1[CKJIT_SPEC_TEXT_MAX];
    ckjit_spec s0, s1;
    assert_int_equal(ckjit_default_spec(0, t0, sizeof t0), CKJIT_SUCCESS);
    assert_int_equal(ckjit_default_spec(1, t1, sizeof t1), CKJIT_SUCCESS);
    expect_parse_ok(t0, &s0);
    expect_parse_ok(t1, &s1);
    ckjit_buffer a = {0}, b = {0};
    assert_int_equal(ckjit__spec_render(&s0, &a), CKJIT_SUCCESS);
    assert_int_equal(ckjit__spec_render(&s1, &b), CKJIT_SUCCESS);
    assert_false(a.size == b.size && memcmp(a.data, b.data, a.size) == 0);
    ckjit__buf_free(&a);
    ckjit__buf_free(&b);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_specs_round_trip),
      cmocka_unit_test(test_default_spec_errors),
      cmocka_unit_test(test_format_small_buffer),
      cmocka_unit_test(test_omitted_keys_default),
      cmocka_unit_test(test_bad_texts),
      cmocka_unit_test(test_bad_integer_values),
      cmocka_unit_test(test_vec_default_follows_dtype),
      cmocka_unit_test(test_check_built_specs),
      cmocka_unit_test(test_render_default_specs),
  };
  return cmocka_run_group_tests_name("spec", tests, NULL, NULL);
}
