/* A main() for the fuzz targets in an ordinary build (gcc, no libFuzzer):
 * runs LLVMFuzzerTestOneInput once on every file named on the command line
 * or found (non-recursively) in a directory named there.  The normal test
 * suite uses it to replay the seed corpus, so the targets keep compiling and
 * every seed and every crash reproducer added to the corpus stays fixed.
 * A failed check aborts, which fails the test. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) break;
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    if (!r) break;
    n += r;
  }
  fclose(f);
  if (!buf) return -1;
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  int files = 0, errors = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st)) {
      fprintf(stderr, "replay: %s does not exist\n", argv[i]);
      errors++;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      errors += run_file(argv[i]) != 0;
      files++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) {
      errors++;
      continue;
    }
    char **names = NULL;
    size_t count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char **nn = realloc(names, (count + 1) * sizeof *names);
      if (!nn) break;
      names = nn;
      size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
      names[count] = malloc(len);
      if (!names[count]) break;
      snprintf(names[count], len, "%s/%s", argv[i], e->d_name);
      count++;
    }
    closedir(d);
    qsort(names, count, sizeof *names, by_name);
    for (size_t k = 0; k < count; k++) {
      errors += run_file(names[k]) != 0;
      files++;
      free(names[k]);
    }
    free(names);
  }
  printf("replayed %d input(s), %d error(s)\n", files, errors);
  if (files == 0) {
    fprintf(stderr, "replay: no inputs\n");
    return 1;
  }
  return errors ? 1 : 0;
}
