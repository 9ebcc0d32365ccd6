#include "manifest.h"

#include <string.h>

#define MAX_FIELDS 4

typedef struct field {
  const char *p;
  size_t n;
} field;

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* Characters an arch name may contain ("sm_90a", "gfx90a:sramecc+:xnack-"). */
static int arch_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == ':' || c == '+' || c == '-' || c == '.';
}

static int arch_ok(const field *f) {
  for (size_t i = 0; i < f->n; i++)
    if (!arch_char(f->p[i])) return 0;
  return 1;
}

static int field_is(const field *f, const char *s) {
  size_t n = strlen(s);
  return f->n == n && memcmp(f->p, s, n) == 0;
}

/* Splits and classifies one line (without its terminator). */
static int parse_line(const char *p, size_t n, size_t line_no, manifest_cb cb, void *ctx) {
  /* The comment, then the outer blanks (and a CR left by CRLF) go. */
  const char *hash = memchr(p, '#', n);
  if (hash) n = (size_t)(hash - p);
  while (n > 0 && (is_blank(p[n - 1]) || p[n - 1] == '\r')) n--;
  while (n > 0 && is_blank(*p)) p++, n--;
  if (n == 0) return 0;

  manifest_entry e;
  memset(&e, 0, sizeof e);
  e.line = line_no;
  e.text = p;
  e.text_len = n;

  field f[MAX_FIELDS];
  int nf = 0;
  size_t i = 0;
  while (i < n && !e.error) {
    while (i < n && is_blank(p[i])) i++;
    if (i == n) break;
    size_t start = i;
    while (i < n && !is_blank(p[i])) {
      unsigned char c = (unsigned char)p[i];
      if (c < 0x20 || c == 0x7f) e.error = "control character or NUL byte in the line";
      i++;
    }
    if (e.error) break;
    if (nf == MAX_FIELDS) {
      e.error = "too many fields (expected SPEC, ARCH SPEC or ckjit-spec 1 ARCH SPEC)";
      break;
    }
    f[nf].p = p + start;
    f[nf].n = i - start;
    if (f[nf].n > MANIFEST_MAX_FIELD) e.error = "field longer than 1024 bytes";
    nf++;
  }

  if (!e.error) {
    const field *arch = NULL, *spec = NULL;
    if (nf >= 1 && field_is(&f[0], MANIFEST_RECORD_TAG)) {
      e.record = 1;
      if (nf < 2 || !field_is(&f[1], MANIFEST_RECORD_VERSION))
        e.error = nf < 2 ? "incomplete record (expected ckjit-spec 1 ARCH SPEC)"
                         : "unsupported record version (this ckjit reads ckjit-spec 1)";
      else if (nf != 4)
        e.error = "a record has 4 fields: ckjit-spec 1 ARCH SPEC";
      else
        arch = &f[2], spec = &f[3];
    } else if (nf == 1) {
      spec = &f[0];
    } else if (nf == 2) {
      arch = &f[0], spec = &f[1];
    } else {
      e.error = "too many fields (expected SPEC, ARCH SPEC or ckjit-spec 1 ARCH SPEC)";
    }
    if (!e.error && arch && !arch_ok(arch))
      e.error = memchr(arch->p, '=', arch->n)
                    ? "the arch field is not an arch name (a blank inside the spec?)"
                    : "the arch field is not an arch name";
    if (!e.error) {
      if (arch) {
        e.arch = arch->p;
        e.arch_len = arch->n;
      }
      e.spec = spec->p;
      e.spec_len = spec->n;
    }
  }
  return cb(ctx, &e);
}

int manifest_parse(const char *text, size_t len, manifest_cb cb, void *ctx) {
  size_t line_no = 0, pos = 0;
  if (!text) len = 0;
  while (pos < len) {
    const char *start = text + pos;
    const char *nl = memchr(start, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - start) : len - pos;
    line_no++;
    int rc = parse_line(start, n, line_no, cb, ctx);
    if (rc) return rc;
    pos += n + (nl ? 1 : 0);
  }
  return 0;
}
