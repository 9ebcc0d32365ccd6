/* Prewarm manifests: which specializations to compile, one per line.
 *
 * A manifest is text; each line is one of
 *
 *   ckjit-spec 1 ARCH SPEC    a record, as CKJIT_RECORD=FILE appends them
 *   ARCH SPEC                 SPEC for ARCH
 *   SPEC                      SPEC for the archs given with --arch
 *
 * Fields are separated by spaces or tabs; leading and trailing blanks and a
 * CR before the LF are ignored.  '#' starts a comment that runs to the end
 * of the line (no arch or spec contains '#').  Blank and comment-only lines
 * are skipped.  A field longer than MANIFEST_MAX_FIELD bytes, a control
 * character or NUL byte, a record of another version, too many fields or an
 * arch field that is not an arch name makes the line malformed: it is
 * reported with its line number, and parsing goes on with the next line.
 *
 * The parser only splits lines into fields: whether SPEC names a real
 * specialization and ARCH a supported arch is checked by the caller.  It is
 * a pure function over a buffer (no allocation, no global state), so it can
 * be fuzzed. */
#ifndef CKJIT_TOOLS_MANIFEST_H
#define CKJIT_TOOLS_MANIFEST_H

#include <stddef.h>

#define MANIFEST_MAX_FIELD 1024
#define MANIFEST_RECORD_TAG "ckjit-spec"
#define MANIFEST_RECORD_VERSION "1"

typedef struct manifest_entry {
  size_t line;       /* 1-based line number */
  const char *arch;  /* points into the buffer, not NUL-terminated; NULL when
                        the line names no arch (or is malformed) */
  size_t arch_len;
  const char *spec;  /* points into the buffer; NULL when malformed */
  size_t spec_len;
  int record;        /* 1 for the "ckjit-spec 1 ARCH SPEC" form */
  const char *error; /* NULL, or why the line is malformed (static text) */
  const char *text;  /* the line without its comment and outer blanks */
  size_t text_len;
} manifest_entry;

/* Called once per non-blank, non-comment line, in order.  A nonzero return
 * stops parsing. */
typedef int (*manifest_cb)(void *ctx, const manifest_entry *entry);

/* Parses `len` bytes of `text` (which need not be NUL-terminated and may
 * contain NUL bytes).  Returns 0 after the last line, or the first nonzero
 * value returned by `cb`. */
int manifest_parse(const char *text, size_t len, manifest_cb cb, void *ctx);

#endif
