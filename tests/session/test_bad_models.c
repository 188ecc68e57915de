/* Damaged checkpoint folders through vh_session_create: copies of the tiny models, each broken
 * one way (config, tokenizer, index, shards, tensors), must fail with the right status and a
 * message naming the file and, where there is one, the tensor; never crash or hang. Then the
 * same process must still load the good models (no global state left broken).
 *
 * Safetensors files are rewritten here in C (header parsed with jansson, an entry dropped or
 * edited, the byte buffer re-packed), so no Python runs at test time. */
#include <errno.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#define MODEL_A_DIR "models/openvla-tiny"                  /* 2 bf16 shards + index */
#define MODEL_B_DIR "tests/fixtures/models/openvla-tiny-b" /* model.safetensors, fp16, 2 datasets */
#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"
#define INDEX "model.safetensors.index.json"
#define SINGLE "model.safetensors"

static char *model_src[2];

/* ---------------------------------------------------------------------------------------------
 * Files
 */
static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void write_bytes(const char *dir, const char *name, const void *data, size_t size)
{
    char *path = join(dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f, "%s: %s", path, strerror(errno));
    ck_assert(size == 0 || fwrite(data, 1, size, f) == size);
    ck_assert_int_eq(fclose(f), 0);
    free(path);
}

static void remove_file(const char *dir, const char *name)
{
    char *path = join(dir, name);
    ck_assert_msg(unlink(path) == 0, "%s: %s", path, strerror(errno));
    free(path);
}

static void copy_folder(const char *from, const char *to)
{
    DIR *d = opendir(from);
    ck_assert_msg(d, "%s: %s", from, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *src = join(from, e->d_name);
        size_t size = 0;
        uint8_t *data = vh_test_read_file(src, &size);
        ck_assert_msg(data, "%s: unreadable", src);
        write_bytes(to, e->d_name, data, size);
        free(data);
        free(src);
    }
    closedir(d);
}

static void truncate_by(const char *dir, const char *name, long cut)
{
    char *path = join(dir, name);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(truncate(path, cut < 0 ? st.st_size / 2 : st.st_size - cut), 0);
    free(path);
}

/* Load a JSON file of the folder, let `edit` change it, write it back. */
typedef void (*json_edit)(json_t *root);

static void edit_json_file(const char *dir, const char *name, json_edit edit)
{
    char *path = join(dir, name);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    ck_assert_msg(root, "%s: %s", path, jerr.text);
    edit(root);
    ck_assert_int_eq(json_dump_file(root, path, JSON_INDENT(2)), 0);
    json_decref(root);
    free(path);
}

/* Rewrite a safetensors file: drop the tensor `drop` (may be NULL) and re-pack the byte buffer in
 * the old order, then let `edit` change the header; the header is padded to 8 bytes. */
typedef struct st_entry {
    const char *name;
    json_t *info;
    uint64_t begin, end;
} st_entry;

