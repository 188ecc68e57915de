/* config.json as openvla/openvla-7b ships it: transformers' LlamaConfig defaults for what
 * text_config leaves out, timm's architecture for each tower id, and a clear status for every
 * defect. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "family/openvla/openvla_config.h"
#include "test_support.h"

static char *config_text(size_t *len)
{
    char *path = vh_test_fixture_path("config/openvla-7b-config.json");
    char *text = (char *)vh_test_read_file(path, len);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    free(path);
    return text;
}

START_TEST(test_openvla_7b_defaults)
{
    size_t len;
    char *text = config_text(&len);
    vh_openvla_config c;
    vh_error err;
    ck_assert_int_eq(vh_openvla_config_parse(text, len, "config.json", &c, &err), VH_OK);
    /* timm vit_large_patch14_reg4_dinov2 and vit_so400m_patch14_siglip_224 */
    ck_assert_uint_eq(c.n_towers, 2);
    const vh_vision_tower_config *d = &c.towers[0], *s = &c.towers[1];
    ck_assert_uint_eq(d->embed_dim, 1024); ck_assert_uint_eq(d->depth, 24); ck_assert_uint_eq(d->n_heads, 16);
    ck_assert_uint_eq(d->mlp_hidden, 4096); ck_assert_uint_eq(d->n_registers, 4); ck_assert_uint_eq(d->class_token, 1);
    ck_assert_uint_eq(d->layer_scale, 1); ck_assert_uint_eq(d->patch_size, 14); ck_assert_uint_eq(d->image_size, 224);
    ck_assert(d->mean[0] == 0.484375f && d->mean[1] == 0.455078125f && d->mean[2] == 0.40625f);
    ck_assert(d->std[0] == 0.228515625f && d->std[1] == 0.2236328125f && d->std[2] == 0.224609375f);
    ck_assert_uint_eq(s->embed_dim, 1152); ck_assert_uint_eq(s->depth, 27); ck_assert_uint_eq(s->n_heads, 16);
    ck_assert_uint_eq(s->mlp_hidden, 4304); /* int(1152 * 3.7362) */
    ck_assert_uint_eq(s->n_registers, 0); ck_assert_uint_eq(s->class_token, 0); ck_assert_uint_eq(s->layer_scale, 0);
    ck_assert(s->mean[0] == 0.5f && s->std[2] == 0.5f);
    ck_assert_uint_eq(c.projector_layers, 3);
    /* LlamaConfig() defaults, vocab_size from text_config */
    ck_assert_uint_eq(c.hidden, 4096); ck_assert_uint_eq(c.intermediate, 11008); ck_assert_uint_eq(c.n_layers, 32);
    ck_assert_uint_eq(c.n_heads, 32); ck_assert_uint_eq(c.n_kv_heads, 32); ck_assert_uint_eq(c.head_dim, 128);
    ck_assert_uint_eq(c.vocab, 32064); ck_assert_uint_eq(c.max_positions, 2048);
    ck_assert(c.rms_eps == 1e-6f && c.rope_theta == 10000.0f);
    ck_assert_int_eq(c.bos_id, 1); ck_assert_int_eq(c.eos_id, 2);
    ck_assert_uint_eq(c.vocab_unpadded, 32000); ck_assert_uint_eq(c.n_action_bins, 256);
    ck_assert_uint_eq(c.n_datasets, 2);
    vh_openvla_config_free(&c);
    free(text);
}
END_TEST

