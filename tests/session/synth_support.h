/* What the tests of vh-synth-checkpoint share (test_synth_checkpoint.c: OpenVLA and Orion,
 * test_synth_minddrive.c: MindDrive): paths, running the tool (VH_SYNTH_CHECKPOINT_EXE, defined by
 * the test's meson entry) in a child process, reading what it wrote, seeded tokens. */
#ifndef VH_TESTS_SYNTH_SUPPORT_H
#define VH_TESTS_SYNTH_SUPPORT_H

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

static inline char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static inline int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Run vh-synth-checkpoint with args (NULL-terminated) and, if fsize_limit, RLIMIT_FSIZE; stdout and
 * stderr go to log. Returns the exit status (128 + signal when killed). */
static inline int run_synth(const char *log, rlim_t fsize_limit, const char *const *args)
{
    const char *argv[40];
    int n = 0;
    argv[n++] = VH_SYNTH_CHECKPOINT_EXE;
    for (; args[n - 1] && n < 39; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) _exit(125);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        if (fsize_limit) {
            signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG instead */
            struct rlimit rl = {fsize_limit, fsize_limit};
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(126);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) ck_assert_int_eq(errno, EINTR);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static inline char *read_text(const char *path)
{
    char *text = (char *)vh_test_read_file(path, NULL);
    ck_assert_msg(text, "%s: unreadable", path);
    return text;
}

static inline long long int_at(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    ck_assert_msg(json_is_integer(v), "'%s' is not an integer", key);
    return (long long)json_integer_value(v);
}

/* A unit-variance normal from a hash, for the seeded tokens. */
static inline float normal_at(uint64_t i)
{
    uint64_t z = (i + 1) * 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    double u1 = ((z >> 11) + 0.5) / 9007199254740992.0, u2 = ((z & 0x7ff) + 0.5) / 2048.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

#endif