static int by_begin(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static void rewrite_safetensors(const char *dir, const char *name, const char *drop, json_edit edit)
{
    char *path = join(dir, name);
    size_t size = 0;
    uint8_t *bytes = vh_test_read_file(path, &size);
    ck_assert_ptr_nonnull(bytes);
    ck_assert_uint_ge(size, 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | bytes[i];
    ck_assert_uint_le(n, size - 8);
    json_error_t jerr;
    json_t *header = json_loadb((const char *)bytes + 8, (size_t)n, 0, &jerr);
    ck_assert_msg(header, "%s: %s", path, jerr.text);
    const uint8_t *data = bytes + 8 + n;

    size_t count = 0;
    st_entry *entries = calloc(json_object_size(header) + 1, sizeof *entries);
    ck_assert_ptr_nonnull(entries);
    const char *key;
    json_t *value;
    int dropped = 0;
    json_object_foreach(header, key, value) {
        if (!strcmp(key, "__metadata__")) continue;
        if (drop && !strcmp(key, drop)) {
            dropped = 1;
            continue;
        }
        json_t *offsets = json_object_get(value, "data_offsets");
        entries[count++] = (st_entry){key, value, (uint64_t)json_integer_value(json_array_get(offsets, 0)),
                                      (uint64_t)json_integer_value(json_array_get(offsets, 1))};
    }
    ck_assert_msg(!drop || dropped, "%s has no tensor '%s'", path, drop);
    qsort(entries, count, sizeof *entries, by_begin);
    uint8_t *packed = malloc(size - 8 - n + 1);
    ck_assert_ptr_nonnull(packed);
    uint64_t cursor = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t len = entries[i].end - entries[i].begin;
        memcpy(packed + cursor, data + entries[i].begin, len);
        json_t *offsets = json_array();
        json_array_append_new(offsets, json_integer((json_int_t)cursor));
        json_array_append_new(offsets, json_integer((json_int_t)(cursor + len)));
        json_object_set_new(entries[i].info, "data_offsets", offsets);
        cursor += len;
    }
    if (drop) json_object_del(header, drop);
    if (edit) edit(header);

    char *text = json_dumps(header, JSON_COMPACT);
    ck_assert_ptr_nonnull(text);
    size_t text_len = strlen(text), padded = (text_len + 7) / 8 * 8;
    uint8_t *out = malloc(8 + padded + cursor);
    ck_assert_ptr_nonnull(out);
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(out + 8, text, text_len);
    memset(out + 8 + text_len, ' ', padded - text_len);
    memcpy(out + 8 + padded, packed, cursor);
    write_bytes(dir, name, out, 8 + padded + cursor);

    free(out);
    free(text);
    free(packed);
    free(entries);
    json_decref(header);
    free(bytes);
    free(path);
}

static void set_header_length(const char *dir, const char *name, uint64_t n)
{
    char *path = join(dir, name);
    size_t size = 0;
    uint8_t *bytes = vh_test_read_file(path, &size);
    ck_assert_ptr_nonnull(bytes);
    for (int i = 0; i < 8; i++) bytes[i] = (uint8_t)(n >> (8 * i));
    write_bytes(dir, name, bytes, size);
    free(bytes);
    free(path);
}

/* ---------------------------------------------------------------------------------------------
 * The damage, one function a case
 */
static void config_missing(const char *d) { remove_file(d, "config.json"); }
static void config_empty(const char *d) { write_bytes(d, "config.json", "", 0); }
static void config_not_json(const char *d)
{
    const char text[] = "{\"model_type\": \"openvla\", \"norm_stats\": {";
    write_bytes(d, "config.json", text, sizeof text - 1);
}
static void config_array(const char *d) { write_bytes(d, "config.json", "[1, 2]", 6); }

static void set_model_type_llava(json_t *r) { json_object_set_new(r, "model_type", json_string("llava")); }
static void drop_model_type(json_t *r) { json_object_del(r, "model_type"); }
static void drop_norm_stats(json_t *r) { json_object_del(r, "norm_stats"); }
static void short_q99(json_t *r)
{
    json_t *action = json_object_get(json_object_get(json_object_get(r, "norm_stats"), "bridge_orig"), "action");
    json_array_remove(json_object_get(action, "q99"), 0);
}
static void hidden_128(json_t *r) { json_object_set_new(json_object_get(r, "text_config"), "hidden_size", json_integer(128)); }
static void config_model_type(const char *d) { edit_json_file(d, "config.json", set_model_type_llava); }
static void config_no_model_type(const char *d) { edit_json_file(d, "config.json", drop_model_type); }
static void config_no_norm_stats(const char *d) { edit_json_file(d, "config.json", drop_norm_stats); }
static void config_short_q99(const char *d) { edit_json_file(d, "config.json", short_q99); }
static void config_hidden_disagrees(const char *d) { edit_json_file(d, "config.json", hidden_128); }
static void preprocessor_not_json(const char *d) { write_bytes(d, "preprocessor_config.json", "{\"means\": [", 11); }

static void tokenizer_missing(const char *d) { remove_file(d, "tokenizer.model"); }
static void tokenizer_truncated(const char *d) { truncate_by(d, "tokenizer.model", -1); }
static void tokenizer_empty(const char *d) { write_bytes(d, "tokenizer.model", "", 0); }
static void tokenizer_garbage(const char *d)
{
    size_t n = 499723;
    uint8_t *junk = malloc(n);
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (uint8_t)(x >> 16);
    }
    write_bytes(d, "tokenizer.model", junk, n);
    free(junk);
}
static void tokenizer_text(const char *d)
{
    const char text[] = "{\"model\": {\"type\": \"BPE\"}}"; /* a tokenizer.json saved under the wrong name */
    write_bytes(d, "tokenizer.model", text, sizeof text - 1);
}

