/* What vh-run and vh-bench need to feed an Orion model (lib/family/orion, doc/orion-converter.md):
 * whether a model folder is one, the shape of its frames' vision tokens, raw float32 files, and
 * seeded normal floats. The library's public API does not say a model's family or token shape, so
 * they are read from the folder's config.json, as tools/orion/convert_orion.py writes it:
 * model_type "orion", vision_tokens (n), text_config.hidden_size (the width), planner.latent_dim
 * (the noise's length), planner.ego_fut_mode (the commands 0..modes-1), planner.fut_ts (the
 * trajectory's waypoints; MindDrive: planners.path's), front_end (a folder converted with the camera
 * front end, Orion's or MindDrive's: its frames may be six cameras instead of tokens). */
#ifndef VH_TOOLS_ORION_INPUTS_H
#define VH_TOOLS_ORION_INPUTS_H

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct vh_orion_shape {
    uint32_t n_tokens, width; /* a frame's vision tokens: n_tokens x width float32 */
    uint32_t latent;          /* floats of a frame's noise */
    uint32_t n_commands;      /* commands 0 .. n_commands - 1 */
    uint32_t n_points;        /* waypoints of a frame's trajectory (fut_ts); 0: the config does not say */
    int front_end;            /* 1: a camera front end (config.json's front_end object) */
    const char *family;       /* "orion" or "minddrive", config.json's model_type */
    const char *label;        /* "Orion" or "MindDrive", for what the tools print */
} vh_orion_shape;

/* 1: dir/config.json says model_type "orion" or "minddrive" (*shape filled; MindDrive's noise is
 * its speed planner's latent then its path planner's, tools/minddrive/convert_minddrive.py); 0:
 * another model or no readable config.json (the session will say what is wrong with it); -1: a
 * driving model's config without the fields (message in why). */
static inline int vh_orion_model_shape(const char *dir, vh_orion_shape *shape, char *why, size_t why_size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *root = json_load_file(path, 0, NULL);
    if (!root) return 0;
    const char *type = json_string_value(json_object_get(root, "model_type"));
    int rc = 0;
    const int minddrive = type && !strcmp(type, "minddrive");
    if (type && (!strcmp(type, "orion") || minddrive)) {
        const json_t *n = json_object_get(root, "vision_tokens");
        const json_t *w = json_object_get(json_object_get(root, "text_config"), "hidden_size");
        const json_t *planner = minddrive ? json_object_get(json_object_get(root, "planners"), "speed")
                                          : json_object_get(root, "planner");
        const json_t *path = json_object_get(json_object_get(root, "planners"), "path");
        const json_t *latent = json_object_get(planner, "latent_dim"), *modes = json_object_get(planner, "ego_fut_mode");
        const json_t *path_latent = json_object_get(path, "latent_dim");
        const json_t *points = json_object_get(minddrive ? path : planner, "fut_ts");
        if (!json_is_integer(n) || !json_is_integer(w) || json_integer_value(n) < 1 || json_integer_value(w) < 1 ||
            json_integer_value(n) > 65536 || json_integer_value(w) > 65536) {
            snprintf(why, why_size, "%.900s/config.json: a %s config without vision_tokens and text_config.hidden_size",
                     dir, type);
            rc = -1;
        } else {
            shape->n_tokens = (uint32_t)json_integer_value(n);
            shape->width = (uint32_t)json_integer_value(w);
            shape->latent = json_is_integer(latent) ? (uint32_t)json_integer_value(latent) : 32;
            shape->n_commands = json_is_integer(modes) ? (uint32_t)json_integer_value(modes) : 6;
            shape->n_points = json_is_integer(points) && json_integer_value(points) > 0 &&
                                      json_integer_value(points) <= 65536
                                  ? (uint32_t)json_integer_value(points)
                                  : 0;
            shape->family = minddrive ? "minddrive" : "orion";
            shape->label = minddrive ? "MindDrive" : "Orion";
            shape->front_end = json_is_object(json_object_get(root, "front_end"));
            if (minddrive) { /* the speed planner's noise, then the path planner's; the command picks the path */
                shape->latent += json_is_integer(path_latent) ? (uint32_t)json_integer_value(path_latent) : 32;
                shape->n_commands = 6;
            }
            rc = 1;
        }
    }
    json_decref(root);
    return rc;
}

/* A raw little-endian float32 file of exactly `want` floats (want 0: any whole number of floats,
 * their count in *count). NULL with the reason in why. */
static inline float *vh_read_f32_file(const char *path, size_t want, size_t *count, char *why, size_t why_size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, why_size, "%s: %s", path, strerror(errno));
        return NULL;
    }
    float *data = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        snprintf(why, why_size, "%s: cannot tell its size", path);
    } else if (size == 0 || size % 4 || (want && (uint64_t)size != (uint64_t)want * 4)) {
        if (want)
            snprintf(why, why_size, "%s has %ld bytes; it must hold %zu little-endian float32 (%zu bytes)", path, size,
                     want, want * 4);
        else
            snprintf(why, why_size, "%s has %ld bytes, not a whole number of float32", path, size);
    } else if (!(data = malloc((size_t)size))) {
        snprintf(why, why_size, "%s: out of memory", path);
    } else if (fread(data, 1, (size_t)size, f) != (size_t)size) {
        snprintf(why, why_size, "%s: read failed", path);
        free(data);
        data = NULL;
    } else {
        *count = (size_t)size / 4;
    }
    fclose(f);
    return data;
}

/* n normal floats of mean 0 and standard deviation 1, a pure function of (seed, stream): splitmix64
 * and Box-Muller. */
static inline void vh_seeded_normals(uint64_t seed, uint64_t stream, float *out, size_t n)
{
    uint64_t state = seed * 0x9e3779b97f4a7c15ull ^ (stream + 1) * 0xd1b54a32d192ed03ull;
    for (size_t i = 0; i < n; i += 2) {
        uint64_t r[2];
        for (int k = 0; k < 2; k++) {
            uint64_t z = (state += 0x9e3779b97f4a7c15ull);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            r[k] = z ^ (z >> 31);
        }
        const double u1 = ((r[0] >> 11) + 0.5) / 9007199254740992.0, u2 = (r[1] >> 11) / 9007199254740992.0;
        const double rad = sqrt(-2.0 * log(u1)), angle = 6.283185307179586 * u2;
        out[i] = (float)(rad * cos(angle));
        if (i + 1 < n) out[i + 1] = (float)(rad * sin(angle));
    }
}

#endif
