#include "frame_reader.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "image_file.h"

#define MAX_NOISE 65536

struct frame_reader {
    FILE *file;
    int owns_file;
    char *dir;   /* the folder paths are relative to; "" for the current one */
    char *buffer;
    size_t capacity;
    long line;
};

static const char *const members[] = {"cameras", "ego_pose", "can_bus", "command", "timestamp_ns", "noise",
                                      "sequence", "tag", "stream", NULL};

frame_reader *frame_reader_open(const char *path, char *err, size_t err_size)
{
    frame_reader *r = calloc(1, sizeof *r);
    char *file_path = NULL;
    if (!r) return snprintf(err, err_size, "out of memory"), NULL;
    struct stat st;
    if (!strcmp(path, "-")) {
        r->file = stdin;
        r->dir = strdup("");
    } else {
        const int folder = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
        const size_t n = strlen(path) + sizeof "/frames.jsonl";
        if (!(file_path = malloc(n))) goto oom;
        snprintf(file_path, n, folder ? "%s/frames.jsonl" : "%s", path);
        if (!(r->file = fopen(file_path, "r"))) {
            snprintf(err, err_size, "%s: %s", file_path, strerror(errno));
            free(file_path);
            frame_reader_close(r);
            return NULL;
        }
        r->owns_file = 1;
        char *slash = strrchr(file_path, '/');
        if (slash) slash[slash == file_path] = '\0'; /* "/x.jsonl": the folder is "/" */
        else file_path[0] = '\0';
        r->dir = file_path;
    }
    if (!r->dir) goto oom;
    return r;
oom:
    snprintf(err, err_size, "out of memory");
    frame_reader_close(r);
    return NULL;
}

void frame_reader_close(frame_reader *r)
{
    if (!r) return;
    if (r->owns_file) fclose(r->file);
    free(r->dir);
    free(r->buffer);
    free(r);
}

void driving_frame_clear(driving_frame *f)
{
    for (uint32_t c = 0; c < FRAME_MAX_CAMERAS; c++) {
        free(f->pixels[c]);
        free(f->names[c]);
    }
    free(f->noise);
    memset(f, 0, sizeof *f);
    f->command = -1;
}

/* `relative` from the frame file's folder, unless absolute; malloc'd. */
static char *resolve(const char *dir, const char *relative)
{
    const size_t n = strlen(dir) + strlen(relative) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s%s", relative[0] == '/' ? "" : dir, relative[0] == '/' || !dir[0] ? "" : "/",
                    relative);
    return p;
}

/* `key` as n finite float32 numbers: a flat array, or (n = 16) four rows of four. 1 read, 0 absent,
 * -1 bad (why said). */
static int numbers(const json_t *obj, const char *key, size_t n, float *out, char *why, size_t why_size)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    const int rows = n == 16 && json_is_array(v) && json_array_size(v) == 4;
    if (!json_is_array(v) || (!rows && json_array_size(v) != n))
        return snprintf(why, why_size, "\"%s\" must be %s", key,
                        n == 16 ? "a 4 x 4 matrix (4 rows of 4, or 16 numbers)" : "an array of 18 numbers"), -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *row = rows ? json_array_get(v, i / 4) : v;
        if (rows && (!json_is_array(row) || json_array_size(row) != 4))
            return snprintf(why, why_size, "\"%s\" row %zu is not 4 numbers", key, i / 4), -1;
        const json_t *x = json_array_get(row, rows ? i % 4 : i);
        if (!json_is_number(x) || !isfinite((float)json_number_value(x)))
            return snprintf(why, why_size, "\"%s\"[%zu] is not a finite float32 number", key, i), -1;
        out[i] = (float)json_number_value(x);
    }
    return 1;
}

