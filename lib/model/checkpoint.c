/* A Hugging Face checkpoint folder: find its shards, map them, and join their tensor tables. */
#include "model/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/file_read.h"

#define LISTED_NAMES_MAX 8 /* folder entries named in the "no checkpoint here" message */

typedef struct checkpoint_entry {
    const vh_st_tensor *tensor;
    vh_st_file *shard;
} checkpoint_entry;

struct vh_checkpoint {
    char *dir;
    vh_st_file **shards;        /* [n_shards], by file name */
    uint32_t n_shards;
    checkpoint_entry *entries;  /* [n_entries], every tensor of every shard, by name */
    uint32_t n_entries;
    uint64_t mapped_bytes;
};

/* "dir/name", malloc'd. */
static vh_status join_path(const char *dir, const char *name, char **out, vh_error *err)
{
    size_t a = strlen(dir), b = strlen(name), n;
    if (__builtin_add_overflow(a, b, &n) || __builtin_add_overflow(n, 2, &n))
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "%s: path too long", dir);
    *out = malloc(n);
    if (!*out) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
    snprintf(*out, n, "%s/%s", dir, name);
    return VH_OK;
}

/* Does path exist? false with *status VH_OK when it does not; an error status when it cannot
 * be told (permissions and the like). */
static bool path_exists(const char *path, vh_status *status, vh_error *err)
{
    struct stat st;
    *status = VH_OK;
    if (stat(path, &st) == 0) return true;
    if (errno != ENOENT && errno != ENOTDIR) {
        char reason[128];
        *status = vh_error_set(err, VH_ERR_IO, "%s: cannot stat: %s", path,
                               strerror_r(errno, reason, sizeof reason));
    }
    return false;
}

/* A shard name must stay inside the folder: a plain, non-empty file name. */
static bool is_plain_file_name(const char *name)
{
    return name[0] != '\0' && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
           !strchr(name, '/') && !strchr(name, '\\');
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static vh_status open_shard(vh_checkpoint *c, const char *index_path, const char *shard_name,
                            vh_st_file **shard, vh_error *err)
{
    char *path;
    vh_status status = join_path(c->dir, shard_name, &path, err);
    if (status != VH_OK) return status;
    if (!path_exists(path, &status, err) && status == VH_OK)
        status = vh_error_set(err, VH_ERR_BAD_MODEL,
                              "%s names shard '%s', which is not in the folder (incomplete "
                              "download?)", index_path, shard_name);
    if (status == VH_OK) status = vh_st_open(path, shard, err);
    free(path);
    return status;
}

/* Check the index's optional "metadata": an object whose total_size, if any, is a number >= 0. */
static vh_status check_index_metadata(const char *index_path, json_t *root, vh_error *err)
{
    json_t *metadata = json_object_get(root, "metadata");
    if (!metadata) return VH_OK;
    if (!json_is_object(metadata))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: \"metadata\" is not an object",
                            index_path);
    json_t *total = json_object_get(metadata, "total_size");
    if (total && (!json_is_number(total) || json_number_value(total) < 0))
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: metadata.total_size is not a non-negative number", index_path);
    return VH_OK;
}

/* Open every shard the weight map names, and check each listed tensor is in its shard. */
static vh_status open_shards_of_map(vh_checkpoint *c, const char *index_path, json_t *map,
                                    vh_error *err)
{
    size_t n_listed = json_object_size(map);
    const char **names = calloc(n_listed, sizeof *names); /* shard names, into the JSON */
    if (!names) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", index_path);

    vh_status status = VH_OK;
    size_t k = 0;
    for (void *it = json_object_iter(map); it; it = json_object_iter_next(map, it)) {
        json_t *value = json_object_iter_value(it);
        const char *tensor = json_object_iter_key(it);
        if (!json_is_string(value)) {
            status = vh_error_set(err, VH_ERR_BAD_MODEL,
                                  "%s: weight_map entry of tensor '%s' is not a file name string",
                                  index_path, tensor);
            goto done;
        }
        /* Jansson refuses NUL bytes in strings (no JSON_ALLOW_NUL), so strlen is the length. */
        if (!is_plain_file_name(json_string_value(value))) {
            status = vh_error_set(err, VH_ERR_BAD_MODEL,
                                  "%s: tensor '%s' is listed in shard '%s', which is not a plain "
                                  "file name in the folder", index_path, tensor,
                                  json_string_value(value));
            goto done;
        }
        names[k++] = json_string_value(value);
    }

    qsort(names, n_listed, sizeof *names, compare_strings);
    size_t n_unique = 0;
    for (size_t i = 0; i < n_listed; i++)
        if (n_unique == 0 || strcmp(names[n_unique - 1], names[i]) != 0) names[n_unique++] = names[i];
    c->shards = calloc(n_unique, sizeof *c->shards);
    if (!c->shards) {
        status = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", index_path);
        goto done;
    }
    for (size_t i = 0; i < n_unique && status == VH_OK; i++) {
        status = open_shard(c, index_path, names[i], &c->shards[i], err);
        if (status == VH_OK) c->n_shards++;
    }

    for (void *it = json_object_iter(map); it && status == VH_OK;
         it = json_object_iter_next(map, it)) {
        const char *tensor = json_object_iter_key(it);
        const char *shard_name = json_string_value(json_object_iter_value(it));
        const char **hit = bsearch(&shard_name, names, n_unique, sizeof *names, compare_strings);
        vh_st_file *shard = c->shards[hit - names];
        if (!vh_st_find(shard, tensor))
            status = vh_error_set(err, VH_ERR_BAD_MODEL,
                                  "%s lists tensor '%s' in shard '%s', which does not hold it",
                                  index_path, tensor, shard_name);
    }
done:
    free(names);
    return status;
}

