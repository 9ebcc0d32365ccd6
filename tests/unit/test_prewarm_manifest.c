/* The prewarm manifest parser (tools/manifest.c): the three line forms,
 * comments and blanks, CRLF, malformed lines with their line numbers (the
 * rest still parsed), duplicates reported as they come (the tool compiles
 * them once), NUL bytes, long fields, a callback that stops parsing. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/manifest.h"

#define MAX_SEEN 64

typedef struct seen {
  size_t line;
  char arch[64];
  char spec[MANIFEST_MAX_FIELD + 1];
  int record;
  int error;
  char text[256];
} seen;

typedef struct collect {
  seen e[MAX_SEEN];
  size_t n;
  size_t stop_at; /* return nonzero on this call (0: never) */
} collect;

static void copy_field(char *dst, size_t cap, const char *p, size_t n) {
  if (!p) {
    dst[0] = '\0';
    return;
  }
  assert_true(n < cap);
  memcpy(dst, p, n);
  dst[n] = '\0';
}

static int on_entry(void *ctx, const manifest_entry *e) {
  collect *c = ctx;
  assert_true(c->n < MAX_SEEN);
  seen *s = &c->e[c->n++];
  memset(s, 0, sizeof *s);
  s->line = e->line;
  s->record = e->record;
  s->error = e->error != NULL;
  if (e->error) {
    assert_null(e->spec);
    assert_true(strlen(e->error) > 0);
  } else {
    assert_non_null(e->spec);
  }
  copy_field(s->arch, sizeof s->arch, e->arch, e->arch_len);
  copy_field(s->spec, sizeof s->spec, e->spec, e->spec_len);
  size_t tn = e->text_len < sizeof s->text - 1 ? e->text_len : sizeof s->text - 1;
  copy_field(s->text, sizeof s->text, e->text, tn);
  return c->n == c->stop_at ? 42 : 0;
}

static collect *parse(const char *text, size_t len) {
  collect *c = calloc(1, sizeof *c);
  assert_non_null(c);
  assert_int_equal(manifest_parse(text, len, on_entry, c), 0);
  return c;
}

static collect *parse_str(const char *text) { return parse(text, strlen(text)); }

static void test_good_lines(void **state) {
  (void)state;
  const char *text =
      "# a manifest\n"
      "\n"
      "ckjit-spec 1 sm_90 transpose:dtype=f32,tile=64,vec=4,threads=256\n"
      "   gfx90a:sramecc+:xnack-\telementwise:dtype=bf16,op=relu   \n"
      "elementwise:dtype=f16  # trailing comment\n"
      "transpose\n"
      "   # indented comment\n"
      "\t\n"
      "ckjit-spec\t1\tgfx90a\ttranspose:dtype=f16#comment right after\n";
  collect *c = parse_str(text);
  assert_int_equal(c->n, 5);
  assert_int_equal(c->e[0].line, 3);
  assert_true(c->e[0].record);
  assert_string_equal(c->e[0].arch, "sm_90");
  assert_string_equal(c->e[0].spec, "transpose:dtype=f32,tile=64,vec=4,threads=256");
  assert_int_equal(c->e[1].line, 4);
  assert_false(c->e[1].record);
  assert_string_equal(c->e[1].arch, "gfx90a:sramecc+:xnack-");
  assert_string_equal(c->e[1].spec, "elementwise:dtype=bf16,op=relu");
  assert_string_equal(c->e[1].text, "gfx90a:sramecc+:xnack-\telementwise:dtype=bf16,op=relu");
  assert_int_equal(c->e[2].line, 5);
  assert_string_equal(c->e[2].arch, "");
  assert_string_equal(c->e[2].spec, "elementwise:dtype=f16");
  assert_int_equal(c->e[3].line, 6);
  assert_string_equal(c->e[3].spec, "transpose");
  assert_int_equal(c->e[4].line, 9);
  assert_true(c->e[4].record);
  assert_string_equal(c->e[4].arch, "gfx90a");
  assert_string_equal(c->e[4].spec, "transpose:dtype=f16");
  free(c);
}

static void test_crlf_and_no_final_newline(void **state) {
  (void)state;
  collect *c = parse_str("sm_90 transpose:dtype=f32\r\n\r\nelementwise:dtype=f32\r\ntranspose");
  assert_int_equal(c->n, 3);
  assert_string_equal(c->e[0].arch, "sm_90");
  assert_string_equal(c->e[0].spec, "transpose:dtype=f32");
  assert_int_equal(c->e[1].line, 3);
  assert_string_equal(c->e[1].spec, "elementwise:dtype=f32");
  assert_int_equal(c->e[2].line, 4);
  assert_string_equal(c->e[2].spec, "transpose");
  free(c);
}