START_TEST(test_unnorm_key)
{
    size_t len;
    char *text = config_text(&len);
    vh_openvla_config c;
    vh_error err;
    ck_assert_int_eq(vh_openvla_config_parse(text, len, "config.json", &c, &err), VH_OK);
    const vh_action_stats *st = NULL;
    /* two datasets: the key is required, and the message names the choices */
    ck_assert_int_eq(vh_openvla_config_dataset(&c, NULL, &st, &err), VH_ERR_UNNORM_KEY);
    ck_assert_ptr_nonnull(strstr(err.message, "bridge_orig"));
    ck_assert_ptr_nonnull(strstr(err.message, "fractal20220817_data"));
    ck_assert_int_eq(vh_openvla_config_dataset(&c, "", &st, &err), VH_ERR_UNNORM_KEY);
    ck_assert_int_eq(vh_openvla_config_dataset(&c, "bridge", &st, &err), VH_ERR_UNNORM_KEY);
    ck_assert_ptr_nonnull(strstr(err.message, "'bridge' is not in norm_stats"));
    ck_assert_int_eq(vh_openvla_config_dataset(&c, "fractal20220817_data", &st, &err), VH_OK);
    ck_assert_uint_eq(st->dim, 7);
    ck_assert(st->q01[0] == -0.22453527510166169 && st->q99[5] == 0.44796681255102094);
    ck_assert_uint_eq(st->mask[5], 1);
    ck_assert_uint_eq(st->mask[6], 0);
    vh_openvla_config_free(&c);
    free(text);
}
END_TEST

/* Parse the fixture after `edit` changed it; return the status and keep the message. */
typedef void (*edit_fn)(json_t *root);

static vh_status parse_edited(edit_fn edit, vh_error *err)
{
    size_t len;
    char *text = config_text(&len);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    ck_assert_ptr_nonnull(root);
    edit(root);
    char *edited = json_dumps(root, 0);
    vh_openvla_config c;
    vh_status st = vh_openvla_config_parse(edited, strlen(edited), "config.json", &c, err);
    /* norm_stats may come from dataset_statistics.json instead: checked once both are read */
    if (st == VH_OK) {
        st = vh_openvla_config_check_datasets(&c, "config.json", err);
        vh_openvla_config_free(&c);
    }
    free(edited);
    json_decref(root);
    free(text);
    return st;
}

static json_t *text_config(json_t *root) { return json_object_get(root, "text_config"); }
static json_t *dino_override(json_t *root)
{
    json_t *list = json_array(), *o = json_object();
    json_array_append_new(list, o);
    json_array_append_new(list, json_object());
    json_object_set_new(root, "vision_backbone_overrides", list);
    return o;
}
static json_t *bridge_action(json_t *root)
{
    return json_object_get(json_object_get(json_object_get(root, "norm_stats"), "bridge_orig"), "action");
}

static void edit_model_type(json_t *r) { json_object_set_new(r, "model_type", json_string("llava")); }
static void edit_no_norm_stats(json_t *r) { json_object_del(r, "norm_stats"); }
static void edit_unknown_tower(json_t *r) { json_array_set_new(json_object_get(r, "timm_model_ids"), 1, json_string("vit_huge_patch14_clip_224")); }
static void edit_three_towers(json_t *r) { json_array_append_new(json_object_get(r, "timm_model_ids"), json_string("vit_so400m_patch14_siglip_224")); }
static void edit_override_type(json_t *r) { json_object_set_new(dino_override(r), "embed_dim", json_string("48")); }
static void edit_override_heads(json_t *r) { json_object_set_new(dino_override(r), "embed_dim", json_integer(50)); }
static void edit_override_depth(json_t *r) { json_object_set_new(dino_override(r), "depth", json_integer(1)); }
static void edit_override_patch(json_t *r) { json_object_set_new(dino_override(r), "patch_size", json_integer(15)); }
static void edit_override_grid(json_t *r) { json_object_set_new(dino_override(r), "patch_size", json_integer(16)); }
static void edit_override_list(json_t *r) { json_object_set_new(r, "vision_backbone_overrides", json_array()); }
static void edit_rope_scaling(json_t *r) { json_object_set_new(text_config(r), "rope_scaling", json_pack("{s:s,s:f}", "type", "linear", "factor", 2.0)); }
static void edit_zero_layers(json_t *r) { json_object_set_new(text_config(r), "num_hidden_layers", json_integer(0)); }
static void edit_kv_heads(json_t *r) { json_object_set_new(text_config(r), "num_key_value_heads", json_integer(5)); }
static void edit_text_model_type(json_t *r) { json_object_set_new(text_config(r), "model_type", json_string("mistral")); }
static void edit_act(json_t *r) { json_object_set_new(text_config(r), "hidden_act", json_string("gelu")); }
static void edit_huge_vocab(json_t *r) { json_object_set_new(text_config(r), "vocab_size", json_integer(1ll << 40)); }
static void edit_pad_multiple(json_t *r) { json_object_set_new(r, "pad_to_multiple_of", json_integer(32064)); }
static void edit_q99_length(json_t *r) { json_array_remove(json_object_get(bridge_action(r), "q99"), 0); }
static void edit_q01_value(json_t *r) { json_array_set_new(json_object_get(bridge_action(r), "q01"), 2, json_string("x")); }
static void edit_mask_value(json_t *r) { json_array_set_new(json_object_get(bridge_action(r), "mask"), 0, json_integer(1)); }
static void edit_no_action(json_t *r) { json_object_del(json_object_get(json_object_get(r, "norm_stats"), "bridge_orig"), "action"); }
static void edit_letterbox(json_t *r) { json_object_set_new(r, "image_resize_strategy", json_string("letterbox")); }
static void edit_act_override(json_t *r) { json_array_set_new(json_object_get(r, "timm_override_act_layers"), 1, json_string("gelu_tanh")); }
static void edit_fused_flag(json_t *r) { json_object_set_new(r, "use_fused_vision_backbone", json_false()); }
static void edit_arch(json_t *r) { json_object_set_new(r, "arch_specifier", json_string("no-align+linear")); }
static void edit_image_size(json_t *r) { json_array_set_new(json_object_get(r, "image_sizes"), 0, json_integer(225)); }