static void index_missing_shard(const char *d) { remove_file(d, SHARD2); }
static void index_not_json(const char *d) { write_bytes(d, INDEX, "{\"weight_map\": ", 15); }
static void shard_outside(json_t *r)
{
    json_object_set_new(json_object_get(r, "weight_map"), "projector.fc1.bias", json_string("../" SHARD1));
}
static void index_shard_outside(const char *d) { edit_json_file(d, INDEX, shard_outside); }
static void drop_from_index(json_t *r)
{
    json_object_del(json_object_get(r, "weight_map"), "language_model.model.layers.1.mlp.up_proj.weight");
}

static void shard_truncated_1(const char *d) { truncate_by(d, SHARD1, 1); }
static void shard_truncated_half(const char *d) { truncate_by(d, SHARD1, -1); }
static void shard_truncated_to_4(const char *d)
{
    char *path = join(d, SHARD2);
    ck_assert_int_eq(truncate(path, 4), 0);
    free(path);
}
static void shard_empty(const char *d) { write_bytes(d, SHARD2, "", 0); }
static void shard_header_huge(const char *d) { set_header_length(d, SHARD1, (uint64_t)1 << 62); }
static void shard_header_past_end(const char *d) { set_header_length(d, SHARD1, 50000000); }
static void shard_is_zip(const char *d)
{
    uint8_t zip[64] = {'P', 'K', 3, 4, 20, 0, 0, 0, 8, 0};
    write_bytes(d, SINGLE, zip, sizeof zip);
}
static void shard_is_folder(const char *d)
{
    remove_file(d, SINGLE);
    char *path = join(d, SINGLE);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    free(path);
}

#define LLM_TENSOR "language_model.model.layers.1.mlp.up_proj.weight"
static void tensor_missing_single(const char *d) { rewrite_safetensors(d, SINGLE, LLM_TENSOR, NULL); }
static void tensor_missing_from_shard(const char *d) { rewrite_safetensors(d, SHARD2, LLM_TENSOR, NULL); }
static void tensor_missing_everywhere(const char *d)
{
    rewrite_safetensors(d, SHARD2, LLM_TENSOR, NULL);
    edit_json_file(d, INDEX, drop_from_index);
}
static void transpose_fc1(json_t *h)
{
    json_t *shape = json_object_get(json_object_get(h, "projector.fc1.weight"), "shape");
    json_int_t a = json_integer_value(json_array_get(shape, 0)), b = json_integer_value(json_array_get(shape, 1));
    json_array_set_new(shape, 0, json_integer(b));
    json_array_set_new(shape, 1, json_integer(a));
}
static void norm_i16(json_t *h)
{
    json_object_set_new(json_object_get(h, "language_model.model.norm.weight"), "dtype", json_string("I16"));
}
static void norm_i32(json_t *h)
{
    /* 32 F16 values = 64 bytes = 16 I32 values: still a consistent safetensors entry */
    json_t *t = json_object_get(h, "language_model.model.norm.weight");
    json_object_set_new(t, "dtype", json_string("I32"));
    json_t *shape = json_array();
    json_array_append_new(shape, json_integer(json_integer_value(json_array_get(json_object_get(t, "shape"), 0)) / 2));
    json_object_set_new(t, "shape", shape);
}
static void tensor_wrong_shape(const char *d) { rewrite_safetensors(d, SINGLE, NULL, transpose_fc1); }
static void tensor_dtype_i16(const char *d) { rewrite_safetensors(d, SINGLE, NULL, norm_i16); }
static void tensor_dtype_i32(const char *d) { rewrite_safetensors(d, SINGLE, NULL, norm_i32); }

static void unreadable(const char *d, const char *name)
{
    char *path = join(d, name);
    ck_assert_int_eq(chmod(path, 0), 0);
    free(path);
}
static void config_unreadable(const char *d) { unreadable(d, "config.json"); }
static void shard_unreadable(const char *d) { unreadable(d, SHARD2); }
static void tokenizer_unreadable(const char *d) { unreadable(d, "tokenizer.model"); }