/* Check the parsed index {"metadata": ..., "weight_map": ...} and open the shards it names. */
static vh_status open_index_object(vh_checkpoint *c, const char *index_path, json_t *root,
                                   vh_error *err)
{
    if (!json_is_object(root))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: not a JSON object", index_path);
    vh_status status = check_index_metadata(index_path, root, err);
    if (status != VH_OK) return status;
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: \"weight_map\" is %s", index_path,
                            map ? "not an object" : "missing");
    if (json_object_size(map) == 0)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: \"weight_map\" lists no tensors",
                            index_path);
    return open_shards_of_map(c, index_path, map, err);
}

/* Read model.safetensors.index.json and open the shards it names. */
static vh_status open_sharded(vh_checkpoint *c, const char *index_path, vh_error *err)
{
    char *text;
    size_t len;
    vh_status status = vh_read_text_file(index_path, VH_CHECKPOINT_MAX_INDEX_BYTES, &text, &len,
                                         err);
    if (status != VH_OK) return status;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: not valid JSON: %s (line %d, column %d)",
                            index_path, jerr.text, jerr.line, jerr.column);

    status = open_index_object(c, index_path, root, err);
    json_decref(root);
    return status;
}

static vh_status open_single(vh_checkpoint *c, const char *path, vh_error *err)
{
    c->shards = calloc(1, sizeof *c->shards);
    if (!c->shards) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    vh_status status = vh_st_open(path, &c->shards[0], err);
    if (status == VH_OK) c->n_shards = 1;
    return status;
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Neither index nor model.safetensors: say what the folder holds instead. */
static vh_status describe_folder(const char *dir, vh_error *err)
{
    char reason[128];
    DIR *d = opendir(dir);
    if (!d)
        return vh_error_set(err, VH_ERR_IO, "%s: cannot list: %s", dir,
                            strerror_r(errno, reason, sizeof reason));
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool has_pickles = false;
    vh_status status = VH_OK;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (starts_with(e->d_name, "pytorch_model") && ends_with(e->d_name, ".bin"))
            has_pickles = true;
        if (n == cap) {
            size_t grown = cap ? cap * 2 : 16, bytes;
            char **bigger = NULL;
            if (!__builtin_mul_overflow(grown, sizeof *names, &bytes)) bigger = realloc(names, bytes);
            if (!bigger) {
                status = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
                break;
            }
            names = bigger;
            cap = grown;
        }
        if (!(names[n] = strdup(e->d_name))) {
            status = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
            break;
        }
        n++;
    }
    closedir(d);

    if (status == VH_OK) {
        if (n > 1) qsort(names, n, sizeof *names, compare_strings);
        char listing[256] = "";
        size_t used = 0;
        for (size_t i = 0; i < n && i < LISTED_NAMES_MAX && used < sizeof listing; i++)
            used += (size_t)snprintf(listing + used, sizeof listing - used, "%s%s",
                                     i ? ", " : "", names[i]);
        if (n > LISTED_NAMES_MAX && used < sizeof listing)
            snprintf(listing + used, sizeof listing - used, " and %zu more",
                     n - LISTED_NAMES_MAX);
        if (n == 0)
            status = vh_error_set(err, VH_ERR_BAD_MODEL,
                                  "%s: empty folder: no " VH_CHECKPOINT_SINGLE_FILE " or "
                                  VH_CHECKPOINT_INDEX_FILE, dir);
        else if (has_pickles)
            status = vh_error_set(err, VH_ERR_UNSUPPORTED,
                                  "%s: only PyTorch pickle weights (pytorch_model*.bin), which "
                                  "are not supported; convert them to safetensors (in Python: "
                                  "from_pretrained(dir).save_pretrained(out, "
                                  "safe_serialization=True)). The folder holds: %s", dir, listing);
        else
            status = vh_error_set(err, VH_ERR_BAD_MODEL,
                                  "%s: no " VH_CHECKPOINT_SINGLE_FILE " or "
                                  VH_CHECKPOINT_INDEX_FILE "; the folder holds: %s", dir, listing);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return status;
}

static int compare_entries(const void *a, const void *b)
{
    const checkpoint_entry *x = a, *y = b;
    int order = strcmp(x->tensor->name, y->tensor->name);
    return order ? order : strcmp(vh_st_path(x->shard), vh_st_path(y->shard));
}

/* One table of every shard's tensors, by name; a name in two shards is an error. */
static vh_status build_table(vh_checkpoint *c, vh_error *err)
{
    uint64_t total = 0;
    for (uint32_t s = 0; s < c->n_shards; s++) {
        total += vh_st_count(c->shards[s]); /* at most 2^32 shards of 2^20: no overflow */
        c->mapped_bytes += vh_st_file_size(c->shards[s]);
    }
    if (total > UINT32_MAX)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %llu tensors are too many", c->dir,
                            (unsigned long long)total);
    c->entries = calloc(total ? (size_t)total : 1, sizeof *c->entries);
    if (!c->entries) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", c->dir);
    for (uint32_t s = 0; s < c->n_shards; s++)
        for (uint32_t i = 0; i < vh_st_count(c->shards[s]); i++)
            c->entries[c->n_entries++] = (checkpoint_entry){vh_st_at(c->shards[s], i), c->shards[s]};
    qsort(c->entries, c->n_entries, sizeof *c->entries, compare_entries);
    for (uint32_t i = 1; i < c->n_entries; i++) {
        const checkpoint_entry *a = &c->entries[i - 1], *b = &c->entries[i];
        if (strcmp(a->tensor->name, b->tensor->name) == 0)
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: tensor '%s' is in two shards: %s and %s",
                                c->dir, a->tensor->name, vh_st_path(a->shard),
                                vh_st_path(b->shard));
    }
    return VH_OK;
}

