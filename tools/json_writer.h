/* A small streaming JSON writer for the tools' --json output.
 *
 * Values are written in document order; the writer tracks nesting and
 * inserts commas, indentation and key quoting.  `key` names the member when
 * the enclosing container is an object and must be NULL inside an array or
 * at the top level.  Strings are escaped; bytes that are not valid UTF-8 are
 * replaced with U+FFFD so the output is always valid JSON. */
#ifndef CKJIT_TOOLS_JSON_WRITER_H
#define CKJIT_TOOLS_JSON_WRITER_H

#include <stdint.h>
#include <stdio.h>

#define JSON_WRITER_MAX_DEPTH 32

typedef struct json_writer {
  FILE *out;
  int depth;
  int count[JSON_WRITER_MAX_DEPTH]; /* members written at each level */
} json_writer;

void json_init(json_writer *w, FILE *out);

void json_begin_object(json_writer *w, const char *key);
void json_end_object(json_writer *w);
void json_begin_array(json_writer *w, const char *key);
void json_end_array(json_writer *w);

void json_string(json_writer *w, const char *key, const char *value); /* NULL: null */
void json_int(json_writer *w, const char *key, int64_t value);
void json_uint(json_writer *w, const char *key, uint64_t value);
void json_double(json_writer *w, const char *key, double value); /* NaN/inf: null */
void json_bool(json_writer *w, const char *key, int value);
void json_null(json_writer *w, const char *key);

/* Ends the document with a newline and flushes; call once, at depth 0. */
void json_finish(json_writer *w);

#endif