/* Not a regular file in a file's place: opening a FIFO for reading blocks until a writer comes,
 * /dev/zero reads without end, a folder reads as an error. The library must refuse each at once
 * (a hang fails the test by its timeout). */
static void replace_by_fifo(const char *d, const char *name)
{
    char *path = join(d, name);
    unlink(path); /* an optional file may be absent */
    ck_assert_msg(mkfifo(path, 0644) == 0, "%s: %s", path, strerror(errno));
    free(path);
}
static void replace_by_folder(const char *d, const char *name)
{
    char *path = join(d, name);
    unlink(path);
    ck_assert_msg(mkdir(path, 0755) == 0, "%s: %s", path, strerror(errno));
    free(path);
}
static void replace_by_dev_zero(const char *d, const char *name)
{
    char *path = join(d, name);
    unlink(path);
    ck_assert_msg(symlink("/dev/zero", path) == 0, "%s: %s", path, strerror(errno));
    free(path);
}
static void config_fifo(const char *d) { replace_by_fifo(d, "config.json"); }
static void config_dev_zero(const char *d) { replace_by_dev_zero(d, "config.json"); }
static void tokenizer_fifo(const char *d) { replace_by_fifo(d, "tokenizer.model"); }
static void tokenizer_folder(const char *d) { replace_by_folder(d, "tokenizer.model"); }
static void tokenizer_dev_zero(const char *d) { replace_by_dev_zero(d, "tokenizer.model"); }
static void preprocessor_fifo(const char *d) { replace_by_fifo(d, "preprocessor_config.json"); }
static void preprocessor_folder(const char *d) { replace_by_folder(d, "preprocessor_config.json"); }
static void preprocessor_dev_zero(const char *d) { replace_by_dev_zero(d, "preprocessor_config.json"); }
static void preprocessor_dangling(const char *d)
{
    char *path = join(d, "preprocessor_config.json");
    unlink(path);
    ck_assert_int_eq(symlink("no-such-file.json", path), 0);
    free(path);
}
static void preprocessor_unreadable(const char *d) { unreadable(d, "preprocessor_config.json"); }
static void index_fifo(const char *d) { replace_by_fifo(d, INDEX); }
static void shard_fifo(const char *d) { replace_by_fifo(d, SHARD2); }

static void pytorch_bin_only(const char *d)
{
    remove_file(d, SINGLE);
    uint8_t zip[64] = {'P', 'K', 3, 4, 20, 0, 0, 0, 8, 0};
    write_bytes(d, "pytorch_model.bin", zip, sizeof zip);
}
static void no_weights(const char *d) { remove_file(d, SINGLE); }

/* ---------------------------------------------------------------------------------------------
 * The table
 */
typedef struct damage_case {
    const char *name;
    int model;                /* 0: A (sharded), 1: B (single file) */
    void (*damage)(const char *dir);
    vh_status want;
    const char *file;         /* the message names this file ("$dir": the model folder) */
    const char *tensor;       /* and this tensor (NULL: none) */
    const char *also;         /* and this (NULL: nothing more) */
    int needs_non_root;       /* permissions: root reads anyway */
} damage_case;

