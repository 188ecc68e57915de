#include "util/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    FILE *file;
    char *path;
    trace_event *events;
    uint32_t n_events, capacity;
    uint64_t n_dropped;
    int64_t origin_ns;                 /* the first event's time: the JSON starts near 0 */
    char track_names[MAX_TRACKS][NAME_SIZE];
};

vh_status vh_trace_open(const char *path, vh_trace **out, vh_error *err)
{
    *out = NULL;
    vh_trace *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (trace)");
    }
    if (!(t->file = fopen(path, "w"))) {
        free(t->path);
        free(t);
        return vh_error_set(err, VH_ERR_IO, "cannot write the trace file %s", path);
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

vh_status vh_trace_close(vh_trace *t, vh_error *err)
{
    if (!t) return VH_OK;
    FILE *f = t->file;
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
    int failed = ferror(f);
    failed |= fclose(f) != 0;
    vh_status st = VH_OK;
    if (failed) st = vh_error_set(err, VH_ERR_IO, "writing the trace file %s failed", t->path);
    pthread_mutex_destroy(&t->lock);
    free(t->events);
    free(t->path);
    free(t);
    return st;
}
