/* Spec tuple <-> text, validation, and rendering of the kernel source. */
#include "../base/buffer.h"
#include "spec.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "../base/error.h"
#include "abi/dtypes.h"

static const ckjit_family *const families[CKJIT_FAMILY_COUNT_] = {
    [CKJIT_FAMILY_ELEMENTWISE] = &ckjit__family_elementwise,
    [CKJIT_FAMILY_TRANSPOSE] = &ckjit__family_transpose,
    [CKJIT_FAMILY_REDUCE] = &ckjit__family_reduce,
    [CKJIT_FAMILY_ROWNORM] = &ckjit__family_rownorm,
    [CKJIT_FAMILY_TOPK_SOFTMAX] = &ckjit__family_topk_softmax,
    [CKJIT_FAMILY_GEMM_MMA] = &ckjit__family_gemm_mma,
    [CKJIT_FAMILY_GEMM_SIMT] = &ckjit__family_gemm_simt,
    [CKJIT_FAMILY_GEMM_REDUCE] = &ckjit__family_gemm_reduce,
    [CKJIT_FAMILY_GEMM_WGMMA] = &ckjit__family_gemm_wgmma,
    [CKJIT_FAMILY_GEMM_MFMA] = &ckjit__family_gemm_mfma,
    [CKJIT_FAMILY_GEMM_TF32] = &ckjit__family_gemm_tf32,
    [CKJIT_FAMILY_ATTENTION_WGMMA] = &ckjit__family_attention_wgmma,
    [CKJIT_FAMILY_ATTENTION_MMA] = &ckjit__family_attention_mma,
    [CKJIT_FAMILY_ATTENTION_MFMA] = &ckjit__family_attention_mfma,
    [CKJIT_FAMILY_ATTENTION_SIMT] = &ckjit__family_attention_simt,
    [CKJIT_FAMILY_PAGED_APPEND] = &ckjit__family_paged_append,
    [CKJIT_FAMILY_ATTENTION_DECODE] = &ckjit__family_attention_decode,
    [CKJIT_FAMILY_ATTENTION_COMBINE] = &ckjit__family_attention_combine,
    [CKJIT_FAMILY_GEMM_FP8] = &ckjit__family_gemm_fp8,
    [CKJIT_FAMILY_MOE_SORT] = &ckjit__family_moe_sort,
    [CKJIT_FAMILY_MOE_PERMUTE] = &ckjit__family_moe_permute,
};

const char *const ckjit__dtype_names[] = {CKJIT_FLOAT_DTYPES(CKJIT_TYPE_NAME) NULL};
const char *const ckjit__dtype_types[] = {CKJIT_FLOAT_DTYPES(CKJIT_TYPE_CXX) NULL};

int32_t ckjit__dtype_param_value(ckjit_dtype dtype) {
  return dtype == CKJIT_F32 ? 0 : dtype == CKJIT_F16 ? 1 : 2;
}

size_t ckjit__dtype_param_size(int32_t value) { return value == 0 ? 4 : 2; }

const ckjit_family *ckjit__family_get(uint32_t id) {
  return id < CKJIT_FAMILY_COUNT_ ? families[id] : NULL;
}

static int enum_count(const ckjit_param_desc *p) {
  int n = 0;
  while (p->names[n]) n++;
  return n;
}

ckjit_status ckjit__spec_check(const ckjit_spec *spec) {
  const ckjit_family *fam = ckjit__family_get(spec->family);
  if (!fam) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: unknown family %u", spec->family);
  for (int i = 0; i < CKJIT_MAX_PARAMS; i++) {
    int32_t v = spec->value[i];
    if (i >= fam->n_params) {
      if (v) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: %s has no parameter %d", fam->name, i);
      continue;
    }
    const ckjit_param_desc *p = &fam->params[i];
    int lo = p->names ? 0 : p->min, hi = p->names ? enum_count(p) - 1 : p->max;
    if (v < lo || v > hi)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: %s.%s=%d out of range [%d, %d]",
                         fam->name, p->name, v, lo, hi);
  }
  return fam->check ? fam->check(spec) : CKJIT_SUCCESS;
}

