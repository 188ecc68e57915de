/*
 * A vh_thread_pool whose loops run on the calling thread's OpenMP team (thread_pool_openmp.c;
 * only backends that link OpenMP have it). For cpu_amx: oneDNN (OpenMP runtime) runs its
 * primitives on that same team, so kernels and GEMMs share one set of hot threads instead of
 * two teams spinning on the same cores.
 *
 * Same contract as every pool (thread_pool.h). Every parallel loop asks for a team of exactly
 * vh_thread_pool_size threads (a num_threads clause, no process-wide setting): libgomp ends the
 * threads a smaller team leaves out, so one team size keeps the same threads alive. Give oneDNN
 * the same size with omp_set_num_threads on the calling thread (it sets that thread's ICV only).
 * With VH_POOL_PIN_CORES, team thread i pins itself to core i (cpu_affinity.h) the first time it
 * runs a loop of this pool; an OpenMP team belongs to the thread that starts it, so this happens
 * on whichever thread calls vh_parallel_for, not at creation (a pool without the flag unpins the
 * threads a pinned one left). vh_thread_pool_park does nothing.
 */
#ifndef VH_THREAD_POOL_OPENMP_H
#define VH_THREAD_POOL_OPENMP_H

#include "thread_pool.h"

/* A pool of n_threads (<= 0: one per online CPU) on OpenMP's team. NULL when out of memory. */
vh_thread_pool *vh_thread_pool_create_openmp(int n_threads, unsigned flags);

/* End the calling thread's idle OpenMP team (omp_pause_resource_all). libgomp shortens every
 * thread's spin-wait to almost nothing while it manages more threads than the process has CPUs,
 * so a team left behind by a thread that no longer runs OpenMP work (the one that created an
 * executor and reordered its weights) would make the working team sleep between every two
 * loops. Must not be called inside a parallel region (it then does nothing). */
void vh_openmp_release_team(void);

#endif
