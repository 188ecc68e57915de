/* What arithmetic a backend does, by its name: the library's API reports the backends a session
 * uses (vh_session_info.backends) but not their numerics, so vh-run keeps this one table of the
 * backends the project ships (doc/backend-abi.md, "Precision"; doc/architecture.md). vh-run says
 * what it chose with it, and --check judges a bf16 run by the bf16 criterion
 * (doc/check-format.md). */
#ifndef VH_TOOLS_BACKEND_NUMERICS_H
#define VH_TOOLS_BACKEND_NUMERICS_H

typedef enum vh_compute_precision {
    VH_COMPUTE_UNKNOWN = 0, /* a backend this table does not know */
    VH_COMPUTE_FP32,
    VH_COMPUTE_BF16,        /* GEMM inputs rounded to bf16, fp32 accumulation */
} vh_compute_precision;

typedef struct vh_backend_numerics {
    const char *backend;
    const char *weights;     /* "bf16", "as stored" */
    vh_compute_precision compute;
    const char *description; /* "bf16 weights, bf16 compute with fp32 accumulation" */
} vh_backend_numerics;

/* The table's row for one backend name; a row saying "unknown" for a name it lacks. Never NULL. */
const vh_backend_numerics *vh_backend_numerics_of(const char *backend);

/* The coarsest compute of a comma-separated list of backends ("cuda,cpu_generic": bf16): bf16 when
 * any stage computes in bf16, else unknown when any is unknown, else fp32. */
vh_compute_precision vh_backends_compute(const char *backends);

/* How many stages of a comma-separated list of backends compute in bf16 ("cuda,cpu_amx": 2,
 * "cuda,cpu_generic": 1, "cpu_generic": 0): each rounds on its own, so their errors add (the
 * driving check's bf16 tolerance grows with them, doc/check-format.md "Driving models"). */
unsigned vh_backends_bf16_stages(const char *backends);

const char *vh_compute_precision_name(vh_compute_precision p); /* "fp32", "bf16", "unknown" */

#endif
