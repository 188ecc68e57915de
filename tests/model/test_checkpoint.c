/* Checkpoint folders: single file, sharded with an index, and every way a folder can be wrong.
 * Folders are built in temporary directories; shard contents are known F32 values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/checkpoint.h"
#include "test_support.h"

/* Write bytes to dir/name. */
static void write_file(const char *dir, const char *name, const void *bytes, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(bytes, 1, size, f), size);
    fclose(f);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    write_file(dir, name, text, strlen(text));
}

/* dir/name: a safetensors file of F32 scalars, one per name, tensor i holding value base + i. */
static void write_shard(const char *dir, const char *name, const char *const *tensors, size_t n,
                        float base)
{
    char header[4096];
    size_t used = (size_t)snprintf(header, sizeof header, "{");
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(header + used, sizeof header - used,
                                 "%s\"%s\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": "
                                 "[%zu, %zu]}", i ? ", " : "", tensors[i], 4 * i, 4 * i + 4);
    used += (size_t)snprintf(header + used, sizeof header - used, "}");
    while (used % 8) header[used++] = ' ';
    ck_assert_uint_lt(used, sizeof header);

    size_t size = 8 + used + 4 * n;
    uint8_t *image = malloc(size);
    for (int i = 0; i < 8; i++) image[i] = (uint8_t)((uint64_t)used >> (8 * i));
    memcpy(image + 8, header, used);
    for (size_t i = 0; i < n; i++) {
        float v = base + (float)i;
        memcpy(image + 8 + used + 4 * i, &v, 4);
    }
    write_file(dir, name, image, size);
    free(image);
}

static uint64_t file_size_of(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

/* Open dir expecting `status` with `needle` in the message. */
static void expect_open_error(const char *dir, vh_status status, const char *needle)
{
    vh_checkpoint *c = (vh_checkpoint *)1;
    vh_error err;
    vh_error_clear(&err);
    vh_status got = vh_checkpoint_open(dir, &c, &err);
    ck_assert_msg(got == status, "status %d, expected %d: %s", got, status, err.message);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err.message, needle), "'%s' not in message: %s", needle, err.message);
}

static float value_of(const vh_checkpoint *c, const char *name, const char **shard_path)
{
    vh_st_file *file = NULL;
    const vh_st_tensor *t = vh_checkpoint_find(c, name, &file);
    ck_assert_msg(t != NULL, "%s not found", name);
    ck_assert_ptr_nonnull(file);
    const void *data;
    vh_error err;
    ck_assert_int_eq(vh_st_data(file, t, &data, &err), VH_OK);
    if (shard_path) *shard_path = vh_st_path(file);
    return *(const float *)data;
}

static const char *const shard1_tensors[] = {"model.embed.weight", "model.layers.0.w"};
static const char *const shard2_tensors[] = {"model.layers.1.w", "lm_head.weight", "extra.unlisted"};

/* Two shards and an index listing all of their tensors but "extra.unlisted". */
static char *make_sharded_folder(void)
{
    char *dir = vh_test_make_temp_dir();
    write_shard(dir, "model-00001-of-00002.safetensors", shard1_tensors, 2, 10.0f);
    write_shard(dir, "model-00002-of-00002.safetensors", shard2_tensors, 3, 20.0f);
    write_text(dir, "model.safetensors.index.json",
               "{\"metadata\": {\"total_size\": 16},\n"
               " \"weight_map\": {\n"
               "  \"lm_head.weight\": \"model-00002-of-00002.safetensors\",\n"
               "  \"model.embed.weight\": \"model-00001-of-00002.safetensors\",\n"
               "  \"model.layers.0.w\": \"model-00001-of-00002.safetensors\",\n"
               "  \"model.layers.1.w\": \"model-00002-of-00002.safetensors\"}}\n");
    write_text(dir, "config.json", "{}");
    return dir;
}

static void remove_folder(char *dir)
{
    vh_test_remove_tree(dir);
    free(dir);
}