/* Pick how the folder stores its weights and open them. */
static vh_status open_files(vh_checkpoint *c, vh_error *err)
{
    char *path;
    vh_status status = join_path(c->dir, VH_CHECKPOINT_INDEX_FILE, &path, err);
    if (status != VH_OK) return status;
    if (path_exists(path, &status, err)) {
        status = open_sharded(c, path, err);
        free(path);
        return status;
    }
    free(path);
    if (status != VH_OK) return status;

    if ((status = join_path(c->dir, VH_CHECKPOINT_SINGLE_FILE, &path, err)) != VH_OK) return status;
    if (path_exists(path, &status, err)) status = open_single(c, path, err);
    else if (status == VH_OK) status = describe_folder(c->dir, err);
    free(path);
    return status;
}

vh_status vh_checkpoint_open(const char *dir, vh_checkpoint **out, vh_error *err)
{
    if (!dir || !out)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_checkpoint_open: NULL argument");
    *out = NULL;
    char reason[128];
    struct stat st;
    if (stat(dir, &st) != 0)
        return vh_error_set(err, VH_ERR_IO, "%s: cannot open the checkpoint folder: %s", dir,
                            strerror_r(errno, reason, sizeof reason));
    if (!S_ISDIR(st.st_mode))
        return vh_error_set(err, VH_ERR_IO,
                            "%s: not a folder (give the checkpoint folder, not a file in it)", dir);

    vh_checkpoint *c = calloc(1, sizeof *c);
    if (!c) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
    c->dir = strdup(dir);
    vh_status status = c->dir ? open_files(c, err)
                              : vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
    if (status == VH_OK) status = build_table(c, err);
    if (status != VH_OK) {
        vh_checkpoint_close(c);
        return status;
    }
    *out = c;
    return VH_OK;
}

void vh_checkpoint_close(vh_checkpoint *c)
{
    if (!c) return;
    for (uint32_t s = 0; s < c->n_shards; s++) vh_st_close(c->shards[s]);
    free(c->shards);
    free(c->entries);
    free(c->dir);
    free(c);
}

static int compare_name_key(const void *key, const void *entry)
{
    return strcmp(key, ((const checkpoint_entry *)entry)->tensor->name);
}

const vh_st_tensor *vh_checkpoint_find(const vh_checkpoint *c, const char *name,
                                       vh_st_file **file)
{
    const checkpoint_entry *hit = NULL;
    if (name && c->n_entries)
        hit = bsearch(name, c->entries, c->n_entries, sizeof *c->entries, compare_name_key);
    if (file) *file = hit ? hit->shard : NULL;
    return hit ? hit->tensor : NULL;
}

uint32_t vh_checkpoint_count(const vh_checkpoint *c) { return c->n_entries; }

const vh_st_tensor *vh_checkpoint_at(const vh_checkpoint *c, uint32_t i, vh_st_file **file)
{
    const checkpoint_entry *e = i < c->n_entries ? &c->entries[i] : NULL;
    if (file) *file = e ? e->shard : NULL;
    return e ? e->tensor : NULL;
}

uint32_t vh_checkpoint_shard_count(const vh_checkpoint *c) { return c->n_shards; }

vh_st_file *vh_checkpoint_shard(const vh_checkpoint *c, uint32_t i)
{
    return i < c->n_shards ? c->shards[i] : NULL;
}

uint64_t vh_checkpoint_mapped_bytes(const vh_checkpoint *c) { return c->mapped_bytes; }

const char *vh_checkpoint_dir(const vh_checkpoint *c) { return c->dir; }
