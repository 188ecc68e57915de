#include "util/thread_start.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

int vh_thread_start(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg, const char *name)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits the mask */
    int rc = pthread_create(thread, attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) pthread_setname_np(*thread, name);
    return rc;
}

int vh_thread_cpus(void)
{
    cpu_set_t mine;
    const long n = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