START_TEST(single_file)
{
    char *dir = vh_test_make_temp_dir();
    write_shard(dir, "model.safetensors", shard2_tensors, 3, 5.0f);
    write_shard(dir, "other.safetensors", shard1_tensors, 2, 0.0f); /* ignored */
    vh_checkpoint *c;
    vh_error err;
    ck_assert_msg(vh_checkpoint_open(dir, &c, &err) == VH_OK, "%s", err.message);
    ck_assert_str_eq(vh_checkpoint_dir(c), dir);
    ck_assert_uint_eq(vh_checkpoint_count(c), 3);
    ck_assert_uint_eq(vh_checkpoint_shard_count(c), 1);
    ck_assert_uint_eq(vh_checkpoint_mapped_bytes(c), file_size_of(dir, "model.safetensors"));
    ck_assert(value_of(c, "model.layers.1.w", NULL) == 5.0f);
    ck_assert(value_of(c, "lm_head.weight", NULL) == 6.0f);
    ck_assert(value_of(c, "extra.unlisted", NULL) == 7.0f);
    vh_st_file *file = (vh_st_file *)1;
    ck_assert_ptr_null(vh_checkpoint_find(c, "model.embed.weight", &file));
    ck_assert_ptr_null(file);
    /* Name order. */
    ck_assert_str_eq(vh_checkpoint_at(c, 0, NULL)->name, "extra.unlisted");
    ck_assert_str_eq(vh_checkpoint_at(c, 2, NULL)->name, "model.layers.1.w");
    ck_assert_ptr_null(vh_checkpoint_at(c, 3, NULL));
    vh_checkpoint_close(c);
    remove_folder(dir);
}
END_TEST

START_TEST(sharded_ok)
{
    char *dir = make_sharded_folder();
    vh_checkpoint *c;
    vh_error err;
    ck_assert_msg(vh_checkpoint_open(dir, &c, &err) == VH_OK, "%s", err.message);
    ck_assert_uint_eq(vh_checkpoint_shard_count(c), 2);
    ck_assert_uint_eq(vh_checkpoint_count(c), 5);
    ck_assert_uint_eq(vh_checkpoint_mapped_bytes(c),
                      file_size_of(dir, "model-00001-of-00002.safetensors") +
                      file_size_of(dir, "model-00002-of-00002.safetensors"));
    const char *shard;
    ck_assert(value_of(c, "model.embed.weight", &shard) == 10.0f);
    ck_assert_ptr_nonnull(strstr(shard, "model-00001-of-00002.safetensors"));
    ck_assert(value_of(c, "model.layers.0.w", NULL) == 11.0f);
    ck_assert(value_of(c, "model.layers.1.w", &shard) == 20.0f);
    ck_assert_ptr_nonnull(strstr(shard, "model-00002-of-00002.safetensors"));
    ck_assert(value_of(c, "lm_head.weight", NULL) == 21.0f);
    ck_assert(value_of(c, "extra.unlisted", NULL) == 22.0f); /* in a shard, not in the index */
    ck_assert_ptr_null(vh_checkpoint_find(c, "model.layers.2.w", NULL));
    ck_assert_ptr_null(vh_checkpoint_find(c, "", NULL));
    for (uint32_t i = 1; i < vh_checkpoint_count(c); i++)
        ck_assert_int_lt(strcmp(vh_checkpoint_at(c, i - 1, NULL)->name,
                                vh_checkpoint_at(c, i, NULL)->name), 0);
    vh_checkpoint_close(c);
    remove_folder(dir);
}
END_TEST

START_TEST(missing_shard)
{
    char *dir = make_sharded_folder();
    char path[4096];
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    ck_assert_int_eq(remove(path), 0);
    expect_open_error(dir, VH_ERR_BAD_MODEL,
                      "names shard 'model-00002-of-00002.safetensors', which is not in the folder");
    remove_folder(dir);
}
END_TEST

START_TEST(shard_name_escapes_folder)
{
    const char *bad[] = {"../model-00001-of-00002.safetensors", "/tmp/x.safetensors",
                         "sub/x.safetensors", "..", ".", "", "a\\\\b.safetensors"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *dir = make_sharded_folder();
        char index[1024];
        snprintf(index, sizeof index,
                 "{\"weight_map\": {\"model.embed.weight\": \"model-00001-of-00002.safetensors\","
                 " \"lm_head.weight\": \"%s\"}}", bad[i]);
        write_text(dir, "model.safetensors.index.json", index);
        expect_open_error(dir, VH_ERR_BAD_MODEL, "which is not a plain file name");
        remove_folder(dir);
    }
}
END_TEST

START_TEST(listed_tensor_missing_from_shard)
{
    char *dir = make_sharded_folder();
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\": {\"model.embed.weight\": \"model-00001-of-00002.safetensors\","
               " \"lm_head.weight\": \"model-00001-of-00002.safetensors\"}}");
    expect_open_error(dir, VH_ERR_BAD_MODEL,
                      "lists tensor 'lm_head.weight' in shard 'model-00001-of-00002.safetensors', "
                      "which does not hold it");
    remove_folder(dir);
}
END_TEST

START_TEST(tensor_in_two_shards)
{
    char *dir = make_sharded_folder();
    const char *with_duplicate[] = {"model.embed.weight", "model.layers.1.w"}; /* also in 2 */
    write_shard(dir, "model-00001-of-00002.safetensors", with_duplicate, 2, 0.0f);
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\": {\"model.embed.weight\": \"model-00001-of-00002.safetensors\","
               " \"model.layers.1.w\": \"model-00002-of-00002.safetensors\","
               " \"lm_head.weight\": \"model-00002-of-00002.safetensors\"}}");
    expect_open_error(dir, VH_ERR_BAD_MODEL, "tensor 'model.layers.1.w' is in two shards");
    remove_folder(dir);
}
END_TEST

