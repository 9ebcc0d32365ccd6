/* Kernel template specialization: fills @NAME@ placeholders. */
#ifndef CKJIT_RUNTIME_TEMPLATE_H
#define CKJIT_RUNTIME_TEMPLATE_H

#include "../base/buffer.h"
#include "ckjit/ckjit.h"

typedef struct ckjit_subst {
  const char *name;  /* placeholder name, [A-Z0-9_]+ */
  const char *value; /* replacement text */
} ckjit_subst;

/* Replaces every @NAME@ in `tmpl` by its value.  Deterministic: the same
 * inputs give byte-identical output.  Fails (CKJIT_ERROR_INTERNAL, with a
 * message) on a placeholder that has no value, a value that is never used,
 * a duplicate name, or a stray '@'. */
ckjit_status ckjit__template_render(const char *tmpl, const ckjit_subst *subst, int n,
                                    ckjit_buffer *out);

#endif
