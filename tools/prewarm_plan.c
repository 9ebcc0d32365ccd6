/* ckjit-prewarm's planning (prewarm_plan.h). */
#include "prewarm_plan.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_read.h"
#include "manifest.h"
#include "runtime/arch.h"
#include "runtime/spec.h"

int plan_early_failure(run_state *s, const char *arch, const char *spec, const char *origin,
                       ckjit_status st, const char *fmt, ...) {
  if (s->n_early == s->cap_early) {
    size_t cap = s->cap_early ? s->cap_early * 2 : 16;
    early_failure *e = realloc(s->early, cap * sizeof *e);
    if (!e) return -1;
    s->early = e;
    s->cap_early = cap;
  }
  early_failure *e = &s->early[s->n_early];
  memset(e, 0, sizeof *e);
  e->result = calloc(1, sizeof *e->result);
  e->job.arch = strdup(arch ? arch : "");
  e->job.spec = strdup(spec ? spec : "");
  e->job.origin = origin ? strdup(origin) : NULL;
  if (!e->result || !e->job.arch || !e->job.spec || (origin && !e->job.origin)) {
    free(e->result);
    free((char *)e->job.arch);
    free((char *)e->job.spec);
    free((char *)e->job.origin);
    return -1;
  }
  e->result->status = (int)st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->result->error, sizeof e->result->error, fmt, ap);
  va_end(ap);
  s->n_early++;
  return 0;
}


/* Appends a target arch (unless listed already) and why it is invalid, if
 * it is.  The one way into the list, however the arch was chosen (--arch,
 * CKJIT_ARCH, the GPU's), so `archs` and `arch_error` always match.
 * Returns 0, or -1 out of memory. */
int plan_add_arch(planner *pl, const char *arch) {
  for (size_t i = 0; i < pl->archs.count; i++)
    if (!strcmp(pl->archs.items[i], arch)) return 0;
  size_t n = pl->archs.count;
  char **errors = realloc(pl->arch_error, (n + 1) * sizeof *errors);
  if (!errors) return -1;
  pl->arch_error = errors;
  errors[n] = NULL;
  /* By syntax and the known-arch tables; the compiler version is checked
   * again in the worker. */
  if (ckjit__arch_validate(arch, 0, 0) != CKJIT_SUCCESS) {
    if (!(errors[n] = strdup(ckjit_last_error()))) return -1;
  } else if (str_list_add_unique(&pl->valid_archs, arch) != 0) {
    return -1;
  }
  if (str_list_add_unique(&pl->archs, arch) != 0) {
    free(errors[n]);
    errors[n] = NULL;
    return -1;
  }
  return 0;
}

/* Whether an early failure (arch, spec) without an origin was reported. */
static int early_seen(const run_state *s, const char *arch, const char *spec) {
  for (size_t i = 0; i < s->n_early; i++)
    if (!s->early[i].job.origin && !strcmp(s->early[i].job.arch, arch) &&
        !strcmp(s->early[i].job.spec, spec))
      return 1;
  return 0;
}

/* Adds `spec_text` for `arch`, or for every arch of the list (arch NULL).
 * Each (spec, arch) pair is one item: a bad spec or arch fails its pairs,
 * named as given.  `defaults` (a spec of --all): left out, and counted,
 * for an arch it has no kernel for; a spec the user named fails there. */
