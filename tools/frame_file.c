#include "frame_file.h"

#include "json_line.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INLINE_NOISE 65536

static const char *const known_members[] = {"image", "vision_tokens", "instruction", "command", "noise",
                                            "timestamp_ns", "sequence", "tag", "stream", "unnorm_key", "cameras", "ego_pose",
                                            "can_bus", NULL};

/* `relative` from the frame file's folder (dir, "" for the current one), unless absolute. */
static char *resolve(const char *dir, const char *relative)
{
    if (relative[0] == '/' || !dir[0]) return strdup(relative);
    const size_t n = strlen(dir) + strlen(relative) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, relative);
    return p;
}

static int path_member(const json_t *obj, const char *key, const char *dir, char **out, char *why, size_t why_size)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (!json_is_string(v) || !json_string_length(v))
        return snprintf(why, why_size, "\"%s\" must be a non-empty string (a path)", key), -1;
    if (!(*out = resolve(dir, json_string_value(v)))) return snprintf(why, why_size, "out of memory"), -1;
    return 0;
}

static int string_member(const json_t *obj, const char *key, char **out, char *why, size_t why_size)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (!json_is_string(v)) return snprintf(why, why_size, "\"%s\" must be a string", key), -1;
    if (!(*out = strdup(json_string_value(v)))) return snprintf(why, why_size, "out of memory"), -1;
    return 0;
}

/* An integer member in [lo, hi]: 1 when present (value in *out), 0 when absent, -1 when bad. */
static int integer_member(const json_t *obj, const char *key, json_int_t lo, json_int_t hi, json_int_t *out, char *why,
                          size_t why_size)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return snprintf(why, why_size, "\"%s\" must be an integer in [%lld, %lld]", key, (long long)lo, (long long)hi),
               -1;
    *out = json_integer_value(v);
    return 1;
}

static int read_noise(const json_t *obj, const char *dir, vh_frame_file_entry *e, char *why, size_t why_size)
{
    const json_t *v = json_object_get(obj, "noise");
    if (!v || json_is_string(v)) return path_member(obj, "noise", dir, &e->noise_file, why, why_size);
    const size_t n = json_array_size(v);
    if (!json_is_array(v) || n == 0 || n > MAX_INLINE_NOISE)
        return snprintf(why, why_size, "\"noise\" must be a path or an array of 1..%d numbers", MAX_INLINE_NOISE), -1;
    if (!(e->noise = malloc(n * sizeof *e->noise))) return snprintf(why, why_size, "out of memory"), -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(v, i);
        const double d = json_number_value(x);
        if (!json_is_number(x) || !isfinite((float)d))
            return snprintf(why, why_size, "\"noise\"[%zu] is not a finite float32 number", i), -1;
        e->noise[i] = (float)d;
    }
    e->n_noise = (uint32_t)n;
    return 0;
}

/* `key` of obj as n finite float32 numbers: a flat array, or (n = 16) four rows of four. 1 read,
 * 0 absent, -1 said. */
static int numbers_member(const json_t *obj, const char *key, size_t n, float *out, char *why, size_t why_size)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    const int rows = n == 16 && json_is_array(v) && json_array_size(v) == 4;
    if (!json_is_array(v) || (!rows && json_array_size(v) != n))
        return snprintf(why, why_size, "\"%s\" must be %s", key, n == 16 ? "a 4 x 4 matrix (4 rows of 4, or 16 numbers)"
                                                                        : "an array of 18 numbers"), -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *x = rows ? json_array_get(json_array_get(v, i / 4), i % 4) : json_array_get(v, i);
        if (rows && json_array_size(json_array_get(v, i / 4)) != 4)
            return snprintf(why, why_size, "\"%s\" row %zu is not 4 numbers", key, i / 4), -1;
        const double d = json_number_value(x);
        if (!json_is_number(x) || !isfinite((float)d))
            return snprintf(why, why_size, "\"%s\"[%zu] is not a finite float32 number", key, i), -1;
        out[i] = (float)d;
    }
    return 1;
}

