/*
 * Where a CPU backend's threads run: one physical core each.
 *
 * Why: a team of N threads that spin between kernels on an N-core machine runs best when no two
 * of them share a core and none migrates (its caches stay warm, and a barrier never waits for a
 * thread the scheduler parked behind a teammate). The placement is the physical cores the
 * creating thread may run on, in hwloc's order, those of the NUMA node of the first of them first
 * (other nodes only when that one has too few); thread i of a team takes core i. Thread 0 is the
 * caller's own thread and is never pinned: it is not the backend's, and threads it creates later
 * (OpenMP's) inherit its mask.
 *
 * Without hwloc at build time, or with fewer such cores than threads, there is no placement and
 * the threads run where the OS puts them; VH_CPU_PIN=0 in the environment turns pinning off (to
 * measure what it gives). Nothing is ever printed.
 */
#ifndef VH_CPU_AFFINITY_H
#define VH_CPU_AFFINITY_H

typedef struct vh_cpu_placement vh_cpu_placement;

/* A placement for a team of n_threads (thread 0 included), or NULL where there is none (see
 * above; also n_threads < 2, or out of memory). */
vh_cpu_placement *vh_cpu_placement_create(int n_threads);

/* NULL is allowed. Threads already pinned stay pinned. */
void vh_cpu_placement_destroy(vh_cpu_placement *placement);

/* Pin the calling thread to the core of team thread `index` (1 <= index < n_threads). With no
 * placement (NULL) or another index, give the thread back the CPUs it had before an earlier call
 * pinned it, if one did (a thread of a team that a pinned pool used before). A per-thread note
 * makes a repeated call free. If the system refuses, the thread stays as it was. */
void vh_cpu_placement_pin_self(const vh_cpu_placement *placement, int index);

/* Hold the calling thread on the core of team thread 0 for a stretch of the team's work (an
 * executor's pass), remembering its CPUs; vh_cpu_placement_release_caller gives them back. Why:
 * thread 0 runs its share of every parallel loop, and unpinned it wakes wherever the scheduler
 * finds a CPU idle at that instant, often a pinned teammate's core between two loops, which the
 * two then share for the rest of the pass while the others wait at each barrier. NULL placement,
 * a refused call, or VH_CPU_PIN_CALLER=0 in the environment: nothing happens. Holds nest not. */
void vh_cpu_placement_hold_caller(const vh_cpu_placement *placement);
void vh_cpu_placement_release_caller(void);

#endif