static const struct defect {
    const char *what;
    edit_fn edit;
    vh_status want;
    const char *in_message;
} defects[] = {
    {"model_type", edit_model_type, VH_ERR_UNSUPPORTED, "only 'openvla'"},
    {"no norm_stats", edit_no_norm_stats, VH_ERR_BAD_MODEL, "norm_stats"},
    {"unknown tower", edit_unknown_tower, VH_ERR_UNSUPPORTED, "vit_huge_patch14_clip_224"},
    {"three towers", edit_three_towers, VH_ERR_BAD_MODEL, "timm_model_ids"},
    {"override type", edit_override_type, VH_ERR_BAD_MODEL, "embed_dim"},
    {"override heads", edit_override_heads, VH_ERR_BAD_MODEL, "not a multiple of num_heads"},
    {"override depth", edit_override_depth, VH_ERR_BAD_MODEL, "depth"},
    {"override patch", edit_override_patch, VH_ERR_UNSUPPORTED, "patch_size"},
    {"override grid", edit_override_grid, VH_ERR_BAD_MODEL, "patches per side"},
    {"override list", edit_override_list, VH_ERR_BAD_MODEL, "vision_backbone_overrides"},
    {"rope_scaling", edit_rope_scaling, VH_ERR_UNSUPPORTED, "rope_scaling"},
    {"zero layers", edit_zero_layers, VH_ERR_BAD_MODEL, "num_hidden_layers"},
    {"kv heads", edit_kv_heads, VH_ERR_BAD_MODEL, "num_key_value_heads"},
    {"text model_type", edit_text_model_type, VH_ERR_UNSUPPORTED, "mistral"},
    {"hidden_act", edit_act, VH_ERR_UNSUPPORTED, "hidden_act"},
    {"huge vocab", edit_huge_vocab, VH_ERR_BAD_MODEL, "vocab_size"},
    {"pad_to_multiple_of", edit_pad_multiple, VH_ERR_BAD_MODEL, "pad_to_multiple_of"},
    {"q99 length", edit_q99_length, VH_ERR_BAD_MODEL, "q99"},
    {"q01 value", edit_q01_value, VH_ERR_BAD_MODEL, "q01[2]"},
    {"mask value", edit_mask_value, VH_ERR_BAD_MODEL, "mask[0]"},
    {"no action stats", edit_no_action, VH_ERR_BAD_MODEL, "'action'"},
    {"letterbox", edit_letterbox, VH_ERR_UNSUPPORTED, "letterbox"},
    {"activation override", edit_act_override, VH_ERR_UNSUPPORTED, "timm_override_act_layers"},
    {"fused flag", edit_fused_flag, VH_ERR_BAD_MODEL, "use_fused_vision_backbone"},
    {"arch_specifier", edit_arch, VH_ERR_UNSUPPORTED, "arch_specifier"},
    {"image size", edit_image_size, VH_ERR_UNSUPPORTED, "image_size"},
};