static int read_cameras(const json_t *obj, const char *dir, vh_frame_file_entry *e, char *why, size_t why_size)
{
    const json_t *v = json_object_get(obj, "cameras");
    if (!v) return 0;
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > VH_FRAME_FILE_MAX_CAMERAS)
        return snprintf(why, why_size, "\"cameras\" must be an array of 1..%d {\"name\", \"image\"} objects",
                        VH_FRAME_FILE_MAX_CAMERAS), -1;
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *c = json_array_get(v, i);
        const char *key;
        const json_t *member;
        if (!json_is_object(c)) return snprintf(why, why_size, "\"cameras\"[%zu] is not an object", i), -1;
        json_object_foreach((json_t *)c, key, member) {
            if (strcmp(key, "name") && strcmp(key, "image") && strcmp(key, "lidar2img") && strcmp(key, "intrinsics") &&
                strcmp(key, "extrinsics"))
                return snprintf(why, why_size, "\"cameras\"[%zu]: unknown member \"%s\" (\"name\", \"image\", "
                                "\"lidar2img\", \"intrinsics\", \"extrinsics\")", i, key), -1;
        }
        vh_frame_file_camera *cam = &e->cameras[e->n_cameras++];
        char inner[128];
        if (string_member(c, "name", &cam->name, inner, sizeof inner) ||
            path_member(c, "image", dir, &cam->image, inner, sizeof inner) ||
            (cam->has_lidar2img = numbers_member(c, "lidar2img", 16, cam->lidar2img, inner, sizeof inner)) < 0 ||
            (cam->has_intrinsics = numbers_member(c, "intrinsics", 16, cam->intrinsics, inner, sizeof inner)) < 0 ||
            (cam->has_extrinsics = numbers_member(c, "extrinsics", 16, cam->extrinsics, inner, sizeof inner)) < 0)
            return snprintf(why, why_size, "\"cameras\"[%zu]: %s", i, inner), -1;
        if (!cam->image) return snprintf(why, why_size, "\"cameras\"[%zu] has no \"image\"", i), -1;
    }
    return 0;
}

static int read_entry(const json_t *obj, const char *dir, vh_frame_file_entry *e, char *why, size_t why_size)
{
    if (!json_is_object(obj)) return snprintf(why, why_size, "not a JSON object"), -1;
    const char *key;
    const json_t *member;
    json_object_foreach((json_t *)obj, key, member) {
        int known = 0;
        for (const char *const *k = known_members; *k && !known; k++) known = !strcmp(key, *k);
        if (!known)
            return snprintf(why, why_size, "unknown member \"%s\" (doc/api.md, \"Frame files\", lists them)", key), -1;
    }
    json_int_t n;
    int got;
    if (path_member(obj, "image", dir, &e->image, why, why_size) ||
        path_member(obj, "vision_tokens", dir, &e->vision_tokens, why, why_size) ||
        string_member(obj, "instruction", &e->instruction, why, why_size) ||
        string_member(obj, "unnorm_key", &e->unnorm_key, why, why_size) || read_noise(obj, dir, e, why, why_size) ||
        read_cameras(obj, dir, e, why, why_size) ||
        (e->has_ego_pose = numbers_member(obj, "ego_pose", 16, e->ego_pose, why, why_size)) < 0 ||
        (e->has_can_bus = numbers_member(obj, "can_bus", 18, e->can_bus, why, why_size)) < 0)
        return -1;
    if ((got = integer_member(obj, "command", 0, 63, &n, why, why_size)) < 0) return -1;
    if (got) e->command = (int)n;
    if ((got = integer_member(obj, "timestamp_ns", INT64_MIN, INT64_MAX, &n, why, why_size)) < 0) return -1;
    if ((e->has_timestamp = got)) e->timestamp_ns = (int64_t)n;
    if ((got = integer_member(obj, "sequence", 0, INT64_MAX, &n, why, why_size)) < 0) return -1;
    if ((e->has_sequence = got)) e->sequence = (uint64_t)n;
    if ((got = integer_member(obj, "tag", 0, INT64_MAX, &n, why, why_size)) < 0) return -1;
    if ((e->has_tag = got)) e->tag = (uint64_t)n;
    if ((got = integer_member(obj, "stream", 0, INT64_MAX, &n, why, why_size)) < 0) return -1;
    if ((e->has_stream = got)) e->stream = (uint64_t)n;
    if (e->image && e->vision_tokens) return snprintf(why, why_size, "both \"image\" and \"vision_tokens\""), -1;
    if (!e->image && !e->vision_tokens && !e->n_cameras)
        return snprintf(why, why_size, "no \"image\", \"vision_tokens\" or \"cameras\""), -1;
    return 0;
}

