#include "str_list.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int str_list_add_unique(str_list *l, const char *s) {
  for (size_t i = 0; i < l->count; i++)
    if (strcmp(l->items[i], s) == 0) return 0;
  if (l->count == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    char **items = realloc(l->items, cap * sizeof *items);
    if (!items) return -1;
    l->items = items;
    l->cap = cap;
  }
  size_t n = strlen(s);
  char *copy = malloc(n + 1);
  if (!copy) return -1;
  memcpy(copy, s, n + 1);
  l->items[l->count++] = copy;
  return 0;
}

int str_list_add_csv(str_list *l, const char *csv) {
  int items = 0;
  const char *p = csv;
  for (;;) {
    const char *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    const char *b = p, *e = end;
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    if (e > b) {
      size_t n = (size_t)(e - b);
      char *item = malloc(n + 1);
      if (!item) return -1;
      memcpy(item, b, n);
      item[n] = '\0';
      int rc = str_list_add_unique(l, item);
      free(item);
      if (rc != 0) return -1;
      items++;
    }
    if (*end == '\0') break;
    p = end + 1;
  }
  return items;
}

void str_list_free(str_list *l) {
  for (size_t i = 0; i < l->count; i++) free(l->items[i]);
  free(l->items);
  l->items = NULL;
  l->count = l->cap = 0;
}
