/* libFuzzer target: the specialization text parser, ckjit__spec_parse
 * (runtime/spec.c), on arbitrary text.
 *
 * A parsed spec must pass ckjit__spec_check, format to canonical text that
 * parses back to the same tuple and formats to the same text again, and
 * render to a kernel source (template substitution) without error.  A
 * rejected text must set an error status and message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "base/buffer.h"
#include "runtime/spec.h"

#define CHECK(cond)                                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "fuzz_spec: check failed: %s (line %d)\n", #cond, __LINE__); \
      abort();                                                                \
    }                                                                         \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  ckjit_spec spec;
  ckjit_status st = ckjit__spec_parse(text, &spec);
  if (st != CKJIT_SUCCESS) {
    CHECK(st == CKJIT_ERROR_INVALID_ARGUMENT);
    CHECK(ckjit_last_status() == st);
    CHECK(ckjit_last_error()[0] != 0);
    free(text);
    return 0;
  }
  CHECK(ckjit__spec_check(&spec) == CKJIT_SUCCESS);
  char canon[CKJIT_SPEC_TEXT_MAX], again[CKJIT_SPEC_TEXT_MAX];
  CHECK(ckjit__spec_format(&spec, canon, sizeof canon) == CKJIT_SUCCESS);
  ckjit_spec back;
  CHECK(ckjit__spec_parse(canon, &back) == CKJIT_SUCCESS);
  CHECK(ckjit__spec_equal(&spec, &back));
  CHECK(ckjit__spec_format(&back, again, sizeof again) == CKJIT_SUCCESS);
  CHECK(strcmp(canon, again) == 0);
  ckjit_buffer source = {0};
  CHECK(ckjit__spec_render(&spec, &source) == CKJIT_SUCCESS);
  CHECK(source.size > 0 && source.data && strlen(source.data) == source.size);
  ckjit__buf_free(&source);
  free(text);
  return 0;
}
