/*
 * Opt-in GPU time per operation, for finding where a forward pass spends its time
 * (VH_CUDA_PROFILE=1; off otherwise, and then every call is a NULL check).
 *
 * An event is recorded on the stream where each operation starts and where the run ends; after the
 * run's synchronisation the time between consecutive events goes to the operation that began at the
 * first, keyed by (operation, rows of the batch). That time is the stream's: it includes the GPU
 * waiting for the host to launch the next kernel, so a launch-bound run shows up as slow small
 * operations. The runs' GPU span is compared with their host wall time. The table goes to the
 * session's log callback (INFO) when the executor is destroyed; like every message of the library,
 * never to stdout or stderr. CUDA graphs are off
 * while it is on: events inside a capture do not time.
 */
#ifndef VH_CUDA_PROFILE_H
#define VH_CUDA_PROFILE_H

#include <cuda_runtime_api.h>

#include "vlahybrid/backend.h"

typedef struct vhc_profile vhc_profile;

/* Whether VH_CUDA_PROFILE=1 (what else runs differently while profiling asks this). */
int vhc_profile_requested(void);
/* NULL unless requested (or allocation fails: profiling is best effort). */
vhc_profile *vhc_profile_from_env(void);
/* Logs the table through the executor params' callback, then frees. */
void vhc_profile_destroy(vhc_profile *p, const char *who, const vh_executor_params *log_to);

/* op: a string literal naming what starts here; rows: the batch's rows (or images x tokens). */
void vhc_profile_mark(vhc_profile *p, cudaStream_t s, const char *op, int rows);
void vhc_profile_run_begin(vhc_profile *p);
/* Records the end event; call before the run's synchronisation, then vhc_profile_run_end after it. */
void vhc_profile_run_close(vhc_profile *p, cudaStream_t s);
void vhc_profile_run_end(vhc_profile *p);

#endif
