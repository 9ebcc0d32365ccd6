/* libFuzzer target: the prewarm manifest parser, manifest_parse
 * (tools/manifest.c), on arbitrary bytes (NUL bytes included, no
 * terminating NUL).
 *
 * Checks what tools/manifest.h promises for every reported line: pointers
 * inside the buffer, line numbers increasing and within the text, fields of
 * at most MANIFEST_MAX_FIELD bytes with no blank, control character or '#',
 * a malformed line has an error and no spec, a well-formed one a spec, a
 * record an arch; a nonzero callback result stops parsing and is returned. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/manifest.h"

#define CHECK(cond)                                                               \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "fuzz_manifest: check failed: %s (line %d)\n", #cond, __LINE__); \
      abort();                                                                    \
    }                                                                             \
  } while (0)

typedef struct ctx {
  const char *text;
  size_t len;
  size_t lines; /* newlines + 1 */
  size_t last_line;
  size_t calls;
  size_t stop_after; /* return nonzero on this call (0: never) */
} ctx;

static int inside(const ctx *c, const char *p, size_t n) {
  return p >= c->text && n <= c->len && (size_t)(p - c->text) <= c->len - n;
}

static void check_field(const ctx *c, const char *p, size_t n) {
  CHECK(inside(c, p, n));
  CHECK(n > 0 && n <= MANIFEST_MAX_FIELD);
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)p[i];
    CHECK(ch != ' ' && ch != '\t' && ch != '#' && ch >= 0x20 && ch != 0x7f);
  }
}

static int on_entry(void *vctx, const manifest_entry *e) {
  ctx *c = vctx;
  c->calls++;
  CHECK(e != NULL);
  CHECK(e->line >= 1 && e->line <= c->lines);
  CHECK(e->line > c->last_line);
  c->last_line = e->line;
  if (e->text) CHECK(inside(c, e->text, e->text_len));
  if (e->error) {
    CHECK(strlen(e->error) > 0);
    CHECK(e->spec == NULL);
  } else {
    CHECK(e->spec != NULL);
    check_field(c, e->spec, e->spec_len);
    if (e->arch) check_field(c, e->arch, e->arch_len);
    if (e->record) CHECK(e->arch != NULL);
  }
  return c->calls == c->stop_after ? 1000 + (int)c->calls : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  if (size) memcpy(text, data, size);
  ctx c = {text, size, 1, 0, 0, 0};
  for (size_t i = 0; i < size; i++) c.lines += text[i] == '\n';
  CHECK(manifest_parse(text, size, on_entry, &c) == 0);
  size_t total = c.calls;
  /* Stopping early returns the callback's value, after exactly that many calls. */
  if (total > 0) {
    ctx d = {text, size, c.lines, 0, 0, size % total + 1};
    CHECK(manifest_parse(text, size, on_entry, &d) == 1000 + (int)d.stop_after);
    CHECK(d.calls == d.stop_after);
  }
  free(text);
  return 0;
}