START_TEST(index_malformed)
{
    static const struct { const char *text, *needle; } cases[] = {
        {"{\"weight_map\": {", "not valid JSON"},
        {"not json", "not valid JSON"},
        {"[]", "not a JSON object"},
        {"{\"metadata\": {}}", "\"weight_map\" is missing"},
        {"{\"weight_map\": []}", "\"weight_map\" is not an object"},
        {"{\"weight_map\": {}}", "lists no tensors"},
        {"{\"weight_map\": {\"a\": 1}}", "weight_map entry of tensor 'a' is not a file name"},
        {"{\"weight_map\": {\"a\": \"x\", \"a\": \"y\"}}", "duplicate object key"},
        {"{\"metadata\": {\"total_size\": \"16\"}, \"weight_map\": {\"a\": \"x\"}}",
         "total_size is not a non-negative number"},
        {"{\"metadata\": 3, \"weight_map\": {\"a\": \"x\"}}", "\"metadata\" is not an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *dir = make_sharded_folder();
        write_text(dir, "model.safetensors.index.json", cases[i].text);
        expect_open_error(dir, VH_ERR_BAD_MODEL, cases[i].needle);
        expect_open_error(dir, VH_ERR_BAD_MODEL, "model.safetensors.index.json");
        remove_folder(dir);
    }
}
END_TEST

START_TEST(bad_shard_contents)
{
    char *dir = make_sharded_folder();
    write_file(dir, "model-00002-of-00002.safetensors", "\x10\0\0\0\0\0\0\0{}", 10);
    expect_open_error(dir, VH_ERR_BAD_MODEL, "model-00002-of-00002.safetensors: header length 16");
    remove_folder(dir);
}
END_TEST

START_TEST(only_pytorch_bin)
{
    char *dir = vh_test_make_temp_dir();
    write_text(dir, "pytorch_model-00001-of-00002.bin", "PK");
    write_text(dir, "pytorch_model-00002-of-00002.bin", "PK");
    write_text(dir, "pytorch_model.bin.index.json", "{}");
    write_text(dir, "config.json", "{}");
    expect_open_error(dir, VH_ERR_UNSUPPORTED, "convert them to safetensors");
    expect_open_error(dir, VH_ERR_UNSUPPORTED, "pytorch_model-00001-of-00002.bin");
    remove_folder(dir);
}
END_TEST

START_TEST(no_checkpoint_files)
{
    char *dir = vh_test_make_temp_dir();
    write_text(dir, "config.json", "{}");
    write_shard(dir, "model-00001-of-00002.safetensors", shard1_tensors, 2, 0.0f);
    expect_open_error(dir, VH_ERR_BAD_MODEL,
                      "no model.safetensors or model.safetensors.index.json; the folder holds: "
                      "config.json, model-00001-of-00002.safetensors");
    for (int i = 0; i < 12; i++) {
        char name[32];
        snprintf(name, sizeof name, "file%02d.txt", i);
        write_text(dir, name, "x");
    }
    expect_open_error(dir, VH_ERR_BAD_MODEL, "and 6 more");
    remove_folder(dir);
}
END_TEST

START_TEST(empty_folder)
{
    char *dir = vh_test_make_temp_dir();
    expect_open_error(dir, VH_ERR_BAD_MODEL, "empty folder");
    remove_folder(dir);
}
END_TEST

START_TEST(not_a_folder)
{
    char *dir = vh_test_make_temp_dir();
    write_shard(dir, "model.safetensors", shard1_tensors, 2, 0.0f);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    expect_open_error(path, VH_ERR_IO, "not a folder");
    snprintf(path, sizeof path, "%s/missing", dir);
    expect_open_error(path, VH_ERR_IO, "No such file or directory");
    remove_folder(dir);
}
END_TEST

static Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("folders");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, single_file);
    tcase_add_test(tc, sharded_ok);
    tcase_add_test(tc, missing_shard);
    tcase_add_test(tc, shard_name_escapes_folder);
    tcase_add_test(tc, listed_tensor_missing_from_shard);
    tcase_add_test(tc, tensor_in_two_shards);
    tcase_add_test(tc, index_malformed);
    tcase_add_test(tc, bad_shard_contents);
    tcase_add_test(tc, only_pytorch_bin);
    tcase_add_test(tc, no_checkpoint_files);
    tcase_add_test(tc, empty_folder);
    tcase_add_test(tc, not_a_folder);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return vh_test_run_suite(checkpoint_suite());
}
