/* waitlab.h: region markers for real MPI programs measured by waitlab.
 *
 * Add around code sections:
 *
 *     #include "waitlab.h"
 *     WAITLAB_REGION_BEGIN("solve");
 *     ...
 *     WAITLAB_REGION_END("solve");
 *     WAITLAB_STEP(iteration);        // optional: BSP step of what follows
 *     WAITLAB_INJECT("solve", 0.1);   // ground truth: 0.1 s of known extra work in region "solve"
 *
 * WAITLAB_INJECT(region, seconds) runs `seconds` of CPU-bound work (smpi_execute_benched) inside the region and
 * records it in the cause ledger as an imbalance, so a diagnosis of the program has a truth to score against
 * (counterfactual re-runs remove it).  It does nothing when seconds <= 0 or without waitlab's layer.
 *
 * Regions nest; every BEGIN needs the END of the same name on the same rank.
 * Names are short identifiers: spaces become '_' and a leading '@' (reserved for
 * waitlab's call-site regions) becomes '_'.
 *
 * The macros are no-ops when the program is not linked with waitlab's
 * measurement layer (the functions are weak symbols), so the same source builds
 * with any MPI compiler.  Define WAITLAB_DISABLE to compile them out entirely.
 *
 * Fortran: call waitlab_region_begin('solve') / waitlab_region_end('solve') /
 * waitlab_set_step(i) / waitlab_inject('solve', 0.1d0) (only when linked with the layer, i.e. built by waitlab).
 */
#ifndef WAITLAB_H
#define WAITLAB_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define WAITLAB_WEAK __attribute__((weak))
#else
#define WAITLAB_WEAK
#endif

extern void waitlab_region_begin(const char* name) WAITLAB_WEAK;
extern void waitlab_region_end(const char* name) WAITLAB_WEAK;
extern void waitlab_set_step(int step) WAITLAB_WEAK;
extern void waitlab_inject(const char* region, double seconds) WAITLAB_WEAK;

#ifdef __cplusplus
}
#endif

#if defined(WAITLAB_DISABLE)
#define WAITLAB_REGION_BEGIN(name) ((void)0)
#define WAITLAB_REGION_END(name) ((void)0)
#define WAITLAB_STEP(i) ((void)0)
#define WAITLAB_INJECT(name, seconds) ((void)0)
#else
#define WAITLAB_REGION_BEGIN(name)                                                                                     \
  do {                                                                                                                 \
    if (waitlab_region_begin)                                                                                          \
      waitlab_region_begin(name);                                                                                      \
  } while (0)
#define WAITLAB_REGION_END(name)                                                                                       \
  do {                                                                                                                 \
    if (waitlab_region_end)                                                                                            \
      waitlab_region_end(name);                                                                                        \
  } while (0)
#define WAITLAB_STEP(i)                                                                                                \
  do {                                                                                                                 \
    if (waitlab_set_step)                                                                                              \
      waitlab_set_step(i);                                                                                             \
  } while (0)
#define WAITLAB_INJECT(name, seconds)                                                                                  \
  do {                                                                                                                 \
    if (waitlab_inject)                                                                                                \
      waitlab_inject(name, seconds);                                                                                   \
  } while (0)
#endif

#endif /* WAITLAB_H */
