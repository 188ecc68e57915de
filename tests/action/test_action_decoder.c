/* OpenVLA's action de-tokenisation against numpy's (tests/action/make_action_reference.py):
 * the same float64 operations in the same order, so the results must be bit-identical. */
#include <jansson.h>
#include <string.h>

#include "family/openvla/openvla_action_decoder.h"
#include "test_support.h"

static json_t *load_reference(void)
{
    char *path = vh_test_fixture_path("action/reference.json");
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    ck_assert_msg(root != NULL, "%s: %s", path, jerr.text);
    free(path);
    return root;
}

START_TEST(test_matches_numpy_bit_for_bit)
{
    json_t *root = load_reference();
    json_t *cases = json_object_get(root, "cases");
    ck_assert_int_gt(json_array_size(cases), 0);
    size_t i, checked = 0;
    json_t *c;
    json_array_foreach(cases, i, c) {
        vh_action_stats stats = {0};
        json_t *q01 = json_object_get(c, "q01"), *q99 = json_object_get(c, "q99"), *mask = json_object_get(c, "mask");
        stats.dim = (uint32_t)json_array_size(q01);
        for (uint32_t k = 0; k < stats.dim; k++) {
            stats.q01[k] = json_real_value(json_array_get(q01, k));
            stats.q99[k] = json_real_value(json_array_get(q99, k));
            stats.mask[k] = json_is_true(json_array_get(mask, k));
        }
        vh_action_decoder d;
        vh_error err;
        ck_assert_int_eq(vh_action_decoder_init(&d, (uint32_t)json_integer_value(json_object_get(c, "vocab_unpadded")),
                                                (uint32_t)json_integer_value(json_object_get(c, "n_action_bins")),
                                                &stats, &err), VH_OK);
        json_t *centres = json_object_get(c, "bin_centers");
        ck_assert_uint_eq(d.n_centres, json_array_size(centres));
        for (uint32_t k = 0; k < d.n_centres; k++)
            ck_assert_msg(d.centres[k] == json_real_value(json_array_get(centres, k)), "bin centre %u: %.17g vs %.17g",
                          k, d.centres[k], json_real_value(json_array_get(centres, k)));
        size_t r;
        json_t *row;
        json_array_foreach(json_object_get(c, "rows"), r, row) {
            int32_t tokens[VH_MAX_ACTION_DIM];
            double values[VH_MAX_ACTION_DIM];
            for (uint32_t k = 0; k < stats.dim; k++)
                tokens[k] = (int32_t)json_integer_value(json_array_get(json_object_get(row, "token_ids"), k));
            vh_action_decode(&d, tokens, values);
            for (uint32_t k = 0; k < stats.dim; k++) {
                double want = json_real_value(json_array_get(json_object_get(row, "action"), k));
                ck_assert_msg(values[k] == want, "case %zu row %zu value %u (token %d): %.17g, numpy %.17g", i, r, k,
                              tokens[k], values[k], want);
                checked++;
            }
        }
        vh_action_decoder_free(&d);
    }
    ck_assert_uint_gt(checked, 100);
    json_decref(root);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("action_decoder");
    TCase *tc = tcase_create("numpy");
    tcase_add_test(tc, test_matches_numpy_bit_for_bit);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
