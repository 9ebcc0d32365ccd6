/* @NAME@ placeholder substitution.  A template may not contain '@' anywhere
 * else, so every placeholder is found and none can be half-filled. */
#include "template.h"

#include <stdlib.h>
#include <string.h>

#include "../base/error.h"

static int is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int line_of(const char *tmpl, const char *at) {
  int line = 1;
  for (const char *p = tmpl; p < at; p++) line += *p == '\n';
  return line;
}

ckjit_status ckjit__template_render(const char *tmpl, const ckjit_subst *subst, int n,
                                    ckjit_buffer *out) {
  if (!tmpl || n < 0 || (n > 0 && !subst) || !out)
    return ckjit__fail(CKJIT_ERROR_INTERNAL, "template: invalid arguments");
  if (n > 64) return ckjit__fail(CKJIT_ERROR_INTERNAL, "template: too many parameters (%d)", n);
  for (int i = 0; i < n; i++) {
    if (!subst[i].name || !subst[i].value || !subst[i].name[0])
      return ckjit__fail(CKJIT_ERROR_INTERNAL, "template: parameter %d has no name or value", i);
    for (const char *c = subst[i].name; *c; c++)
      if (!is_name_char(*c))
        return ckjit__fail(CKJIT_ERROR_INTERNAL, "template: bad parameter name '%s'", subst[i].name);
    for (int j = 0; j < i; j++)
      if (!strcmp(subst[i].name, subst[j].name))
        return ckjit__fail(CKJIT_ERROR_INTERNAL, "template: parameter '%s' given twice",
                           subst[i].name);
  }

  char used[64] = {0};
  ckjit_buffer result = {0};
  const char *p = tmpl;
  for (;;) {
    const char *at = strchr(p, '@');
    if (!at) {
      if (ckjit__buf_append_str(&result, p)) goto oom;
      break;
    }
    if (ckjit__buf_append(&result, p, (size_t)(at - p))) goto oom;
    const char *name = at + 1, *end = name;
    while (is_name_char(*end)) end++;
    if (end == name || *end != '@') {
      ckjit__buf_free(&result);
      return ckjit__fail(CKJIT_ERROR_INTERNAL, "template: stray '@' at line %d",
                         line_of(tmpl, at));
    }
    size_t len = (size_t)(end - name);
    int found = -1;
    for (int i = 0; i < n; i++)
      if (strlen(subst[i].name) == len && !memcmp(subst[i].name, name, len)) found = i;
    if (found < 0) {
      ckjit__buf_free(&result);
      return ckjit__fail(CKJIT_ERROR_INTERNAL, "template: no value for @%.*s@ at line %d",
                         (int)len, name, line_of(tmpl, at));
    }
    used[found] = 1;
    if (ckjit__buf_append_str(&result, subst[found].value)) goto oom;
    p = end + 1;
  }
  for (int i = 0; i < n; i++)
    if (!used[i]) {
      ckjit__buf_free(&result);
      return ckjit__fail(CKJIT_ERROR_INTERNAL, "template: parameter '%s' is never used",
                         subst[i].name);
    }
  ckjit__buf_free(out);
  *out = result;
  return CKJIT_SUCCESS;
oom:
  ckjit__buf_free(&result);
  return ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "template: out of memory");
}
