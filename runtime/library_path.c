#include "library_path.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/buffer.h"
#include "../cache/payload_check.h"

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

/* The GNU build-id note of the ELF file at `path` as hex into `hex`; 0
 * when it has none (or is not ELF).  The note lives in a PT_NOTE segment;
 * libelf maps the file and reads only the headers and the notes, not
 * NVRTC's 100 MB of sections. */
static int build_id(const char *path, char *hex, size_t len) {
  if (!ckjit__libelf_ready()) return 0;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int found = 0;
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  size_t segments = 0;
  if (e && elf_kind(e) == ELF_K_ELF && elf_getphdrnum(e, &segments) == 0) {
    for (size_t i = 0; i < segments && !found; i++) {
      GElf_Phdr ph;
      if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_NOTE) continue;
      Elf_Data *d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
      GElf_Nhdr nh;
      size_t off = 0, name_at, desc_at;
      while (d && !found && (off = gelf_getnote(d, off, &nh, &name_at, &desc_at)) > 0) {
        const unsigned char *note = d->d_buf;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(note + name_at, "GNU", 4) &&
            nh.n_descsz > 0 && 2 * (size_t)nh.n_descsz < len) {
          for (size_t k = 0; k < nh.n_descsz; k++)
            snprintf(hex + 2 * k, 3, "%02x", note[desc_at + k]);
          found = 1;
        }
      }
    }
  }
  if (e) elf_end(e);
  close(fd);
  return found;
}

/* The build-id names the build itself, so a cache prewarmed on one machine
 * serves another with the same compiler build; the file's mtime (used only
 * where there is no build-id) and its name differ between installs of one
 * build. */
void ckjit__library_identity(const char *path, char *out, size_t len) {
  struct stat st;
  char id[2 * 32 + 1];
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (stat(path, &st)) {
    snprintf(out, len, "%.100s", base);
    return;
  }
  if (build_id(path, id, sizeof id)) {
    /* The file's own name varies with how the build was installed
     * (libnvrtc.so.13 here, libnvrtc.so.13.0.88 behind symlinks there):
     * only the library's stem goes with the build-id. */
    const char *so = strstr(base, ".so");
    const int stem = so ? (int)(so - base) : (int)strlen(base);
    snprintf(out, len, "%.*s size=%lld build-id=%s", stem < 100 ? stem : 100, base,
             (long long)st.st_size, id);
  }
  else
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
