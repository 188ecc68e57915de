#include "util/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_EVENTS (1u << 20) /* about 100 MB of JSON; later events are counted, not kept */
#define MAX_TRACKS 16
#define NAME_SIZE 48

typedef struct trace_event {
    char name[NAME_SIZE];
    uint32_t track;
    uint64_t frame_id;
    int64_t start_ns, end_ns;          /* end_ns < 0: an instant */
} trace_event;

struct vh_trace {
    pthread_mutex_t lock;
    FILE *file;                        /* the temporary file, renamed to `path` at close */
    char *path, *temp_path;
    trace_event *events;
    uint32_t n_events, capacity;
    uint64_t n_dropped;
    int64_t origin_ns;                 /* the first event's time: the JSON starts near 0 */
    char track_names[MAX_TRACKS][NAME_SIZE];
};

/* The trace goes to a regular file: anything else at `path` (a FIFO would block the writer, a
 * directory or a device is not a place for it) is refused. Absent is fine. */
static vh_status check_target(const char *path, vh_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return VH_OK; /* absent, or a file: the open says more */
    return vh_error_set(err, VH_ERR_IO, "cannot write the trace file %s: it %s", path,
                        S_ISDIR(st.st_mode) ? "is a directory" : "exists and is not a regular file");
}

/* A new file beside `path` ("PATH.PID.N.tmp"), so that the user's file changes only when the
 * trace is complete. */
static vh_status open_temp(const char *path, FILE **file, char **temp_path, vh_error *err)
{
    static atomic_uint counter;
    char reason[128];
    const size_t size = strlen(path) + 48;
    if (!(*temp_path = malloc(size))) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (trace)");
    int fd = -1;
    for (int attempt = 0; fd < 0 && attempt < 16; attempt++) {
        snprintf(*temp_path, size, "%s.%ld.%u.tmp", path, (long)getpid(), atomic_fetch_add(&counter, 1));
        fd = open(*temp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd >= 0 && (*file = fdopen(fd, "w"))) return VH_OK;
    vh_status st = vh_error_set(err, fd >= 0 ? VH_ERR_OUT_OF_MEMORY : VH_ERR_IO, "cannot write the trace file %s: %s",
                                path, strerror_r(errno, reason, sizeof reason));
    if (fd >= 0) {
        close(fd);
        unlink(*temp_path);
    }
    free(*temp_path);
    *temp_path = NULL;
    return st;
}

vh_status vh_trace_open(const char *path, vh_trace **out, vh_error *err)
{
    *out = NULL;
    vh_status st = check_target(path, err);
    if (st) return st;
    vh_trace *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (trace)");
    }
    if ((st = open_temp(path, &t->file, &t->temp_path, err))) {
        free(t->path);
        free(t);
        return st;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->origin_ns = -1;
    *out = t;
    return VH_OK;
}

void vh_trace_name_track(vh_trace *t, uint32_t track, const char *name)
{
    if (!t || track >= MAX_TRACKS) return;
    pthread_mutex_lock(&t->lock);
    snprintf(t->track_names[track], NAME_SIZE, "%s", name);
    pthread_mutex_unlock(&t->lock);
}

static void add_event(vh_trace *t, uint32_t track, const char *name, uint64_t frame_id, int64_t start_ns,
                      int64_t end_ns)
{
    if (!t) return;
    pthread_mutex_lock(&t->lock);
    if (t->n_events == t->capacity && t->capacity < MAX_EVENTS) {
        uint32_t grown = t->capacity ? t->capacity * 2 : 4096;
        trace_event *more = realloc(t->events, sizeof *more * grown);
        if (more) {
            t->events = more;
            t->capacity = grown;
        }
    }
    if (t->n_events < t->capacity) {
        trace_event *e = &t->events[t->n_events++];
        snprintf(e->name, NAME_SIZE, "%s", name);
        e->track = track;
        e->frame_id = frame_id;
        e->start_ns = start_ns;
        e->end_ns = end_ns;
        if (t->origin_ns < 0 || start_ns < t->origin_ns) t->origin_ns = start_ns;
    } else {
        t->n_dropped++;
    }
    pthread_mutex_unlock(&t->lock);
}

void vh_trace_span(vh_trace *t, uint32_t track, const char *name, uint64_t frame_id, int64_t start_ns, int64_t end_ns)
{
    add_event(t, track, name, frame_id, start_ns, end_ns > start_ns ? end_ns : start_ns);
}

void vh_trace_instant(vh_trace *t, uint32_t track, const char *name, int64_t at_ns)
{
    add_event(t, track, name, 0, at_ns, -1);
}

void vh_trace_forget(vh_trace *t)
{
    if (!t) return;
    pthread_mutex_lock(&t->lock);
    t->n_events = 0;
    t->n_dropped = 0;
    t->origin_ns = -1;
    pthread_mutex_unlock(&t->lock);
}

/* Names are ours ("step 3 f12", backend names): no characters that need JSON escapes but these. */
static void write_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
    fputc('"', f);
}

/* Write the JSON to the temporary file; 0 when every write succeeded. */
static int write_trace(const vh_trace *t, FILE *f)
{
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped_events\":%llu},\"traceEvents\":[\n",
            (unsigned long long)t->n_dropped);
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"vlahybrid\"}}");
    for (uint32_t k = 0; k < MAX_TRACKS; k++) {
        if (!t->track_names[k][0]) continue;
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":", k);
        write_json_string(f, t->track_names[k]);
        fprintf(f, "}}");
    }
    for (uint32_t i = 0; i < t->n_events; i++) {
        const trace_event *e = &t->events[i];
        const double ts = (double)(e->start_ns - t->origin_ns) / 1e3; /* microseconds */
        fprintf(f, ",\n{\"name\":");
        write_json_string(f, e->name);
        if (e->end_ns < 0)
            fprintf(f, ",\"ph\":\"i\",\"s\":\"p\",\"pid\":1,\"tid\":%u,\"ts\":%.3f}", e->track, ts);
        else
            fprintf(f, ",\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"frame\":%llu}}",
                    e->track, ts, (double)(e->end_ns - e->start_ns) / 1e3, (unsigned long long)e->frame_id);
    }
    fprintf(f, "\n]}\n");
    return ferror(f);
}

vh_status vh_trace_close(vh_trace *t, int keep, vh_error *err)
{
    if (!t) return VH_OK;
    char reason[128];
    vh_status st = VH_OK;
    int failed = keep ? write_trace(t, t->file) : 0;
    failed |= fclose(t->file) != 0;
    if (keep && failed) st = vh_error_set(err, VH_ERR_IO, "writing the trace file %s failed", t->path);
    else if (keep && !(st = check_target(t->path, err)) && rename(t->temp_path, t->path) != 0)
        st = vh_error_set(err, VH_ERR_IO, "cannot write the trace file %s: %s", t->path,
                          strerror_r(errno, reason, sizeof reason));
    if (!keep || st) unlink(t->temp_path); /* the user's file stays as it was */
    pthread_mutex_destroy(&t->lock);
    free(t->events);
    free(t->path);
    free(t->temp_path);
    free(t);
    return st;
}