static void test_bad_lines_have_line_numbers(void **state) {
  (void)state;
  const char *text =
      "sm_90 transpose:dtype=f32\n"                       /* 1 ok */
      "ckjit-spec 2 sm_90 transpose:dtype=f32\n"          /* 2 version */
      "ckjit-spec 1 sm_90\n"                              /* 3 missing spec */
      "ckjit-spec\n"                                      /* 4 incomplete */
      "a b c\n"                                           /* 5 too many fields */
      "elementwise:dtype=f32, op=relu\n"                  /* 6 blank inside the spec */
      "sm_90 transpose:dtype=f32 extra more fields\n"     /* 7 too many */
      "ckjit-spec 1 sm_90 transpose:dtype=f32 extra\n"    /* 8 record with 5 fields */
      "sm!90 transpose\n"                                 /* 9 not an arch */
      "transpose:dtype=f16\n";                            /* 10 ok */
  collect *c = parse_str(text);
  assert_int_equal(c->n, 10);
  for (size_t i = 0; i < c->n; i++) assert_int_equal(c->e[i].line, i + 1);
  assert_false(c->e[0].error);
  for (int i = 1; i <= 8; i++) assert_true(c->e[i].error);
  assert_false(c->e[9].error);
  assert_string_equal(c->e[9].spec, "transpose:dtype=f16");
  assert_true(c->e[1].record);
  assert_string_equal(c->e[5].text, "elementwise:dtype=f32, op=relu");
  free(c);
}

/* Keeps the error text of the last entry. */
static int keep_error(void *ctx, const manifest_entry *e) {
  *(const char **)ctx = e->error;
  return 0;
}

static void test_error_messages(void **state) {
  (void)state;
  struct {
    const char *line, *needle;
  } cases[] = {
      {"ckjit-spec 7 sm_90 transpose", "version"},
      {"elementwise:dtype=f32, op=relu", "blank inside the spec"},
      {"sm!90 transpose", "not an arch name"},
      {"x y z w v", "too many fields"},
      {"ckjit-spec 1 sm_90", "4 fields"},
      {"ckjit-spec", "incomplete record"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *err = NULL;
    assert_int_equal(manifest_parse(cases[i].line, strlen(cases[i].line), keep_error, &err), 0);
    assert_non_null(err);
    if (!strstr(err, cases[i].needle))
      fail_msg("'%s': error '%s' does not mention '%s'", cases[i].line, err, cases[i].needle);
  }
}

static void test_duplicates_are_reported_each_time(void **state) {
  (void)state;
  /* The parser reports every line; deduplication is the tool's (it compiles
   * each (arch, canonical spec) once and counts the duplicates). */
  collect *c = parse_str("sm_90 transpose:dtype=f32\n"
                         "sm_90 transpose:dtype=f32\n"
                         "ckjit-spec 1 sm_90 transpose:dtype=f32\n");
  assert_int_equal(c->n, 3);
  for (int i = 0; i < 3; i++) {
    assert_false(c->e[i].error);
    assert_string_equal(c->e[i].arch, "sm_90");
    assert_string_equal(c->e[i].spec, "transpose:dtype=f32");
  }
  assert_int_equal(c->e[2].line, 3);
  free(c);
}

static void test_nul_and_control_bytes(void **state) {
  (void)state;
  const char text[] = "sm_90 trans\0pose\nsm_90 transpose\x01\ntranspose\n";
  collect *c = parse(text, sizeof text - 1);
  assert_int_equal(c->n, 3);
  assert_true(c->e[0].error);
  assert_int_equal(c->e[0].line, 1);
  assert_true(c->e[1].error);
  assert_int_equal(c->e[1].line, 2);
  assert_false(c->e[2].error);
  assert_string_equal(c->e[2].spec, "transpose");
  free(c);
}

static void test_field_length_limit(void **state) {
  (void)state;
  size_t n = MANIFEST_MAX_FIELD;
  char *text = malloc(2 * n + 16);
  assert_non_null(text);
  memset(text, 'a', n); /* exactly the limit: accepted */
  text[n] = '\n';
  memset(text + n + 1, 'b', n + 1); /* one more: malformed */
  text[2 * n + 2] = '\n';
  collect *c = parse(text, 2 * n + 3);
  assert_int_equal(c->n, 2);
  assert_false(c->e[0].error);
  assert_int_equal(strlen(c->e[0].spec), n);
  assert_true(c->e[1].error);
  assert_int_equal(c->e[1].line, 2);
  free(c);
  free(text);
}

static void test_empty_inputs(void **state) {
  (void)state;
  collect *c = parse("", 0);
  assert_int_equal(c->n, 0);
  free(c);
  c = parse_str("\n\n   \n# only comments\n\t# here\n");
  assert_int_equal(c->n, 0);
  free(c);
  c = calloc(1, sizeof *c);
  assert_int_equal(manifest_parse(NULL, 5, on_entry, c), 0);
  assert_int_equal(c->n, 0);
  free(c);
}

static void test_callback_stops(void **state) {
  (void)state;
  collect *c = calloc(1, sizeof *c);
  c->stop_at = 2;
  const char *text = "transpose\ntranspose:dtype=f16\ntranspose:dtype=bf16\n";
  assert_int_equal(manifest_parse(text, strlen(text), on_entry, c), 42);
  assert_int_equal(c->n, 2);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good_lines),
      cmocka_unit_test(test_crlf_and_no_final_newline),
      cmocka_unit_test(test_bad_lines_have_line_numbers),
      cmocka_unit_test(test_error_messages),
      cmocka_unit_test(test_duplicates_are_reported_each_time),
      cmocka_unit_test(test_nul_and_control_bytes),
      cmocka_unit_test(test_field_length_limit),
      cmocka_unit_test(test_empty_inputs),
      cmocka_unit_test(test_callback_stops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