#define A 0
#define B 1
static const damage_case cases[] = {
    {"config_missing", A, config_missing, VH_ERR_IO, "config.json", NULL, NULL, 0},
    {"config_empty", A, config_empty, VH_ERR_BAD_MODEL, "config.json", NULL, "JSON", 0},
    {"config_not_json", A, config_not_json, VH_ERR_BAD_MODEL, "config.json", NULL, "JSON", 0},
    {"config_array", A, config_array, VH_ERR_BAD_MODEL, "config.json", NULL, NULL, 0},
    {"config_model_type_wrong", A, config_model_type, VH_ERR_UNSUPPORTED, "config.json", NULL, "llava", 0},
    {"config_model_type_missing", A, config_no_model_type, VH_ERR_UNSUPPORTED, "config.json", NULL, "model_type", 0},
    {"config_norm_stats_missing", A, config_no_norm_stats, VH_ERR_BAD_MODEL, "config.json", NULL, "norm_stats", 0},
    {"config_norm_stats_short", A, config_short_q99, VH_ERR_BAD_MODEL, "config.json", NULL, "q99", 0},
    {"config_hidden_size_disagrees", A, config_hidden_disagrees, VH_ERR_BAD_MODEL, SHARD1, "projector.fc2.weight",
     "shape", 0},
    {"preprocessor_not_json", A, preprocessor_not_json, VH_ERR_BAD_MODEL, "preprocessor_config.json", NULL, NULL, 0},
    {"tokenizer_missing", A, tokenizer_missing, VH_ERR_IO, "tokenizer.model", NULL, NULL, 0},
    {"tokenizer_truncated", A, tokenizer_truncated, VH_ERR_BAD_MODEL, "tokenizer.model", NULL, NULL, 0},
    {"tokenizer_empty", B, tokenizer_empty, VH_ERR_BAD_MODEL, "tokenizer.model", NULL, NULL, 0},
    {"tokenizer_garbage", A, tokenizer_garbage, VH_ERR_BAD_MODEL, "tokenizer.model", NULL, NULL, 0},
    {"tokenizer_json_text", B, tokenizer_text, VH_ERR_BAD_MODEL, "tokenizer.model", NULL, NULL, 0},
    {"index_names_missing_shard", A, index_missing_shard, VH_ERR_BAD_MODEL, INDEX, NULL, SHARD2, 0},
    {"index_not_json", A, index_not_json, VH_ERR_BAD_MODEL, INDEX, NULL, NULL, 0},
    {"index_shard_outside_folder", A, index_shard_outside, VH_ERR_BAD_MODEL, INDEX, "projector.fc1.bias", "../", 0},
    {"shard_truncated_1_byte", A, shard_truncated_1, VH_ERR_BAD_MODEL, SHARD1,
     "vision_backbone.fused_featurizer.pos_embed", "truncated", 0},
    {"shard_truncated_half", A, shard_truncated_half, VH_ERR_BAD_MODEL, SHARD1, "language_model.model.embed_tokens.weight",
     "truncated", 0},
    {"shard_truncated_to_4_bytes", A, shard_truncated_to_4, VH_ERR_BAD_MODEL, SHARD2, NULL, NULL, 0},
    {"shard_empty", A, shard_empty, VH_ERR_IO, SHARD2, NULL, NULL, 0},
    {"shard_header_length_huge", A, shard_header_huge, VH_ERR_BAD_MODEL, SHARD1, NULL, "header", 0},
    {"shard_header_past_end", A, shard_header_past_end, VH_ERR_BAD_MODEL, SHARD1, NULL, "header", 0},
    {"single_is_zip", B, shard_is_zip, VH_ERR_BAD_MODEL, SINGLE, NULL, "zip", 0},
    {"single_is_folder", B, shard_is_folder, VH_ERR_IO, SINGLE, NULL, NULL, 0},
    {"tensor_missing", B, tensor_missing_single, VH_ERR_BAD_MODEL, "$dir", LLM_TENSOR, NULL, 0},
    {"tensor_missing_from_listed_shard", A, tensor_missing_from_shard, VH_ERR_BAD_MODEL, INDEX, LLM_TENSOR, SHARD2, 0},
    {"tensor_missing_everywhere", A, tensor_missing_everywhere, VH_ERR_BAD_MODEL, "$dir", LLM_TENSOR, NULL, 0},
    {"tensor_wrong_shape", B, tensor_wrong_shape, VH_ERR_BAD_MODEL, SINGLE, "projector.fc1.weight", "shape", 0},
    {"tensor_dtype_i16", B, tensor_dtype_i16, VH_ERR_BAD_MODEL, SINGLE, "language_model.model.norm.weight", "I16", 0},
    {"tensor_dtype_i32", B, tensor_dtype_i32, VH_ERR_BAD_MODEL, SINGLE, "language_model.model.norm.weight", "I32", 0},
    {"config_unreadable", A, config_unreadable, VH_ERR_IO, "config.json", NULL, NULL, 1},
    {"tokenizer_unreadable", A, tokenizer_unreadable, VH_ERR_IO, "tokenizer.model", NULL, NULL, 1},
    {"shard_unreadable", A, shard_unreadable, VH_ERR_IO, SHARD2, NULL, NULL, 1},
    {"pytorch_bin_only", B, pytorch_bin_only, VH_ERR_UNSUPPORTED, "pytorch_model", NULL, "safetensors", 0},
    {"no_weights", B, no_weights, VH_ERR_BAD_MODEL, SINGLE, NULL, NULL, 0},
    /* not regular files: refused at once, never read (a FIFO used to hang the tokenizer) */
    {"config_fifo", A, config_fifo, VH_ERR_IO, "config.json", NULL, "not a regular file", 0},
    {"config_dev_zero", A, config_dev_zero, VH_ERR_IO, "config.json", NULL, "not a regular file", 0},
    {"tokenizer_fifo", A, tokenizer_fifo, VH_ERR_IO, "tokenizer.model", NULL, "not a regular file", 0},
    {"tokenizer_folder", A, tokenizer_folder, VH_ERR_IO, "tokenizer.model", NULL, "is a directory", 0},
    {"tokenizer_dev_zero", B, tokenizer_dev_zero, VH_ERR_IO, "tokenizer.model", NULL, "not a regular file", 0},
    {"index_fifo", A, index_fifo, VH_ERR_IO, INDEX, NULL, "not a regular file", 0},
    {"shard_fifo", A, shard_fifo, VH_ERR_IO, SHARD2, NULL, "not a regular file", 0},
    /* the optional preprocessor_config.json: absent gives the config's defaults, but one that is
     * there and cannot be read is an error, never silently the defaults */
    {"preprocessor_fifo", A, preprocessor_fifo, VH_ERR_IO, "preprocessor_config.json", NULL, "not a regular file", 0},
    {"preprocessor_folder", A, preprocessor_folder, VH_ERR_IO, "preprocessor_config.json", NULL, "is a directory", 0},
    {"preprocessor_dev_zero", B, preprocessor_dev_zero, VH_ERR_IO, "preprocessor_config.json", NULL,
     "not a regular file", 0},
    {"preprocessor_dangling_link", A, preprocessor_dangling, VH_ERR_IO, "preprocessor_config.json", NULL, NULL, 0},
    {"preprocessor_unreadable", A, preprocessor_unreadable, VH_ERR_IO, "preprocessor_config.json", NULL, NULL, 1},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

/* Parameters for a copy of model `which`: cpu_generic, one thread, model B's first dataset. */
static void params_for(vh_session_params *p, int which, const char *dir)
{
    vh_session_params_init(p);
    p->model_path = dir;
    p->backends = "cpu_generic";
    p->n_threads = 1;
    if (which == B) p->unnorm_key = "bridge_orig";
}

static char *fresh_copy(int which)
{
    char *dir = vh_test_make_temp_dir();
    copy_folder(model_src[which], dir);
    return dir;
}

/* Damage a fresh copy, load it, check the failure (the message too when `check_message`).
 * Returns 0 when skipped. */
static int run_case(const damage_case *c, int check_message)
{
    if (c->needs_non_root && geteuid() == 0) return 0; /* root reads a mode-000 file anyway */
    char *dir = fresh_copy(c->model);
    c->damage(dir);
    vh_session_params p;
    params_for(&p, c->model, dir);
    vh_session *s = (vh_session *)&s;
    vh_status st = vh_session_create(&p, &s);
    char message[1024], file[1024];
    snprintf(message, sizeof message, "%s", vh_last_error());
    snprintf(file, sizeof file, "%s", !strcmp(c->file, "$dir") ? dir : c->file);
    int leaked_session = st != VH_OK && s != NULL;
    if (st == VH_OK) vh_session_destroy(s);
    if (getenv("VH_TEST_VERBOSE")) printf("%-34s %-22s %s\n", c->name, vh_status_string(st), message);
    vh_test_remove_tree(dir); /* before any assertion, so a failure leaves no folder behind */
    free(dir);

    ck_assert_msg(st == c->want, "%s: status %d (%s), expected %d (%s); message: %s", c->name, st,
                  vh_status_string(st), c->want, vh_status_string(c->want), message);
    ck_assert_msg(!leaked_session, "%s: *session not NULL after a failure", c->name);
    if (!check_message) return 1;
    ck_assert_msg(strstr(message, file), "%s: the message does not name '%s': %s", c->name, file, message);
    if (c->tensor)
        ck_assert_msg(strstr(message, c->tensor), "%s: the message does not name tensor '%s': %s", c->name,
                      c->tensor, message);
    if (c->also)
        ck_assert_msg(strstr(message, c->also), "%s: the message does not mention '%s': %s", c->name, c->also,
                      message);
    return 1;
}

START_TEST(test_damaged)
{
    run_case(&cases[_i], 1);
}
END_TEST

/* One frame through a session on `dir`; returns the action. */
static vh_action one_frame(int which, const char *dir)
{
    vh_session_params p;
    params_for(&p, which, dir);
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s: %s", dir, vh_last_error());
    uint8_t rgb[40 * 30 * 3];
    for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)(i * 37 + i / 90);
    vh_frame f;
    vh_frame_init(&f);
    f.rgb = rgb;
    f.width = 40;
    f.height = 30;
    f.instruction = "pick up the red block";
    ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_OK);
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, 60000), VH_OK);
    ck_assert_msg(a.status == VH_OK, "%s: %s", dir, vh_session_last_error(s));
    ck_assert_uint_eq(a.action_dim, 7);
    vh_session_destroy(s);
    return a;
}

