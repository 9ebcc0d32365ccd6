#include "library_path.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/buffer.h"

static const char *const system_dirs[] = {
    "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64", "/lib64", "/usr/lib", "/lib", "/usr/local/lib", NULL};

static int try_file(const char *path, char *out, size_t len) {
  struct stat st;
  char real[PATH_MAX];
  if (stat(path, &st) || !S_ISREG(st.st_mode) || !realpath(path, real)) return -1;
  ckjit__copy_str(out, len, real);
  return 0;
}

static int try_dir(const char *dir, size_t dir_len, const char *name, char *out, size_t len) {
  char path[PATH_MAX];
  if (dir_len == 0 || dir_len + strlen(name) + 2 > sizeof path) return -1;
  memcpy(path, dir, dir_len);
  path[dir_len] = '/';
  strcpy(path + dir_len + 1, name);
  return try_file(path, out, len);
}

int ckjit__find_library(const char *const *names, const char *const *extra_dirs,
                        const char *env_override, char *out, size_t len) {
  const char *v = env_override ? getenv(env_override) : NULL;
  if (v && *v) return try_file(v, out, len);
  const char *ld = getenv("LD_LIBRARY_PATH");
  for (const char *const *name = names; *name; name++) {
    for (const char *p = ld; p && *p;) {
      size_t n = strcspn(p, ":");
      if (!try_dir(p, n, *name, out, len)) return 0;
      p += n + (p[n] == ':');
    }
    for (const char *const *d = system_dirs; *d; d++)
      if (!try_dir(*d, strlen(*d), *name, out, len)) return 0;
    for (const char *const *d = extra_dirs; d && *d; d++)
      if (!try_dir(*d, strlen(*d), *name, out, len)) return 0;
  }
  return -1;
}

void ckjit__library_identity(const char *path, char *out, size_t len) {
  struct stat st;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (stat(path, &st)) {
    snprintf(out, len, "%.100s", base);
    return;
  }
  snprintf(out, len, "%.100s size=%lld mtime=%lld", base, (long long)st.st_size,
           (long long)st.st_mtime);
}

void ckjit__library_version(const char *path, int *major, int *minor) {
  *major = *minor = 0;
  const char *so = strstr(path, ".so.");
  if (!so) return;
  char *end;
  *major = (int)strtol(so + 4, &end, 10);
  if (*end == '.') *minor = (int)strtol(end + 1, NULL, 10);
}

void *ckjit__library_open_first(const char *const *names, char *path, size_t len) {
  for (; *names; names++) {
    void *h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    if (path) ckjit__copy_str(path, len, *names);
    return h;
  }
  return NULL;
}
