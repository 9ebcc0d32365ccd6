/* A list of owned strings: comma-separated option values (--arch LIST),
 * positional arguments, generated spec names. */
#ifndef CKJIT_TOOLS_STR_LIST_H
#define CKJIT_TOOLS_STR_LIST_H

#include <stddef.h>

typedef struct str_list {
  char **items;
  size_t count;
  size_t cap;
} str_list;

/* Appends a copy of `s` unless an equal string is already present.
 * Returns 0, or -1 when out of memory. */
int str_list_add_unique(str_list *l, const char *s);

/* Appends each non-empty, whitespace-trimmed item of a comma-separated
 * `csv` (duplicates dropped).  Returns the number of items in `csv`
 * (0 when it holds none), or -1 when out of memory. */
int str_list_add_csv(str_list *l, const char *csv);

void str_list_free(str_list *l);

#endif
