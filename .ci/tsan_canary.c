/* A deliberate data race, built and run by the TSan job of .ci/run before
 * the real tests: ThreadSanitizer must report it with the job's own
 * TSAN_OPTIONS and .ci/tsan.supp.  If it does not (a suppression that
 * matches too much, a sanitizer that does not run), the job fails instead
 * of passing without checking anything. */
#include <pthread.h>
#include <stdio.h>

static long g_counter; /* written by two threads without a lock: the race */

static void *bump(void *arg) {
  (void)arg;
  for (int i = 0; i < 1000; i++) g_counter++;
  return NULL;
}

int main(void) {
  pthread_t a, b;
  if (pthread_create(&a, NULL, bump, NULL) != 0 || pthread_create(&b, NULL, bump, NULL) != 0)
    return 2;
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  printf("counter %ld\n", g_counter);
  return 0;
}
