/* lib/family/driving/petr_memory.c against the released heads (make_head_fixtures.py ran OrionHead and
 * OrionHeadM for six frames of one stream: first frame, ageing and truncation, a reset after a 2.5 s
 * gap, one more). Each frame: the pre-update here must give the memory the released decoders saw
 * (entries, points, ages, poses; the can-bus history, the scene FIFO, the can-bus token's input, the
 * encodings of a few entries), then the post-update, fed the rows the released post-update gathered
 * from, must pick the same top-k. Then bad arguments. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family/driving/petr_memory.h"
#include "model/safetensors.h"
#include "test_support.h"

typedef struct reference {
    vh_st_file *st;
    json_t *cases;
} reference;

static const void *tensor(reference *r, const char *name, vh_st_dtype dtype, uint64_t n)
{
    const vh_st_tensor *t = vh_st_find(r->st, name);
    ck_assert_msg(t, "fixture lacks %s", name);
    ck_assert_msg(t->dtype == dtype && t->nelements == n, "%s: %s of %llu, expected %llu", name,
                  vh_st_dtype_name(t->dtype), (unsigned long long)t->nelements, (unsigned long long)n);
    const void *data = NULL;
    vh_error err;
    ck_assert_msg(vh_st_data(r->st, t, &data, &err) == VH_OK, "%s", err.message);
    return data;
}

static const float *f32(reference *r, const char *frame, const char *name, uint64_t n)
{
    char full[128];
    snprintf(full, sizeof full, "%s%s", frame, name);
    return tensor(r, full, VH_ST_F32, n);
}

/* Largest |got - want| relative to the largest |want| (test_support's measure, the fixture's floats
 * widened) */
static void check_close(const char *what, int t, const float *got, const float *want, size_t n, double bound)
{
    const double e = vh_test_rel_error_of_largest_f32(got, want, n);
    ck_assert_msg(e <= bound, "frame %d %s: error %.3g of the largest (bound %.1g)", t, what, e, bound);
}

static void check_ages(const char *what, int t, const double *got, const double *want, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 1e-12, "frame %d %s %u: %.17g, released %.17g", t, what, i, got[i],
                      want[i]);
}

static void load_frame(json_t *f, double *ts, float *pose, float *inv, float *can, float *command)
{
    *ts = json_real_value(json_object_get(f, "timestamp"));
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
            pose[r * 4 + c] = (float)json_number_value(json_array_get(json_array_get(json_object_get(f, "ego_pose"), r), c));
            inv[r * 4 + c] =
                (float)json_number_value(json_array_get(json_array_get(json_object_get(f, "ego_pose_inv"), r), c));
        }
    for (int k = 0; k < 18; k++) can[k] = (float)json_number_value(json_array_get(json_object_get(f, "can_bus"), k));
    *command = (float)json_integer_value(json_object_get(f, "command"));
}

static uint32_t cfg(json_t *c, const char *key) { return (uint32_t)json_integer_value(json_object_get(c, key)); }

/* The bank at use time against the memory the released decoder saw */
static void check_bank(reference *r, const char *p, const char *tag, int t, const vh_petr_bank *b, uint32_t cols,
                       const float pc_range[6])
{
    char name[128];
    const uint32_t L = b->c.memory_len, P = b->c.n_points * 3;
    ck_assert_uint_eq(b->n, L);
    snprintf(name, sizeof name, "%s.memory.embedding", tag);
    const float *emb = f32(r, p, name, (uint64_t)L * cols);
    for (uint32_t i = 0; i < L * cols; i++)
        ck_assert_msg(b->embedding[i] == emb[i], "frame %d %s entry %u: %g, released %g", t, tag, i / cols,
                      b->embedding[i], emb[i]);
    snprintf(name, sizeof name, "%s.memory.points", tag);
    check_close(name, t, b->points, f32(r, p, name, (uint64_t)L * P), (size_t)L * P, 1e-5);
    snprintf(name, sizeof name, "%s.memory.egopose", tag);
    check_close(name, t, b->egopose, f32(r, p, name, (uint64_t)L * 16), (size_t)L * 16, 1e-5);
    char full[160];
    snprintf(full, sizeof full, "%s%s.memory.age", p, tag);
    check_ages(full, t, b->age, tensor(r, full, VH_ST_F64, L), L);
    /* the MLP inputs of a few entries */
    json_t *rows = json_object_get(r->cases, "enc_rows");
    const size_t nr = json_array_size(rows);
    float *pe = malloc(sizeof(float) * nr * 396), *me = malloc(sizeof(float) * nr * 156),
          *ae = malloc(sizeof(float) * nr * 256);
    for (size_t k = 0; k < nr; k++)
        vh_petr_bank_encode_row(b, (uint32_t)json_integer_value(json_array_get(rows, k)), pc_range, pe + k * 396,
                                me + k * 156, ae + k * 256);
    snprintf(name, sizeof name, "%s.enc.points", tag);
    check_close(name, t, pe, f32(r, p, name, nr * 396), nr * 396, 1e-5);
    snprintf(name, sizeof name, "%s.enc.motion", tag);
    check_close(name, t, me, f32(r, p, name, nr * 156), nr * 156, 1e-5);
    snprintf(name, sizeof name, "%s.enc.age", tag);
    check_close(name, t, ae, f32(r, p, name, nr * 256), nr * 256, 1e-6);
    free(pe);
    free(me);
    free(ae);
}