/* The rewriting helper keeps a file valid when it changes nothing, so the cases above fail for
 * the damage, not for the rewrite: the copy gives exactly the original's action. */
START_TEST(test_identity_rewrite_loads)
{
    vh_action want_a = one_frame(A, model_src[A]), want_b = one_frame(B, model_src[B]);
    char *dir = fresh_copy(A);
    rewrite_safetensors(dir, SHARD1, NULL, NULL);
    rewrite_safetensors(dir, SHARD2, NULL, NULL);
    vh_action got = one_frame(A, dir);
    ck_assert_mem_eq(got.token_ids, want_a.token_ids, sizeof got.token_ids);
    vh_test_remove_tree(dir);
    free(dir);

    dir = fresh_copy(B);
    rewrite_safetensors(dir, SINGLE, NULL, NULL);
    got = one_frame(B, dir);
    ck_assert_mem_eq(got.token_ids, want_b.token_ids, sizeof got.token_ids);
    vh_test_remove_tree(dir);
    free(dir);
}
END_TEST

/* preprocessor_config.json is optional: without it the session takes config.json's image
 * settings and runs. */
START_TEST(test_preprocessor_absent_loads)
{
    char *dir = fresh_copy(A);
    remove_file(dir, "preprocessor_config.json");
    vh_action a = one_frame(A, dir);
    ck_assert_int_eq(a.status, VH_OK);
    vh_test_remove_tree(dir);
    free(dir);
}
END_TEST

