/*
 * One physical core per thread of a CPU backend's team (see cpu_affinity.h for why). hwloc finds
 * the cores once, at creation, and the placement keeps them as glibc CPU sets, so pinning a
 * thread later is one pthread_setaffinity_np.
 */
#include "cpu_affinity.h"

#include "backend_knobs.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef VH_HAVE_HWLOC
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#endif

struct vh_cpu_placement {
    uint64_t id;              /* unique per placement, for the per-thread note */
    int n_threads;
    cpu_set_t *cores;         /* [n_threads]: the core of each team thread ([0] is not used) */
};

static _Atomic uint64_t next_placement_id = 1;
/* The calling thread's pinning: by which placement (0: none) and as which index, and the CPUs it
 * had before the first. */
static _Thread_local uint64_t pinned_placement_id;
static _Thread_local int pinned_index;
static _Thread_local cpu_set_t cpus_before_pinning;
/* A caller held on core 0 (vh_cpu_placement_hold_caller) and the CPUs to give back. */
static _Thread_local int caller_held;
static _Thread_local cpu_set_t cpus_before_hold;

#ifdef VH_HAVE_HWLOC
/* Fill cores[0 .. n) with usable physical cores, those of the first usable core's NUMA node first
 * (then the others, should that node have too few); returns how many it found. */
static int find_cores(hwloc_topology_t topo, int n, cpu_set_t *cores)
{
    int found = 0;
    hwloc_bitmap_t usable = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(topo));
    hwloc_bitmap_t mine = hwloc_bitmap_alloc(), set = hwloc_bitmap_alloc();
    if (!usable || !mine || !set) goto done;
    if (hwloc_get_cpubind(topo, mine, HWLOC_CPUBIND_THREAD) == 0) hwloc_bitmap_and(usable, usable, mine);
    int first = hwloc_bitmap_first(usable);
    if (first < 0) goto done;
    hwloc_const_cpuset_t first_node = hwloc_topology_get_topology_cpuset(topo);
    for (hwloc_obj_t node = NULL; (node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node));)
        if (node->cpuset && hwloc_bitmap_isset(node->cpuset, (unsigned)first)) {
            first_node = node->cpuset;
            break;
        }
    hwloc_obj_type_t core_type = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    for (int in_first_node = 1; in_first_node >= 0; in_first_node--)
        for (hwloc_obj_t core = NULL; found < n && (core = hwloc_get_next_obj_by_type(topo, core_type, core));) {
            hwloc_bitmap_and(set, core->cpuset, usable);
            if (hwloc_bitmap_iszero(set) || hwloc_bitmap_isincluded(set, first_node) != in_first_node) continue;
            hwloc_cpuset_to_glibc_sched_affinity(topo, set, &cores[found], sizeof cores[found]);
            if (CPU_COUNT(&cores[found]) > 0) found++; /* (CPUs past CPU_SETSIZE cannot be pinned) */
        }
done:
    hwloc_bitmap_free(usable);
    hwloc_bitmap_free(mine);
    hwloc_bitmap_free(set);
    return found;
}

static int find_placement(int n, cpu_set_t *cores)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) return 0;
    /* Cores, PUs and NUMA nodes are all it needs: Linux's sysfs has them. (hwloc's x86 backend
     * would also move this thread onto every CPU in turn to run cpuid there.) */
    hwloc_topology_set_all_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_type_filter(topo, HWLOC_OBJ_CORE, HWLOC_TYPE_FILTER_KEEP_ALL);
#if HWLOC_API_VERSION >= 0x00020100
    hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
#endif
    int found = hwloc_topology_load(topo) == 0 ? find_cores(topo, n, cores) : 0;
    hwloc_topology_destroy(topo);
    return found;
}
#else
static int find_placement(int n, cpu_set_t *cores)
{
    (void)n, (void)cores;
    return 0;
}
#endif

vh_cpu_placement *vh_cpu_placement_create(int n_threads)
{
    /* VH_CPU_PIN=0: run unpinned (to measure what pinning gives) */
    if (n_threads < 2 || vh_knob_is(VH_KNOB_CPU_PIN, "0")) return NULL;
    vh_cpu_placement *p = calloc(1, sizeof *p);
    if (p) p->cores = calloc((size_t)n_threads, sizeof *p->cores);
    if (!p || !p->cores || find_placement(n_threads, p->cores) < n_threads) {
        vh_cpu_placement_destroy(p);
        return NULL;
    }
    p->id = atomic_fetch_add(&next_placement_id, 1);
    p->n_threads = n_threads;
    return p;
}

void vh_cpu_placement_destroy(vh_cpu_placement *p)
{
    if (!p) return;
    free(p->cores);
    free(p);
}

void vh_cpu_placement_pin_self(const vh_cpu_placement *p, int index)
{
    const int has_core = p && index >= 1 && index < p->n_threads;
    if (!has_core) {
        if (pinned_placement_id) { /* pinned by an earlier pool: unpin */
            pthread_setaffinity_np(pthread_self(), sizeof cpus_before_pinning, &cpus_before_pinning);
            pinned_placement_id = 0;
        }
        return;
    }
    if (pinned_placement_id == p->id && pinned_index == index) return;
    if (!pinned_placement_id &&
        pthread_getaffinity_np(pthread_self(), sizeof cpus_before_pinning, &cpus_before_pinning) != 0)
        return;
    pinned_placement_id = p->id; /* noted even if refused: no system call per job after that */
    pinned_index = index;
    pthread_setaffinity_np(pthread_self(), sizeof p->cores[index], &p->cores[index]);
}

/* VH_CPU_PIN_CALLER=0: leave the caller where it is (to measure what the hold gives). Read once,
 * whichever thread of whichever session gets here first. */
static pthread_once_t hold_setting_once = PTHREAD_ONCE_INIT;
static int hold_enabled;

static void read_hold_setting(void)
{
    hold_enabled = !vh_knob_is(VH_KNOB_CPU_PIN_CALLER, "0");
}

void vh_cpu_placement_hold_caller(const vh_cpu_placement *p)
{
    pthread_once(&hold_setting_once, read_hold_setting);
    if (!p || !hold_enabled || caller_held || pinned_placement_id) return; /* (a pinned worker stays put) */
    if (pthread_getaffinity_np(pthread_self(), sizeof cpus_before_hold, &cpus_before_hold) != 0) return;
    if (pthread_setaffinity_np(pthread_self(), sizeof p->cores[0], &p->cores[0]) == 0) caller_held = 1;
}

void vh_cpu_placement_release_caller(void)
{
    if (!caller_held) return;
    pthread_setaffinity_np(pthread_self(), sizeof cpus_before_hold, &cpus_before_hold);
    caller_held = 0;
}