int plan_spec(planner *pl, const char *arch, const char *spec_text, const char *origin,
                     int defaults) {
  run_state *s = pl->s;
  ckjit_spec spec;
  char canon[CKJIT_SPEC_TEXT_MAX], spec_err[1024] = "";
  ckjit_status spec_st = ckjit__spec_parse(spec_text, &spec);
  if (spec_st == CKJIT_SUCCESS) spec_st = ckjit__spec_format(&spec, canon, sizeof canon);
  if (spec_st != CKJIT_SUCCESS) snprintf(spec_err, sizeof spec_err, "%s", ckjit_last_error());

  size_t n = arch ? 1 : pl->archs.count;
  if (n == 0) {
    pl->need_default_arch = 1;
    return 0;
  }
  for (size_t a = 0; a < n; a++) {
    const char *ar = arch ? arch : pl->archs.items[a];
    char arch_err[1024] = "";
    ckjit_status arch_st = CKJIT_SUCCESS;
    if (arch) {
      arch_st = ckjit__arch_validate(arch, 0, 0);
      if (arch_st) snprintf(arch_err, sizeof arch_err, "%s", ckjit_last_error());
    } else if (pl->arch_error[a]) {
      arch_st = CKJIT_ERROR_UNSUPPORTED;
      snprintf(arch_err, sizeof arch_err, "%s", pl->arch_error[a]);
    }
    int rc;
    if (spec_st != CKJIT_SUCCESS || arch_st != CKJIT_SUCCESS) {
      if (!origin && early_seen(s, ar, spec_text)) {
        s->summary.duplicates++;
        continue;
      }
      rc = spec_st != CKJIT_SUCCESS
               ? plan_early_failure(s, ar, spec_text, origin, spec_st, "%s", spec_err)
               : plan_early_failure(s, ar, spec_text, origin, arch_st, "%s", arch_err);
      if (rc) return -1;
      continue;
    }
    char canonical_arch[CKJIT_ARCH_MAX]; /* one item per target, whatever its feature order */
    ar = ckjit__arch_canonical(ar, canonical_arch);
    if (defaults && prewarm_no_kernel(canon, ar)) {
      s->summary.no_kernel++;
      continue;
    }
    rc = prewarm_plan_add(&s->plan, ar, spec_text, canon, origin);
    if (rc < 0) return -1;
    if (rc == 0) s->summary.duplicates++;
  }
  return 0;
}

typedef struct manifest_ctx {
  planner *pl;
  const char *name;
} manifest_ctx;

static int on_manifest_line(void *ctx, const manifest_entry *e) {
  manifest_ctx *m = ctx;
  char origin[600], arch[MANIFEST_MAX_FIELD + 1], spec[MANIFEST_MAX_FIELD + 1];
  snprintf(origin, sizeof origin, "%s:%zu", m->name, e->line);
  if (e->error) {
    /* The raw text, cut short, stands for the spec. */
    char text[200];
    size_t n = e->text_len < sizeof text - 1 ? e->text_len : sizeof text - 1;
    for (size_t i = 0; i < n; i++) {
      unsigned char c = (unsigned char)e->text[i];
      text[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    text[n] = '\0';
    if (plan_early_failure(m->pl->s, "", text, origin, CKJIT_ERROR_INVALID_ARGUMENT,
                  "malformed manifest line: %s", e->error) != 0)
      return (m->pl->oom = 1);
    return 0;
  }
  memcpy(spec, e->spec, e->spec_len);
  spec[e->spec_len] = '\0';
  if (e->arch) {
    memcpy(arch, e->arch, e->arch_len);
    arch[e->arch_len] = '\0';
  }
  if (plan_spec(m->pl, e->arch ? arch : NULL, spec, origin, 0) != 0) return (m->pl->oom = 1);
  return 0;
}

int plan_manifest(planner *pl, const char *path) {
  size_t len = 0;
  int err = 0;
  char *text = file_read_all(path, FILE_READ_STDIN, 0, &len, &err);
  const char *name = strcmp(path, "-") ? path : "<stdin>";
  if (!text)
    return plan_early_failure(pl->s, "", "", name, CKJIT_ERROR_INVALID_ARGUMENT,
                     "cannot read the manifest %s: %s", name, strerror(err));
  manifest_ctx m = {pl, name};
  manifest_parse(text, len, on_manifest_line, &m);
  free(text);
  return pl->oom ? -1 : 0;
}
