#include "json_writer.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void json_init(json_writer *w, FILE *out) {
  memset(w, 0, sizeof *w);
  w->out = out;
}

static void indent(json_writer *w) {
  fputc('\n', w->out);
  for (int i = 0; i < w->depth; i++) fputs("  ", w->out);
}

/* Writes a quoted, escaped string. */
static void put_string(FILE *out, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  fputc('"', out);
  while (*p) {
    unsigned c = *p;
    if (c == '"' || c == '\\') {
      fputc('\\', out);
      fputc((int)c, out);
      p++;
    } else if (c < 0x20) {
      switch (c) {
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        case '\b': fputs("\\b", out); break;
        case '\f': fputs("\\f", out); break;
        default: fprintf(out, "\\u%04x", c); break;
      }
      p++;
    } else if (c < 0x80) {
      fputc((int)c, out);
      p++;
    } else {
      /* Copy one well-formed UTF-8 sequence, or emit U+FFFD for a bad byte. */
      int len = (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
              : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
      int ok = len > 0;
      uint32_t cp = len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
      for (int i = 1; ok && i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) ok = 0;
        else cp = (cp << 6) | (p[i] & 0x3F);
      }
      if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
                 (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))))
        ok = 0;
      if (ok) {
        fwrite(p, 1, (size_t)len, out);
        p += len;
      } else {
        fputs("\\ufffd", out);
        p++;
      }
    }
  }
  fputc('"', out);
}

/* Separator, indentation and key before a value at the current level. */
static void member(json_writer *w, const char *key) {
  if (w->depth > 0) {
    if (w->count[w->depth] > 0) fputc(',', w->out);
    w->count[w->depth]++;
    indent(w);
  }
  if (key) {
    put_string(w->out, key);
    fputs(": ", w->out);
  }
}

static void begin(json_writer *w, const char *key, char open) {
  member(w, key);
  fputc(open, w->out);
  if (w->depth + 1 < JSON_WRITER_MAX_DEPTH) {
    w->depth++;
    w->count[w->depth] = 0;
  }
}

static void end(json_writer *w, char close) {
  int had_members = w->count[w->depth] > 0;
  if (w->depth > 0) w->depth--;
  if (had_members) indent(w);
  fputc(close, w->out);
}

void json_begin_object(json_writer *w, const char *key) { begin(w, key, '{'); }
void json_end_object(json_writer *w) { end(w, '}'); }
void json_begin_array(json_writer *w, const char *key) { begin(w, key, '['); }
void json_end_array(json_writer *w) { end(w, ']'); }

void json_string(json_writer *w, const char *key, const char *value) {
  member(w, key);
  if (value) put_string(w->out, value);
  else fputs("null", w->out);
}

void json_int(json_writer *w, const char *key, int64_t value) {
  member(w, key);
  fprintf(w->out, "%" PRId64, value);
}

void json_uint(json_writer *w, const char *key, uint64_t value) {
  member(w, key);
  fprintf(w->out, "%" PRIu64, value);
}

void json_double(json_writer *w, const char *key, double value) {
  member(w, key);
  if (isfinite(value)) fprintf(w->out, "%.10g", value);
  else fputs("null", w->out);
}

void json_bool(json_writer *w, const char *key, int value) {
  member(w, key);
  fputs(value ? "true" : "false", w->out);
}

void json_null(json_writer *w, const char *key) {
  member(w, key);
  fputs("null", w->out);
}

void json_finish(json_writer *w) {
  fputc('\n', w->out);
  fflush(w->out);
}