START_TEST(test_defect)
{
    const struct defect *d = &defects[_i];
    vh_error err;
    vh_error_clear(&err);
    vh_status st = parse_edited(d->edit, &err);
    ck_assert_msg(st == d->want, "%s: status %d (%s), want %d", d->what, st, err.message, d->want);
    ck_assert_msg(strstr(err.message, d->in_message) != NULL, "%s: message '%s' lacks '%s'", d->what, err.message,
                  d->in_message);
    ck_assert_msg(strstr(err.message, "config.json") != NULL, "%s: message '%s' does not name the file", d->what,
                  err.message);
}
END_TEST

START_TEST(test_not_json_and_duplicates)
{
    vh_openvla_config c;
    vh_error err;
    ck_assert_int_eq(vh_openvla_config_parse("{", 1, "config.json", &c, &err), VH_ERR_BAD_MODEL);
    ck_assert_int_eq(vh_openvla_config_parse("[]", 2, "config.json", &c, &err), VH_ERR_BAD_MODEL);
    const char *dup = "{\"model_type\": \"openvla\", \"model_type\": \"openvla\"}";
    ck_assert_int_eq(vh_openvla_config_parse(dup, strlen(dup), "config.json", &c, &err), VH_ERR_BAD_MODEL);
    ck_assert_ptr_nonnull(strstr(err.message, "duplicate"));
}
END_TEST

START_TEST(test_preprocessor)
{
    size_t len;
    char *text = config_text(&len);
    vh_openvla_config c;
    vh_error err;
    ck_assert_int_eq(vh_openvla_config_parse(text, len, "config.json", &c, &err), VH_OK);
    const char *pp = "{\"image_resize_strategy\": \"resize-naive\", \"input_sizes\": [[3, 224, 224], [3, 224, 224]],"
                     " \"interpolations\": [\"bicubic\", \"bicubic\"], \"means\": [[0.485, 0.456, 0.406], [0.5, 0.5, 0.5]],"
                     " \"stds\": [[0.229, 0.224, 0.225], [0.25, 0.5, 0.5]]}";
    ck_assert_int_eq(vh_openvla_config_apply_preprocessor(&c, pp, strlen(pp), "pp.json", &err), VH_OK);
    ck_assert(c.towers[0].mean[0] == 0.485f && c.towers[0].std[2] == 0.225f && c.towers[1].std[0] == 0.25f);
    const char *bad_size = "{\"input_sizes\": [[3, 384, 384], [3, 224, 224]]}";
    ck_assert_int_eq(vh_openvla_config_apply_preprocessor(&c, bad_size, strlen(bad_size), "pp.json", &err), VH_ERR_BAD_MODEL);
    const char *bilinear = "{\"interpolations\": [\"bilinear\", \"bicubic\"]}";
    ck_assert_int_eq(vh_openvla_config_apply_preprocessor(&c, bilinear, strlen(bilinear), "pp.json", &err), VH_ERR_UNSUPPORTED);
    const char *strategy = "{\"image_resize_strategy\": \"letterbox\"}";
    ck_assert_int_eq(vh_openvla_config_apply_preprocessor(&c, strategy, strlen(strategy), "pp.json", &err), VH_ERR_BAD_MODEL);
    const char *zero_std = "{\"stds\": [[0.229, 0.0, 0.225], [0.5, 0.5, 0.5]]}";
    ck_assert_int_eq(vh_openvla_config_apply_preprocessor(&c, zero_std, strlen(zero_std), "pp.json", &err), VH_ERR_BAD_MODEL);
    vh_openvla_config_free(&c);
    free(text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("openvla_config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, test_openvla_7b_defaults);
    tcase_add_test(tc, test_unnorm_key);
    tcase_add_loop_test(tc, test_defect, 0, (int)(sizeof defects / sizeof defects[0]));
    tcase_add_test(tc, test_not_json_and_duplicates);
    tcase_add_test(tc, test_preprocessor);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