/* The post-update from the rows the released one gathered from; the same top-k */
static void post_update(reference *r, const char *p, const char *tag, int t, vh_petr_bank *b, uint32_t n_rows,
                        uint32_t classes, uint32_t cols, double ts, const float *pose)
{
    char name[128];
    snprintf(name, sizeof name, "%s.rows.embedding", tag);
    const float *rows = f32(r, p, name, (uint64_t)n_rows * cols);
    snprintf(name, sizeof name, "%s.rows.logits", tag);
    const float *logits = f32(r, p, name, (uint64_t)n_rows * classes);
    snprintf(name, sizeof name, "%s.rows.points", tag);
    const float *points = f32(r, p, name, (uint64_t)n_rows * b->c.n_points * 3);
    float *scores = malloc(sizeof(float) * n_rows);
    uint32_t *topk = malloc(sizeof(uint32_t) * b->c.topk);
    vh_petr_max_sigmoid(logits, n_rows, classes, scores);
    vh_error err;
    ck_assert_msg(vh_petr_bank_post_update(b, n_rows, rows, scores, points, ts, pose, topk, &err) == VH_OK, "%s",
                  err.message);
    char full[160];
    snprintf(full, sizeof full, "%s%s.topk", p, tag);
    const int64_t *want = tensor(r, full, VH_ST_I64, b->c.topk);
    for (uint32_t k = 0; k < b->c.topk; k++)
        ck_assert_msg(topk[k] == (uint32_t)want[k], "frame %d %s top-k %u: row %u, released %lld", t, tag, k, topk[k],
                      (long long)want[k]);
    free(scores);
    free(topk);
}

START_TEST(test_against_released_heads)
{
    reference r;
    char *path = vh_test_fixture_path("driving/heads_cases.json");
    json_error_t jerr;
    r.cases = json_load_file(path, 0, &jerr);
    ck_assert_msg(r.cases, "%s: %s", path, jerr.text);
    free(path);
    path = vh_test_fixture_path("driving/heads_reference.safetensors");
    vh_error err;
    ck_assert_msg(vh_st_open(path, &r.st, &err) == VH_OK, "%s", err.message);
    free(path);
    json_t *c = json_object_get(r.cases, "config");
    const uint32_t cols = (uint32_t)json_integer_value(json_object_get(r.cases, "embed_cols"));
    const uint32_t L = cfg(c, "memory_len"), K = cfg(c, "topk"), M = cfg(c, "num_memory");
    float pc_range[6];
    for (int k = 0; k < 6; k++) pc_range[k] = (float)json_real_value(json_array_get(json_object_get(c, "pc_range"), k));
    /* the pseudo points: what the released pre-update added to the first frame's empty memory */
    const float *pseudo = f32(&r, "t0.", "det.memory.points", (uint64_t)L * 3);
    vh_petr_bank det, map;
    vh_petr_scene_memory scene;
    const vh_petr_bank_config dc = {cols, L, K, 1, K, pseudo}, mc = {cols, L, cfg(c, "lanes"), 11, 0, NULL};
    ck_assert(vh_petr_bank_init(&det, &dc, &err) == VH_OK);
    ck_assert(vh_petr_bank_init(&map, &mc, &err) == VH_OK);
    ck_assert(vh_petr_scene_init(&scene, cols, M, cfg(c, "scene_len"), 2, &err) == VH_OK);
    json_t *frames = json_object_get(r.cases, "frames");
    ck_assert_uint_eq(json_array_size(frames), 6);
    int resets = 0;
    for (int t = 0; t < (int)json_array_size(frames); t++) {
        double ts;
        float pose[16], inv[16], can[18], command;
        load_frame(json_array_get(frames, (size_t)t), &ts, pose, inv, can, &command);
        char p[16];
        snprintf(p, sizeof p, "t%d.", t);
        const float x = vh_petr_bank_pre_update(&det, ts, inv, true);
        ck_assert_float_eq(vh_petr_bank_pre_update(&map, ts, inv, true), x);
        vh_petr_scene_pre_update(&scene, ts, can, x);
        resets += x == 0.0f;
        check_bank(&r, p, "det", t, &det, cols, pc_range);
        check_bank(&r, p, "map", t, &map, cols, pc_range);
        /* the scene memory and the can-bus token's input */
        ck_assert_uint_eq(scene.n_canbus, 2);
        check_close("can-bus history", t, scene.canbus, f32(&r, p, "det.memory.canbus", 2 * VH_PETR_CANBUS),
                    2 * VH_PETR_CANBUS, 1e-6);
        char full[64];
        snprintf(full, sizeof full, "%sdet.memory.canbus_len", p);
        const vh_st_tensor *hl = vh_st_find(r.st, full);
        ck_assert(hl);
        const void *hv = NULL;
        ck_assert(vh_st_data(r.st, hl, &hv, &err) == VH_OK);
        const double want_len = hl->dtype == VH_ST_I64 ? (double)*(const int64_t *)hv : (double)*(const float *)hv;
        ck_assert_msg((double)scene.his_len == want_len, "frame %d can-bus length %lld, released %g", t,
                      (long long)scene.his_len, want_len);
        snprintf(full, sizeof full, "%sdet.memory.scene_age", p);
        check_ages("scene ages", t, scene.age, tensor(&r, full, VH_ST_F64, scene.scene_len), scene.scene_len);
        const float *sq = f32(&r, p, "det.memory.scene_query", (uint64_t)scene.scene_len * cols);
        ck_assert_int_eq(memcmp(scene.query, sq, sizeof(float) * scene.scene_len * cols), 0);
        float in[128];
        const uint32_t n_in = vh_petr_canbus_input(&scene, &det, can, command, in);
        ck_assert_uint_eq(n_in, 89);
        check_close("can-bus input", t, in, f32(&r, p, "det.canbus_input", 89), 89, 1e-6);
        /* the post-updates */
        post_update(&r, p, "det", t, &det, cfg(c, "det_queries") + K, cfg(c, "det_classes"), cols, ts, pose);
        post_update(&r, p, "map", t, &map, cfg(c, "lanes"), cfg(c, "map_classes"), cols, ts, pose);
        vh_petr_scene_post_update(&scene, ts, can, command, f32(&r, p, "det.history", (uint64_t)M * cols));
    }
    ck_assert_int_eq(resets, 2); /* the first frame and the one after the gap */
    printf("head memory: six frames of the released heads' banks, two resets, every top-k the same\n");
    vh_petr_bank_free(&det);
    vh_petr_bank_free(&map);
    vh_petr_scene_free(&scene);
    vh_st_close(r.st);
    json_decref(r.cases);
}
END_TEST

