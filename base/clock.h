/* Monotonic wall clock for timing builds, loads and prewarm items. */
#ifndef CKJIT_RUNTIME_BASE_CLOCK_H
#define CKJIT_RUNTIME_BASE_CLOCK_H

/* Monotonic wall clock in milliseconds. */
double ckjit__now_ms(void);

#endif