ckjit_status ckjit__spec_parse(const char *text, ckjit_spec *out) {
  if (!text) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: NULL");
  if (strlen(text) >= CKJIT_SPEC_TEXT_MAX)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: longer than %d characters",
                       CKJIT_SPEC_TEXT_MAX - 1);
  memset(out, 0, sizeof *out);
  size_t name_len = strcspn(text, ":");
  const ckjit_family *fam = NULL;
  for (uint32_t i = 0; i < CKJIT_FAMILY_COUNT_; i++)
    if (strlen(families[i]->name) == name_len && !strncmp(families[i]->name, text, name_len)) {
      fam = families[i];
      out->family = i;
    }
  if (!fam) {
    ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec '%s': unknown kernel family '%.*s' (known:", text,
                (int)name_len, text);
    for (int i = 0; i < CKJIT_FAMILY_COUNT_; i++) ckjit__error_append(" %s", families[i]->name);
    ckjit__error_append(")");
    return CKJIT_ERROR_INVALID_ARGUMENT;
  }
  for (int i = 0; i < fam->n_params; i++) out->value[i] = fam->params[i].def;

  const char *p = text + name_len;
  if (*p == ':') p++;
  else if (*p) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec '%s': expected ':'", text);
  unsigned given = 0;
  while (*p) {
    size_t item = strcspn(p, ","), key_len = strcspn(p, "=,");
    if (item == 0 || (p[item] == ',' && !p[item + 1]))
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec '%s': empty item", text);
    if (key_len >= item)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec '%s': '%.*s' is not key=value", text,
                         (int)item, p);
    const char *val = p + key_len + 1;
    size_t val_len = item - key_len - 1;
    int idx = -1;
    for (int i = 0; i < fam->n_params; i++)
      if (strlen(fam->params[i].name) == key_len && !strncmp(fam->params[i].name, p, key_len)) idx = i;
    if (idx < 0)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec '%s': %s has no parameter '%.*s'", text,
                         fam->name, (int)key_len, p);
    if (given & (1u << idx))
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec '%s': '%s' given twice", text,
                         fam->params[idx].name);
    given |= 1u << idx;
    const ckjit_param_desc *pd = &fam->params[idx];
    int found = 0;
    if (pd->names) {
      for (int v = 0; pd->names[v]; v++)
        if (strlen(pd->names[v]) == val_len && !strncmp(pd->names[v], val, val_len)) {
          out->value[idx] = v;
          found = 1;
        }
    } else if (val_len > 0 && val_len < 10 && strspn(val, "0123456789") >= val_len) {
      char num[12];
      memcpy(num, val, val_len);
      num[val_len] = '\0';
      long v = strtol(num, NULL, 10);
      if (v >= pd->min && v <= pd->max) {
        out->value[idx] = (int32_t)v;
        found = 1;
      }
    }
    if (!found) {
      ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec '%s': bad value '%.*s' for %s (", text,
                  (int)val_len, val, pd->name);
      if (pd->names)
        for (int v = 0; pd->names[v]; v++) ckjit__error_append("%s%s", v ? "|" : "", pd->names[v]);
      else
        ckjit__error_append("%d..%d", pd->min, pd->max);
      ckjit__error_append(")");
      return CKJIT_ERROR_INVALID_ARGUMENT;
    }
    p += item;
    if (*p == ',') p++;
  }
  if (fam->complete) fam->complete(out, given);
  return ckjit__spec_check(out);
}

ckjit_status ckjit__spec_format(const ckjit_spec *spec, char *buf, size_t len) {
  ckjit_status st = ckjit__spec_check(spec);
  if (st) return st;
  const ckjit_family *fam = ckjit__family_get(spec->family);
  size_t used = (size_t)snprintf(buf, len, "%s:", fam->name);
  for (int i = 0; i < fam->n_params && used < len; i++) {
    const ckjit_param_desc *p = &fam->params[i];
    const char *sep = i ? "," : "";
    if (p->names)
      used += (size_t)snprintf(buf + used, len - used, "%s%s=%s", sep, p->name,
                               p->names[spec->value[i]]);
    else
      used += (size_t)snprintf(buf + used, len - used, "%s%s=%d", sep, p->name, spec->value[i]);
  }
  if (used >= len) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: buffer too small");
  return CKJIT_SUCCESS;
}