static void free_entry(vh_frame_file_entry *e)
{
    free(e->image);
    free(e->vision_tokens);
    free(e->instruction);
    free(e->unnorm_key);
    free(e->noise_file);
    free(e->noise);
    for (uint32_t c = 0; c < e->n_cameras; c++) {
        free(e->cameras[c].name);
        free(e->cameras[c].image);
    }
}

void vh_frame_file_free(vh_frame_file *ff)
{
    for (size_t i = 0; i < ff->n_entries; i++) free_entry(&ff->entries[i]);
    free(ff->entries);
    free(ff->path);
    memset(ff, 0, sizeof *ff);
}

/* One line of a frame file (vh_json_lines_each): its entry, or why not (-2). */
typedef struct frame_lines {
    vh_frame_file *out;
    const char *dir;
    size_t max_entries;
    char what[512];
    long line;
} frame_lines;

static int frame_line(json_t *obj, long number, void *user)
{
    frame_lines *c = user;
    c->line = number;
    if (c->out->n_entries == c->max_entries) {
        snprintf(c->what, sizeof c->what, "more than %zu frames", c->max_entries);
        return -2;
    }
    vh_frame_file_entry *grown = realloc(c->out->entries, sizeof *grown * (c->out->n_entries + 1));
    if (!grown) {
        snprintf(c->what, sizeof c->what, "out of memory");
        return -2;
    }
    c->out->entries = grown;
    vh_frame_file_entry *entry = &grown[c->out->n_entries++];
    memset(entry, 0, sizeof *entry);
    entry->line = number;
    entry->command = -1;
    return read_entry(obj, c->dir, entry, c->what, sizeof c->what) ? -2 : 0;
}

int vh_frame_file_load(const char *path, size_t max_entries, vh_frame_file *out, char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) return snprintf(why, why_size, "%s: %s", path, strerror(errno)), -1;
    char *dir = strdup(path);
    out->path = strdup(path);
    if (!dir || !out->path) {
        fclose(f);
        free(dir);
        free(out->path);
        return snprintf(why, why_size, "out of memory"), -1;
    }
    char *slash = strrchr(dir, '/');
    if (slash) slash[slash == dir] = '\0'; /* "/x.jsonl": the folder is "/" */
    else dir[0] = '\0';
    frame_lines ctx = {.out = out, .dir = dir, .max_entries = max_entries};
    json_error_t e;
    long bad_line = 0;
    int rc = vh_json_lines_each(f, JSON_REJECT_DUPLICATES, frame_line, &ctx, &bad_line, &e);
    if (rc == -1) snprintf(why, why_size, "%s: line %ld: not JSON (%s)", path, bad_line, e.text);
    else if (rc) snprintf(why, why_size, "%s: line %ld: %s", path, ctx.line, ctx.what), rc = -1;
    if (rc == 0 && ferror(f)) rc = -1, snprintf(why, why_size, "%s: %s", path, strerror(errno));
    if (rc == 0 && out->n_entries == 0) rc = -1, snprintf(why, why_size, "%s: no frames", path);
    free(dir);
    fclose(f);
    if (rc) vh_frame_file_free(out);
    return rc;
}
