/* ckjit__template_render: placeholder substitution. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "base/buffer.h"
#include "runtime/template.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Renders and expects success with exactly `expect`. */
static void expect_render(const char *tmpl, const ckjit_subst *s, int n, const char *expect) {
  ckjit_buffer out = {0};
  ckjit_status st = ckjit__template_render(tmpl, s, n, &out);
  if (st != CKJIT_SUCCESS) print_error("render(\"%s\") failed: %s\n", tmpl, ckjit_last_error());
  assert_int_equal(st, CKJIT_SUCCESS);
  assert_non_null(out.data);
  assert_int_equal(out.size, strlen(expect));
  assert_memory_equal(out.data, expect, out.size);
  assert_int_equal(out.data[out.size], '\0');
  ckjit__buf_free(&out);
}

/* Renders and expects CKJIT_ERROR_INTERNAL with a message. */
static void expect_fail(const char *tmpl, const ckjit_subst *s, int n) {
  ckjit_buffer out = {0};
  ckjit_status st = ckjit__template_render(tmpl, s, n, &out);
  if (st == CKJIT_SUCCESS)
    print_error("render(\"%s\") unexpectedly succeeded: \"%s\"\n", tmpl,
                out.data ? out.data : "(null)");
  assert_int_equal(st, CKJIT_ERROR_INTERNAL);
  assert_int_equal(ckjit_last_status(), CKJIT_ERROR_INTERNAL);
  assert_non_null(ckjit_last_error());
  assert_true(strlen(ckjit_last_error()) > 0);
  ckjit__buf_free(&out);
}

static void test_basic(void **state) {
  (void)state;
  const ckjit_subst s[] = {{"DTYPE", "float"}, {"VEC", "8"}, {"OP_2", "x + y"}};
  expect_render("T=@DTYPE@ V=@VEC@; r = @OP_2@;", s, N_OF(s), "T=float V=8; r = x + y;");
  /* A placeholder may be used several times, at the very start/end, and
   * adjacent to another one. */
  expect_render("@VEC@@DTYPE@ @VEC@", s, 2, "8float 8");
  /* Empty value. */
  const ckjit_subst e[] = {{"EMPTY", ""}};
  expect_render("[@EMPTY@]", e, 1, "[]");
  /* No placeholders, no values. */
  expect_render("plain text\nwith lines\n", NULL, 0, "plain text\nwith lines\n");
  expect_render("", NULL, 0, "");
}

static void test_value_not_rescanned(void **state) {
  (void)state;
  /* Values are inserted verbatim: an '@' inside a value is not a placeholder. */
  const ckjit_subst s[] = {{"A", "@B@"}, {"B", "b"}};
  expect_render("@A@ @B@", s, 2, "@B@ b");
  const ckjit_subst t[] = {{"MAIL", "x@y.z"}};
  expect_render("// @MAIL@", t, 1, "// x@y.z");
}

static void test_deterministic(void **state) {
  (void)state;
  /* A large template with many placeholders: byte-identical across renders
   * and independent of the order of the value list. */
  ckjit_buffer tmpl = {0};
  for (int i = 0; i < 2000; i++) {
    assert_int_equal(ckjit__buf_append_str(&tmpl, "line @A@ and @B_1@ then @C9@;\n"), 0);
  }
  const ckjit_subst s1[] = {{"A", "alpha"}, {"B_1", "beta"}, {"C9", "gamma"}};
  const ckjit_subst s2[] = {{"C9", "gamma"}, {"A", "alpha"}, {"B_1", "beta"}};
  ckjit_buffer o1 = {0}, o2 = {0}, o3 = {0};
  assert_int_equal(ckjit__template_render(tmpl.data, s1, 3, &o1), CKJIT_SUCCESS);
  assert_int_equal(ckjit__template_render(tmpl.data, s1, 3, &o2), CKJIT_SUCCESS);
  assert_int_equal(ckjit__template_render(tmpl.data, s2, 3, &o3), CKJIT_SUCCESS);
  assert_int_equal(o1.size, o2.size);
  assert_int_equal(o1.size, o3.size);
  assert_int_equal(o1.size, 2000 * strlen("line alpha and beta then gamma;\n"));
  assert_memory_equal(o1.data, o2.data, o1.size);
  assert_memory_equal(o1.data, o3.data, o1.size);
  assert_null(strchr(o1.data, '@'));
  ckjit__buf_free(&o1);
  ckjit__buf_free(&o2);
  ckjit__buf_free(&o3);
  ckjit__buf_free(&tmpl);
}

static void test_missing_value(void **state) {
  (void)state;
  const ckjit_subst s[] = {{"A", "1"}};
  expect_fail("@A@ @B@", s, 1);
  expect_fail("@B@", NULL, 0);
  /* Names are case-sensitive. */
  const ckjit_subst lower[] = {{"a", "1"}};
  expect_fail("@A@", lower, 1);
}

static void test_unused_value(void **state) {
  (void)state;
  const ckjit_subst s[] = {{"A", "1"}, {"UNUSED", "2"}};
  expect_fail("x @A@ y", s, 2);
  expect_fail("no placeholders", s + 1, 1);
  /* A name that only appears as a prefix of another is still unused. */
  const ckjit_subst p[] = {{"AB", "1"}, {"A", "2"}};
  expect_fail("@AB@", p, 2);
}

static void test_duplicate_name(void **state) {
  (void)state;
  const ckjit_subst same[] = {{"A", "1"}, {"A", "1"}};
  expect_fail("@A@", same, 2);
  const ckjit_subst diff[] = {{"A", "1"}, {"B", "2"}, {"A", "3"}};
  expect_fail("@A@ @B@", diff, 3);
}

static void test_stray_at(void **state) {
  (void)state;
  const ckjit_subst s[] = {{"A", "1"}};
  expect_fail("a @ b @A@", s, 1);   /* lone '@' */
  expect_fail("@A@ tail @", s, 1);  /* '@' at the end */
  expect_fail("@A@ @A", s, 1);      /* unterminated placeholder */
  expect_fail("@A@ @@", s, 1);      /* empty name */
  expect_fail("@A@ @lower@", s, 1); /* not [A-Z0-9_]+ */
  expect_fail("@A@ @A B@", s, 1);   /* space inside */
  expect_fail("@A@ @A\n@", s, 1);   /* newline inside */
  expect_fail("x@y.z @A@", s, 1);   /* '@' in ordinary text */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_basic),
      cmocka_unit_test(test_value_not_rescanned),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_missing_value),
      cmocka_unit_test(test_unused_value),
      cmocka_unit_test(test_duplicate_name),
      cmocka_unit_test(test_stray_at),
  };
  return cmocka_run_group_tests_name("template", tests, NULL, NULL);
}
