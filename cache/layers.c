#include "layers.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/log.h"

int ckjit__layer_check(const char *dir, char *why, size_t len) {
  struct stat st;
  if (dir[0] != '/') {
    snprintf(why, len, "not an absolute path");
    return -1;
  }
  if (strlen(dir) >= CKJIT_PATH_MAX) {
    snprintf(why, len, "path too long");
    return -1;
  }
  if (stat(dir, &st) != 0) {
    snprintf(why, len, "%m");
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(why, len, "not a directory");
    return -1;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(why, len, "writable by group or others (mode %03o)", (unsigned)(st.st_mode & 0777));
    return -1;
  }
  if (access(dir, R_OK | X_OK) != 0) {
    snprintf(why, len, "not readable: %m");
    return -1;
  }
  return 0;
}

static int same_dir(const char *a, const char *b) {
  struct stat sa, sb;
  if (!a[0] || !b[0] || stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int ckjit__disk_add_layer(ckjit_disk_cache *c, const char *dir) {
  char why[256];
  if (ckjit__layer_check(dir, why, sizeof why) != 0) {
    CKJIT_WARN("CKJIT_CACHE_PATH: skipping %s (%s)", dir, why);
    return -1;
  }
  if (same_dir(dir, c->dir)) {
    CKJIT_DEBUG("CKJIT_CACHE_PATH: %s is the writable cache directory; not a layer", dir);
    return -1;
  }
  for (int i = 0; i < c->n_layers; i++)
    if (same_dir(dir, c->layers[i])) return -1;
  if (c->n_layers == CKJIT_DISK_MAX_LAYERS) {
    CKJIT_WARN("CKJIT_CACHE_PATH: skipping %s (at most %d layers)", dir, CKJIT_DISK_MAX_LAYERS);
    return -1;
  }
  snprintf(c->layers[c->n_layers++], CKJIT_PATH_MAX, "%s", dir);
  return 0;
}

void ckjit__disk_add_layers(ckjit_disk_cache *c, const char *list) {
  while (*list) {
    const char *end = strchr(list, ':');
    size_t n = end ? (size_t)(end - list) : strlen(list);
    if (n > 0) {
      char dir[CKJIT_PATH_MAX];
      if (n >= sizeof dir) {
        CKJIT_WARN("CKJIT_CACHE_PATH: skipping a directory (path too long)");
      } else {
        memcpy(dir, list, n);
        dir[n] = '\0';
        (void)ckjit__disk_add_layer(c, dir);
      }
    }
    if (!end) break;
    list = end + 1;
  }
}