/* An integer member in [lo, hi]: 1 present, 0 absent, -1 bad. */
static int integer(const json_t *obj, const char *key, json_int_t lo, json_int_t hi, json_int_t *out, char *why,
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

/* A .npy (float32, C order, any shape) or raw little-endian float32 file, whole. */
static int read_float_file(const char *path, float **out, uint32_t *n, char *why, size_t why_size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(why, why_size, "%s: %s", path, strerror(errno)), -1;
    char head[10];
    long offset = 0;
    if (fread(head, 1, sizeof head, f) == sizeof head && !memcmp(head, "\x93NUMPY", 6)) {
        /* the header is a Python dict padded with spaces; version 1 has a 2-byte length, 2 and 3 a 4-byte one */
        unsigned char len[4] = {(unsigned char)head[8], (unsigned char)head[9], 0, 0};
        if (head[6] != 1 && fread(len + 2, 1, 2, f) != 2) len[2] = len[3] = 0xff;
        const long header = len[0] | len[1] << 8 | (long)len[2] << 16 | (long)len[3] << 24;
        char *dict = header > 0 && header < 65536 ? calloc(1, (size_t)header + 1) : NULL;
        const int ok = dict && fread(dict, 1, (size_t)header, f) == (size_t)header && strstr(dict, "'<f4'") &&
                       !strstr(dict, "'fortran_order': True");
        free(dict);
        if (!ok) {
            fclose(f);
            return snprintf(why, why_size, "%s: not a float32 C-order .npy file", path), -1;
        }
        offset = ftell(f);
    }
    fseek(f, 0, SEEK_END);
    const long bytes = ftell(f) - offset;
    if (bytes <= 0 || bytes % 4 || bytes / 4 > MAX_NOISE) {
        fclose(f);
        return snprintf(why, why_size, "%s: not 1..%d float32 values", path, MAX_NOISE), -1;
    }
    fseek(f, offset, SEEK_SET);
    *n = (uint32_t)(bytes / 4);
    if (!(*out = malloc((size_t)bytes)) || fread(*out, 4, *n, f) != *n) {
        fclose(f);
        return snprintf(why, why_size, "%s: cannot read %ld bytes", path, bytes), -1;
    }
    fclose(f);
    return 0;
}

static int read_noise(const json_t *obj, const char *dir, driving_frame *f, char *why, size_t why_size)
{
    const json_t *v = json_object_get(obj, "noise");
    if (!v) return 0;
    if (json_is_string(v)) {
        char *path = resolve(dir, json_string_value(v));
        if (!path) return snprintf(why, why_size, "out of memory"), -1;
        const int rc = read_float_file(path, &f->noise, &f->n_noise, why, why_size);
        free(path);
        return rc;
    }
    const size_t n = json_array_size(v);
    if (!json_is_array(v) || n == 0 || n > MAX_NOISE)
        return snprintf(why, why_size, "\"noise\" must be a path or an array of 1..%d numbers", MAX_NOISE), -1;
    if (!(f->noise = malloc(n * sizeof *f->noise))) return snprintf(why, why_size, "out of memory"), -1;
    f->n_noise = (uint32_t)n;
    return numbers(obj, "noise", n, f->noise, why, why_size) < 0 ? -1 : 0;
}

/* The cameras: names, calibration, images decoded (a missing or broken image makes the line bad). */
static int read_cameras(const json_t *obj, const char *dir, driving_frame *f, char *why, size_t why_size)
{
    const json_t *v = json_object_get(obj, "cameras");
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > FRAME_MAX_CAMERAS)
        return snprintf(why, why_size, "\"cameras\" must be an array of 1..%d {\"name\", \"image\", calibration} "
                        "objects", FRAME_MAX_CAMERAS), -1;
    f->has_lidar2img = f->has_intrinsics = f->has_extrinsics = 1;
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *c = json_array_get(v, i), *name = json_object_get(c, "name"), *image = json_object_get(c, "image");
        const char *key;
        const json_t *member;
        char inner[256];
        if (!json_is_object(c)) return snprintf(why, why_size, "\"cameras\"[%zu] is not an object", i), -1;
        json_object_foreach((json_t *)c, key, member) {
            if (strcmp(key, "name") && strcmp(key, "image") && strcmp(key, "lidar2img") && strcmp(key, "intrinsics") &&
                strcmp(key, "extrinsics"))
                return snprintf(why, why_size, "\"cameras\"[%zu]: unknown member \"%s\"", i, key), -1;
        }
        if (name && !json_is_string(name)) return snprintf(why, why_size, "\"cameras\"[%zu]: \"name\" is not a string", i), -1;
        if (!json_is_string(image) || !json_string_length(image))
            return snprintf(why, why_size, "\"cameras\"[%zu] has no \"image\" path", i), -1;
        const int l2i = numbers(c, "lidar2img", 16, f->lidar2img + 16 * i, inner, sizeof inner),
                  k = l2i < 0 ? -1 : numbers(c, "intrinsics", 16, f->intrinsics + 16 * i, inner, sizeof inner),
                  e = k < 0 ? -1 : numbers(c, "extrinsics", 16, f->extrinsics + 16 * i, inner, sizeof inner);
        if (l2i < 0 || k < 0 || e < 0) return snprintf(why, why_size, "\"cameras\"[%zu]: %s", i, inner), -1;
        f->has_lidar2img &= l2i, f->has_intrinsics &= k, f->has_extrinsics &= e;
        char *path = resolve(dir, json_string_value(image));
        if (!path || (name && !(f->names[i] = strdup(json_string_value(name)))))
            return free(path), snprintf(why, why_size, "out of memory"), -1;
        vh_camera_image *cam = &f->cameras[f->n_cameras++];
        const vh_status s = vh_image_load(path, &f->pixels[i], &cam->width, &cam->height, inner, sizeof inner);
        free(path);
        if (s != VH_OK) return snprintf(why, why_size, "camera %zu: %s", i, inner), -1;
        cam->rgb = f->pixels[i];
        cam->name = f->names[i];
    }
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int read_frame(const json_t *obj, const char *dir, driving_frame *f, char *why, size_t why_size)
{
    if (!json_is_object(obj)) return snprintf(why, why_size, "not a JSON object"), -1;
    const char *key;
    const json_t *member;
    json_object_foreach((json_t *)obj, key, member) {
        int known = 0;
        for (const char *const *m = members; *m && !known; m++) known = !strcmp(key, *m);
        if (!known && (!strcmp(key, "vision_tokens") || !strcmp(key, "image")))
            return snprintf(why, why_size, "\"%s\": this example runs camera frames (vh-run --frame-file takes the "
                            "others)", key), -1;
        if (!known) return snprintf(why, why_size, "unknown member \"%s\" (doc/api.md, \"Frame files\")", key), -1;
    }
    if (!json_object_get(obj, "cameras")) return snprintf(why, why_size, "no \"cameras\""), -1;
    json_int_t n;
    int got;
    if ((f->has_ego_pose = numbers(obj, "ego_pose", 16, f->ego_pose, why, why_size)) < 0 ||
        (f->has_can_bus = numbers(obj, "can_bus", VH_CAN_BUS_FLOATS, f->can_bus, why, why_size)) < 0)
        return -1;
    /* the range the format allows; the model checks its own (0..5) at submit, with its message */
    if ((got = integer(obj, "command", 0, 63, &n, why, why_size)) < 0) return -1;
    if (got) f->command = (int)n;
    if ((got = integer(obj, "timestamp_ns", INT64_MIN, INT64_MAX, &n, why, why_size)) < 0) return -1;
    f->has_timestamp = got;
    f->timestamp_ns = got ? (int64_t)n : now_ns(); /* a live stack stamps a frame as it comes */
    if ((f->has_sequence = integer(obj, "sequence", 0, INT64_MAX, &n, why, why_size)) < 0) return -1;
    if (f->has_sequence) f->sequence = (uint64_t)n;
    if ((f->has_tag = integer(obj, "tag", 0, INT64_MAX, &n, why, why_size)) < 0) return -1;
    if (f->has_tag) f->tag = (uint64_t)n;
    if ((got = integer(obj, "stream", 0, INT64_MAX, &n, why, why_size)) < 0) return -1;
    if (got) f->stream = (uint64_t)n;
    /* the images last: a line that is wrong anyway is not decoded first */
    return read_noise(obj, dir, f, why, why_size) || read_cameras(obj, dir, f, why, why_size) ? -1 : 0;
}

int frame_reader_next(frame_reader *r, driving_frame *f, char *err, size_t err_size)
{
    memset(f, 0, sizeof *f);
    f->command = -1;
    for (;;) {
        errno = 0;
        const ssize_t got = getline(&r->buffer, &r->capacity, r->file);
        if (got < 0) {
            if (ferror(r->file)) return snprintf(err, err_size, "reading the frame file: %s", strerror(errno)), -2;
            return 0;
        }
        r->line++;
        if (strspn(r->buffer, " \t\r\n") == (size_t)got) continue; /* an empty line */
        f->line = r->line;
        json_error_t e;
        json_t *obj = json_loadb(r->buffer, (size_t)got, JSON_REJECT_DUPLICATES, &e);
        char why[768];
        if (!obj) {
            snprintf(err, err_size, "line %ld: not JSON (%s)", r->line, e.text);
            return -1;
        }
        const int bad = read_frame(obj, r->dir, f, why, sizeof why);
        json_decref(obj);
        if (bad) {
            snprintf(err, err_size, "line %ld: %s", r->line, why);
            driving_frame_clear(f);
            return -1;
        }
        return 1;
    }
}