START_TEST(test_bad_arguments)
{
    vh_petr_bank b;
    vh_error err;
    const vh_petr_bank_config none = {0, 4, 2, 1, 0, NULL}, many = {4, 4, 2, 12, 0, NULL},
                              pseudo = {4, 4, 2, 1, 2, NULL}, ok = {4, 4, 2, 1, 0, NULL};
    ck_assert_int_eq(vh_petr_bank_init(&b, NULL, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_petr_bank_init(&b, &none, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_petr_bank_init(&b, &many, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_petr_bank_init(&b, &pseudo, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_petr_bank_init(&b, &ok, &err), VH_OK);
    float rows[4 * 4] = {0}, scores[4] = {0.1f, NAN, 0.3f, 0.3f}, points[4 * 3] = {0}, eye[16] = {0};
    eye[0] = eye[5] = eye[10] = eye[15] = 1;
    uint32_t topk[2];
    /* before its pre-update, and with fewer rows than the top-k */
    ck_assert_int_eq(vh_petr_bank_post_update(&b, 4, rows, scores, points, 0, eye, topk, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert(strstr(err.message, "pre-update"));
    vh_petr_bank_pre_update(&b, 0, eye, true);
    ck_assert_int_eq(vh_petr_bank_post_update(&b, 1, rows, scores, points, 0, eye, topk, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_petr_bank_post_update(&b, 4, NULL, scores, points, 0, eye, topk, &err), VH_ERR_INVALID_ARGUMENT);
    /* equal scores by index, a NaN last */
    ck_assert_int_eq(vh_petr_bank_post_update(&b, 4, rows, scores, points, 0, eye, topk, &err), VH_OK);
    ck_assert_uint_eq(topk[0], 2);
    ck_assert_uint_eq(topk[1], 3);
    /* a second post-update without a pre-update */
    ck_assert_int_eq(vh_petr_bank_post_update(&b, 4, rows, scores, points, 0, eye, topk, &err), VH_ERR_INVALID_ARGUMENT);
    vh_petr_bank_free(&b);
    vh_petr_scene_memory s;
    ck_assert_int_eq(vh_petr_scene_init(&s, 0, 1, 1, 1, &err), VH_ERR_INVALID_ARGUMENT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("petr_memory");
    TCase *tc = tcase_create("petr_memory");
    tcase_add_test(tc, test_against_released_heads);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
