#include "prewarm_job.h"

#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "runtime/arch.h"
#include "wall_clock.h"

int prewarm_no_kernel(const char *spec, const char *arch) {
  /* (A malformed arch is refused as unsupported too: not this case.) */
  return ckjit__arch_vendor(arch) != CKJIT_BACKEND_AUTO &&
         ckjit_spec_has_kernel(spec, arch) == CKJIT_ERROR_UNSUPPORTED;
}

int prewarm_plan_build(prewarm_plan *plan, const str_list *specs, const str_list *archs) {
  plan->jobs = NULL;
  plan->count = plan->no_kernel = 0;
  size_t n = specs->count * archs->count;
  if (n == 0) return 0;
  plan->jobs = calloc(n, sizeof *plan->jobs);
  if (!plan->jobs) return -1;
  for (size_t a = 0; a < archs->count; a++)
    for (size_t s = 0; s < specs->count; s++) {
      if (prewarm_no_kernel(specs->items[s], archs->items[a])) {
        plan->no_kernel++;
        continue;
      }
      prewarm_job *j = &plan->jobs[plan->count++];
      j->spec = specs->items[s];
      j->arch = archs->items[a];
    }
  return 0;
}

/* FNV-1a over "arch\0spec". */
static size_t pair_hash(const char *arch, const char *spec) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char *p = arch;; p++) {
    h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    if (!*p) break;
  }
  for (const char *p = spec; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
  return (size_t)(h ^ (h >> 29));
}

static int plan_grow_index(prewarm_plan *plan) {
  size_t n = plan->n_slots_ ? plan->n_slots_ * 2 : 64;
  size_t *slots = calloc(n, sizeof *slots);
  if (!slots) return -1;
  for (size_t i = 0; i < plan->count; i++) {
    size_t h = pair_hash(plan->jobs[i].arch, prewarm_job_spec(&plan->jobs[i])) & (n - 1);
    while (slots[h]) h = (h + 1) & (n - 1);
    slots[h] = i + 1;
  }
  free(plan->slots_);
  plan->slots_ = slots;
  plan->n_slots_ = n;
  return 0;
}

static char *plan_own(prewarm_plan *plan, const char *s) {
  if (!s) return NULL;
  if (plan->n_owned_ == plan->cap_owned_) {
    size_t cap = plan->cap_owned_ ? plan->cap_owned_ * 2 : 64;
    char **o = realloc(plan->owned_, cap * sizeof *o);
    if (!o) return NULL;
    plan->owned_ = o;
    plan->cap_owned_ = cap;
  }
  char *copy = strdup(s);
  if (copy) plan->owned_[plan->n_owned_++] = copy;
  return copy;
}

int prewarm_plan_add(prewarm_plan *plan, const char *arch, const char *spec,
                     const char *canonical, const char *origin) {
  const char *id = canonical ? canonical : spec;
  /* Load factor at most 1/2. */
  if ((plan->count + 1) * 2 > plan->n_slots_ && plan_grow_index(plan) != 0) return -1;
  size_t mask = plan->n_slots_ - 1;
  size_t h = pair_hash(arch, id) & mask;
  for (; plan->slots_[h]; h = (h + 1) & mask) {
    const prewarm_job *j = &plan->jobs[plan->slots_[h] - 1];
    if (!strcmp(j->arch, arch) && !strcmp(prewarm_job_spec(j), id)) return 0;
  }
  if (plan->count == plan->cap_) {
    size_t cap = plan->cap_ ? plan->cap_ * 2 : 64;
    prewarm_job *jobs = realloc(plan->jobs, cap * sizeof *jobs);
    if (!jobs) return -1;
    plan->jobs = jobs;
    plan->cap_ = cap;
  }
  prewarm_job j = {plan_own(plan, spec), plan_own(plan, arch), origin ? plan_own(plan, origin) : NULL,
                   canonical && strcmp(canonical, spec) ? plan_own(plan, canonical) : NULL};
  if (!j.spec || !j.arch || (origin && !j.origin) ||
      (canonical && strcmp(canonical, spec) && !j.canonical))
    return -1;
  plan->jobs[plan->count] = j;
  plan->slots_[h] = ++plan->count;
  return 1;
}

void prewarm_plan_free(prewarm_plan *plan) {
  free(plan->jobs);
  for (size_t i = 0; i < plan->n_owned_; i++) free(plan->owned_[i]);
  free(plan->owned_);
  free(plan->slots_);
  memset(plan, 0, sizeof *plan);
}

