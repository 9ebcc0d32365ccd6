/* On-disk entry format: a verified header followed by the code object.
 *
 *  off size field
 *    0    8 magic "CKJITBIN"
 *    8    4 format version (little endian, like every integer here)
 *   12    4 header size (bytes before the payload, header checksum included)
 *   16   16 key
 *   32    8 payload size
 *   40    8 payload checksum (XXH3-64)
 *   48    2 arch length      50  2 kernel name length
 *   52    2 spec length      54  2 reserved (0)
 *   56    - arch, kernel name, canonical spec text (no NUL; the spec is
 *           informational: the key already covers the source it made)
 *    -    8 header checksum (XXH3-64 of every header byte before it)
 *    -    - payload
 * Pure functions over memory, so the reader can be fuzzed. */
#ifndef CKJIT_CACHE_ENTRY_H
#define CKJIT_CACHE_ENTRY_H

#include <stddef.h>
#include <stdint.h>
#include "key.h"

#define CKJIT_ENTRY_MAGIC "CKJITBIN"
#define CKJIT_ENTRY_FIXED_SIZE 56u
#define CKJIT_ENTRY_MAX_PAYLOAD (512u << 20)

typedef struct ckjit_entry_meta {
  ckjit_key key;
  char arch[64];
  char kernel[64];
  char spec[256];   /* canonical spec text ("" when unknown) */
} ckjit_entry_meta;

/* Encodes into a malloc'ed buffer.  Returns 0, or -1 (out of memory or
 * arch/kernel too long). */
int ckjit__entry_encode(const ckjit_entry_meta *meta, const void *payload, size_t payload_size,
                        uint8_t **out, size_t *out_size);

/* Verifies `buf` completely.  When `expect` is not NULL the stored key must
 * equal it.  On success returns 0 and points `payload` into `buf`; on any
 * failure returns -1 and sets `why` to a short reason. */
int ckjit__entry_decode(const uint8_t *buf, size_t size, const ckjit_key *expect,
                        ckjit_entry_meta *meta, const uint8_t **payload, size_t *payload_size,
                        const char **why);

#endif