#define PARAMETERS_LINE "\n// @PARAMETERS@\n"

/* The #define of parameter `p` with value `v` (see ckjit_param_desc). */
static int render_param(ckjit_buffer *out, const ckjit_param_desc *p, int32_t v) {
  char macro[48], line[160];
  if (p->macro) {
    ckjit__copy_str(macro, sizeof macro, p->macro);
  } else {
    size_t k = 0;
    for (; p->name[k] && k < sizeof macro - 1; k++) macro[k] = (char)toupper((unsigned char)p->name[k]);
    macro[k] = '\0';
  }
  int bad = 0;
  if (p->symbols) {
    for (int i = 0; p->symbols[i]; i++) {
      snprintf(line, sizeof line, "#define %s %d\n", p->symbols[i], i);
      bad |= ckjit__buf_append_str(out, line);
    }
    snprintf(line, sizeof line, "#define %s %s\n", macro, p->symbols[v]);
  } else if (p->types) {
    snprintf(line, sizeof line, "#define %s %s\n", macro, p->types[v]);
  } else {
    snprintf(line, sizeof line, "#define %s %d\n", macro, (int)v);
  }
  return bad | ckjit__buf_append_str(out, line);
}

ckjit_status ckjit__spec_render(const ckjit_spec *spec, ckjit_buffer *source) {
  char text[CKJIT_SPEC_TEXT_MAX];
  ckjit_status st = ckjit__spec_format(spec, text, sizeof text);
  if (st) return st;
  const ckjit_family *fam = ckjit__family_get(spec->family);
  const ckjit_embedded_file *file = ckjit__embedded_find(fam->source);
  if (!file) return ckjit__fail(CKJIT_ERROR_INTERNAL, "kernel source %s not embedded", fam->source);
  /* The block replaces the template's one PARAMETERS_LINE, after its
   * includes: macros defined before them would rewrite the headers' own
   * identifiers (a template parameter named VEC, say). */
  const char *slot = strstr(file->data, PARAMETERS_LINE);
  if (!slot || strstr(slot + 1, PARAMETERS_LINE))
    return ckjit__fail(CKJIT_ERROR_INTERNAL, "kernel source %s needs exactly one line '%.*s'",
                       fam->source, (int)strlen(PARAMETERS_LINE) - 2, &PARAMETERS_LINE[1]);
  ckjit_buffer out = {0};
  int bad = ckjit__buf_append(&out, file->data, (size_t)(slot - file->data) + 1);
  bad |= ckjit__buf_append_str(&out, "// ");
  bad |= ckjit__buf_append_str(&out, text);
  bad |= ckjit__buf_append_str(&out, " (written by the spec renderer)\n");
  for (int i = 0; i < fam->n_params; i++) bad |= render_param(&out, &fam->params[i], spec->value[i]);
  const char *rest = slot + strlen(PARAMETERS_LINE) - 1;
  bad |= ckjit__buf_append(&out, rest, file->size - (size_t)(rest - file->data));
  if (bad) {
    ckjit__buf_free(&out);
    return ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "rendering %s: out of memory", fam->source);
  }
  ckjit__buf_free(source);
  *source = out;
  return CKJIT_SUCCESS;
}

ckjit_status ckjit__spec_targets(const ckjit_spec *spec, const char *arch) {
  const ckjit_family *fam = ckjit__family_get(spec->family);
  if (!fam) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "unknown kernel family %u", spec->family);
  if (!fam->targets || fam->targets(arch)) return CKJIT_SUCCESS;
  return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "%s has no kernel for %s: it runs on %s", fam->name, arch,
                     fam->targets_text);
}
