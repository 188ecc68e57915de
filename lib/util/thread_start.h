/*
 * Starting the library's own threads as a good neighbour: each starts with every signal blocked,
 * so process-directed signals keep going to the application's threads (whose handlers and
 * sigwait loops expect them), and carries a name ("vh-intake", ...) that top and gdb show.
 */
#ifndef VH_UTIL_THREAD_START_H
#define VH_UTIL_THREAD_START_H

#include <pthread.h>

/* pthread_create(thread, attr, fn, arg) with the above; returns its result (0 on success). name:
 * at most 15 characters. */
int vh_thread_start(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg, const char *name);

/* The CPUs the calling thread may run on (its affinity: the session's cpu_affinity, if given, for
 * the library's threads; the threads it starts inherit it), at least 1. */
int vh_thread_cpus(void);

#endif
