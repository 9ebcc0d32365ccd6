/* Cache key: XXH3-128 over every input that determines a code object. */
#ifndef CKJIT_CACHE_KEY_H
#define CKJIT_CACHE_KEY_H

#include <stddef.h>
#include <stdint.h>

#define CKJIT_CACHE_FORMAT_VERSION 2u /* 2: the entry header names its spec */

typedef struct ckjit_key {
  uint8_t bytes[16];
} ckjit_key;

typedef struct ckjit_key_input {
  uint32_t format_version;  /* CKJIT_CACHE_FORMAT_VERSION */
  const char *library_version;
  const char *backend;      /* "cuda" / "hip" */
  const char *compiler;     /* compiler fingerprint */
  const char *arch;         /* full arch string */
  int n_options;
  const char *const *options;
  const char *source;       /* complete specialized source */
  size_t source_len;
  int n_headers;
  const char *const *header_names;
  const char *const *header_sources;
} ckjit_key_input;

/* Each field is hashed with a length prefix, so no two different inputs
 * concatenate to the same byte stream.  Returns 0, or -1 out of memory. */
int ckjit__key_compute(const ckjit_key_input *in, ckjit_key *out);
void ckjit__key_hex(const ckjit_key *key, char out[33]);
/* Parses 32 hex digits; returns 0 on success, -1 otherwise. */
int ckjit__key_parse(const char *hex, ckjit_key *out);
int ckjit__key_equal(const ckjit_key *a, const ckjit_key *b);

#endif
