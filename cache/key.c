/* The key covers inputs only (never compiler output), each field tagged and
 * length-prefixed so that distinct inputs cannot produce the same stream. */
#include "key.h"

#include <stdio.h>
#include <string.h>
#include <xxhash.h>

static void put_field(XXH3_state_t *st, char tag, const void *data, size_t len) {
  unsigned char prefix[9];
  prefix[0] = (unsigned char)tag;
  for (int i = 0; i < 8; i++) prefix[1 + i] = (unsigned char)((uint64_t)len >> (8 * i));
  XXH3_128bits_update(st, prefix, sizeof prefix);
  if (len) XXH3_128bits_update(st, data, len);
}

static void put_str(XXH3_state_t *st, char tag, const char *s) {
  put_field(st, tag, s ? s : "", s ? strlen(s) : 0);
}

int ckjit__key_compute(const ckjit_key_input *in, ckjit_key *out) {
  XXH3_state_t *st = XXH3_createState();
  if (!st) return -1;
  XXH3_128bits_reset(st);
  unsigned char fmt[4];
  for (int i = 0; i < 4; i++) fmt[i] = (unsigned char)(in->format_version >> (8 * i));
  put_field(st, 'F', fmt, sizeof fmt);
  put_str(st, 'L', in->library_version);
  put_str(st, 'B', in->backend);
  put_str(st, 'C', in->compiler);
  put_str(st, 'A', in->arch);
  put_field(st, 'n', &(uint64_t){(uint64_t)in->n_options}, 8);
  for (int i = 0; i < in->n_options; i++) put_str(st, 'O', in->options[i]);
  put_field(st, 'S', in->source ? in->source : "", in->source ? in->source_len : 0);
  put_field(st, 'h', &(uint64_t){(uint64_t)in->n_headers}, 8);
  for (int i = 0; i < in->n_headers; i++) {
    put_str(st, 'H', in->header_names[i]);
    put_str(st, 'D', in->header_sources[i]);
  }
  XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, h);
  memcpy(out->bytes, canon.digest, 16);
  return 0;
}

void ckjit__key_hex(const ckjit_key *key, char out[33]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = digits[key->bytes[i] >> 4];
    out[2 * i + 1] = digits[key->bytes[i] & 15];
  }
  out[32] = '\0';
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

int ckjit__key_parse(const char *hex, ckjit_key *out) {
  if (!hex || strlen(hex) != 32) return -1;
  for (int i = 0; i < 16; i++) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    out->bytes[i] = (uint8_t)(hi << 4 | lo);
  }
  return 0;
}

int ckjit__key_equal(const ckjit_key *a, const ckjit_key *b) {
  return !memcmp(a->bytes, b->bytes, 16);
}