/* Every damaged folder in one process (statuses checked; messages are test_damaged's business),
 * then the good models load and run. */
START_TEST(test_good_model_after_bad_ones)
{
    int ran = 0;
    for (int i = 0; i < N_CASES; i++) ran += run_case(&cases[i], 0);
    ck_assert_int_gt(ran, 0);
    vh_action a = one_frame(A, model_src[A]);
    vh_action b = one_frame(B, model_src[B]);
    ck_assert_int_eq(a.status, VH_OK);
    ck_assert_int_eq(b.status, VH_OK);
    /* and a trailing slash on the folder is fine */
    size_t n = strlen(model_src[A]) + 2;
    char *slash = malloc(n);
    snprintf(slash, n, "%s/", model_src[A]);
    vh_action c = one_frame(A, slash);
    ck_assert_mem_eq(c.token_ids, a.token_ids, sizeof a.token_ids);
    free(slash);
}
END_TEST

int main(void)
{
    model_src[A] = vh_test_source_path(MODEL_A_DIR);
    model_src[B] = vh_test_source_path(MODEL_B_DIR);
    Suite *suite = suite_create("bad_models");
    TCase *tc = tcase_create("damaged");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_damaged, 0, N_CASES);
    tcase_add_test(tc, test_identity_rewrite_loads);
    tcase_add_test(tc, test_preprocessor_absent_loads);
    tcase_add_test(tc, test_good_model_after_bad_ones);
    suite_add_tcase(suite, tc);
    int rc = vh_test_run_suite(suite);
    free(model_src[A]);
    free(model_src[B]);
    return rc;
}
