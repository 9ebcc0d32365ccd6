/* Monotonic wall-clock time for the tools' timings. */
#ifndef CKJIT_TOOLS_WALL_CLOCK_H
#define CKJIT_TOOLS_WALL_CLOCK_H

/* Milliseconds on a monotonic clock (arbitrary origin). */
double wall_clock_ms(void);

#endif