int prewarm_add_default_specs(str_list *specs) {
  size_t n = ckjit_default_spec_count();
  if (n == 0) {
    fprintf(stderr, "error: the library has no default specs (ckjit_default_spec_count() == 0)\n");
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    char buf[512];
    ckjit_status st = ckjit_default_spec(i, buf, sizeof buf);
    if (st != CKJIT_SUCCESS) {
      fprintf(stderr, "error: ckjit_default_spec(%zu) failed: %s: %s\n", i,
              ckjit_status_string(st), ckjit_last_error());
      return -1;
    }
    if (str_list_add_unique(specs, buf) != 0) {
      fprintf(stderr, "error: out of memory\n");
      return -1;
    }
  }
  return 0;
}

static void copy_str(char *dst, size_t len, const char *src) {
  if (!src) src = "";
  size_t n = strlen(src);
  if (n >= len) n = len - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

void prewarm_run_job(const prewarm_job *job, prewarm_result *out) {
  memset(out, 0, sizeof *out);
  ckjit_compile_result res;
  memset(&res, 0, sizeof res);
  double t0 = wall_clock_ms();
  ckjit_status st = ckjit_compile_spec(prewarm_job_spec(job), job->arch, &res);
  double t1 = wall_clock_ms();
  out->status = (int)st;
  /* CKJIT_ERROR_CACHE: compiled (or found in memory) but the entry did not
   * reach the disk; the result is filled as on success. */
  out->not_stored = st == CKJIT_ERROR_CACHE && res.key[0];
  if (st != CKJIT_SUCCESS) {
    out->ms = t1 - t0;
    const char *err = ckjit_last_error();
    copy_str(out->error, sizeof out->error,
             err && *err ? err : "(the library gave no error message)");
    if (!out->not_stored) return;
  }
  out->cached = res.cached != 0;
  out->stored = res.stored != 0;
  out->ms = res.ms > 0 ? res.ms : t1 - t0;
  out->code_size = res.code_size;
  res.key[sizeof res.key - 1] = '\0';
  res.kernel[sizeof res.kernel - 1] = '\0';
  copy_str(out->key, sizeof out->key, res.key);
  copy_str(out->kernel, sizeof out->kernel, res.kernel);
}

void prewarm_run_plan(const prewarm_plan *plan, prewarm_on_result on_result, void *ctx) {
  prewarm_result *r = malloc(sizeof *r);
  prewarm_result fallback; /* only when malloc fails: it is only ~4 KiB */
  if (!r) r = &fallback;
  for (size_t i = 0; i < plan->count; i++) {
    prewarm_run_job(&plan->jobs[i], r);
    on_result(ctx, i, r);
  }
  if (r != &fallback) free(r);
}

void prewarm_summary_add(prewarm_summary *s, const prewarm_result *r) {
  s->total++;
  if (r->status != CKJIT_SUCCESS) {
    s->failed++;
    if (r->signal) s->crashed++;
    if (r->timed_out) s->timed_out++;
    if (r->not_stored) s->not_stored++;
  } else if (r->cached) {
    s->cached++;
  } else {
    s->compiled++;
    s->compile_ms += r->ms;
  }
}

void prewarm_error_first_line(const prewarm_result *r, char *buf, size_t len) {
  const char *e = r->status != CKJIT_SUCCESS ? r->error : "";
  size_t n = strcspn(e, "\r\n");
  if (n >= len) n = len - 1;
  memcpy(buf, e, n);
  buf[n] = '\0';
}

static const char *result_word(const prewarm_result *r) {
  if (r->status != CKJIT_SUCCESS) return "FAILED";
  return r->cached ? "cached" : "compiled";
}

static int count_digits(size_t n) {
  int d = 1;
  while (n >= 10) {
    n /= 10;
    d++;
  }
  return d;
}

void prewarm_print_line(FILE *out, size_t index, size_t total, const prewarm_job *job,
                        const prewarm_result *r, int verbose) {
  int w = count_digits(total);
  fprintf(out, "[%*zu/%zu] %-8s %-7s %8.2f ms  ", w, index + 1, total, result_word(r),
          job->arch[0] ? job->arch : "-", r->ms);
  if (r->status == CKJIT_SUCCESS) {
    fprintf(out, "%s %7llu B  %s\n", r->key, (unsigned long long)r->code_size, job->spec);
    return;
  }
  char line[512];
  prewarm_error_first_line(r, line, sizeof line);
  fprintf(out, "%s\n    %s%s%s: %s\n", job->spec, job->origin ? job->origin : "",
          job->origin ? ": " : "", ckjit_status_string((ckjit_status)r->status), line);
  if (verbose) {
    /* The rest of the message (compiler log, source lines), indented. */
    const char *p = r->error + strcspn(r->error, "\r\n");
    while (*p) {
      while (*p == '\r' || *p == '\n') p++;
      if (!*p) break;
      size_t n = strcspn(p, "\r\n");
      fprintf(out, "      %.*s\n", (int)n, p);
      p += n;
    }
  }
}

static void print_workers(FILE *out, const prewarm_summary *s) {
  if (s->workers) fprintf(out, ", %zu worker%s", s->workers, s->workers == 1 ? "" : "s");
}

void prewarm_print_summary(FILE *out, const prewarm_summary *s) {
  if (s->compiled == 0 && s->failed == 0) {
    fprintf(out, "nothing to compile: all %zu already cached (wall time %.2f s", s->cached,
            s->wall_ms / 1e3);
    print_workers(out, s);
    fputs(")\n", out);
  } else {
    fprintf(out, "compiled %zu, already cached %zu, failed %zu of %zu; wall time %.2f s",
            s->compiled, s->cached, s->failed, s->total, s->wall_ms / 1e3);
    print_workers(out, s);
    if (s->compiled > 0)
      fprintf(out, " (compiler %.2f s, %.1f ms per kernel)", s->compile_ms / 1e3,
              s->compile_ms / (double)s->compiled);
    fputc('\n', out);
  }
  if (s->crashed || s->timed_out)
    fprintf(out, "%zu worker crash%s, %zu time-out%s\n", s->crashed, s->crashed == 1 ? "" : "es",
            s->timed_out, s->timed_out == 1 ? "" : "s");
  if (s->not_stored)
    fprintf(out, "not stored in the disk cache: %zu (built, but the disk is full or read-only or "
                 "something is in the way: see the errors; counted as failed)\n",
            s->not_stored);
  if (s->duplicates)
    fprintf(out, "%zu duplicate%s compiled once\n", s->duplicates,
            s->duplicates == 1 ? "" : "s");
  if (s->no_kernel)
    fprintf(out, "%zu default spec%s skipped: no kernel for the arch (see ckjit_spec_has_kernel)\n",
            s->no_kernel, s->no_kernel == 1 ? "" : "s");
}

void prewarm_json_result(json_writer *w, const prewarm_job *job, const prewarm_result *r) {
  json_begin_object(w, NULL);
  json_string(w, "spec", job->spec);
  json_string(w, "arch", job->arch);
  if (job->canonical) json_string(w, "canonical", job->canonical);
  if (job->origin) json_string(w, "origin", job->origin);
  json_string(w, "result", r->status != CKJIT_SUCCESS ? "failed"
                           : r->cached                ? "cached"
                                                      : "compiled");
  json_double(w, "ms", r->ms);
  if (r->status == CKJIT_SUCCESS) {
    json_string(w, "key", r->key);
    json_string(w, "kernel", r->kernel);
    json_uint(w, "code_size", r->code_size);
  } else {
    json_string(w, "status", ckjit_status_string((ckjit_status)r->status));
    json_string(w, "error", r->error);
    if (r->signal) json_int(w, "signal", r->signal);
    if (r->timed_out) json_bool(w, "timed_out", 1);
    if (r->not_stored) {
      json_string(w, "key", r->key);
      json_string(w, "kernel", r->kernel);
      json_uint(w, "code_size", r->code_size);
    }
  }
  json_bool(w, "stored", r->stored);
  json_end_object(w);
}

void prewarm_json_summary(json_writer *w, const char *key, const prewarm_summary *s) {
  json_begin_object(w, key);
  json_uint(w, "total", s->total);
  json_uint(w, "compiled", s->compiled);
  json_uint(w, "cached", s->cached);
  json_uint(w, "failed", s->failed);
  json_uint(w, "crashed", s->crashed);
  json_uint(w, "timed_out", s->timed_out);
  json_uint(w, "not_stored", s->not_stored);
  json_uint(w, "duplicates", s->duplicates);
  json_uint(w, "no_kernel", s->no_kernel);
  json_uint(w, "workers", s->workers);
  json_double(w, "compile_ms", s->compile_ms);
  json_double(w, "wall_ms", s->wall_ms);
  json_end_object(w);
}
