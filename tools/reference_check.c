#include "reference_check.h"

#include "json_line.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char *dup_string(const json_t *v)
{
    const char *s = json_string_value(v);
    return s ? strdup(s) : NULL;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* An array of at most `max` integers (int32) or numbers into out; the count, or -1. */
static long int_array(const json_t *arr, int32_t *out, size_t max)
{
    if (!json_is_array(arr) || json_array_size(arr) > max) return -1;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN || json_integer_value(v) > INT32_MAX) return -1;
        out[i] = (int32_t)json_integer_value(v);
    }
    return (long)json_array_size(arr);
}

static long real_array(const json_t *arr, double *out, size_t max)
{
    if (!json_is_array(arr) || json_array_size(arr) > max) return -1;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *v = json_array_get(arr, i);
        if (!json_is_number(v)) return -1;
        out[i] = json_number_value(v);
    }
    return (long)json_array_size(arr);
}

/* The fixtures' "steps": each decode step's best tokens and logits (optional). */
static int read_steps(const json_t *steps, vh_reference_case *c, char *why, size_t why_size)
{
    if (!steps) return 0;
    if (!json_is_array(steps) || json_array_size(steps) < c->action_dim)
        return snprintf(why, why_size, "\"steps\" must be an array of at least %u steps", c->action_dim), -1;
    for (uint32_t k = 0; k < c->action_dim; k++) {
        const json_t *step = json_array_get(steps, k);
        vh_reference_step *st = &c->steps[k];
        const json_t *margin = json_object_get(step, "margin");
        const long n_ids = int_array(json_object_get(step, "top5_ids"), st->top_ids, VH_CHECK_TOP);
        const long n_logits = real_array(json_object_get(step, "top5_logits"), st->top_logits, VH_CHECK_TOP);
        if (!json_is_number(margin) || n_ids < 2 || n_logits != n_ids)
            return snprintf(why, why_size, "steps[%u] must have a number \"margin\" and \"top5_ids\", \"top5_logits\" "
                            "of the same length, 2..%d", k, VH_CHECK_TOP), -1;
        st->margin = json_number_value(margin);
        st->n_top = (uint32_t)n_ids;
    }
    c->n_steps = c->action_dim;
    return 0;
}

/* One record (a fixture case or a JSON line) into c. */
static int read_case(const json_t *obj, int hf440, vh_reference_case *c, char *why, size_t why_size)
{
    memset(c, 0, sizeof *c);
    if (!json_is_object(obj)) return snprintf(why, why_size, "not a JSON object"), -1;
    if (json_object_get(obj, "trajectory") && !json_object_get(obj, "action_ids"))
        return snprintf(why, why_size, "a driving model's record (\"trajectory\"; no \"action_ids\"): the reference "
                        "of an Orion or MindDrive model, not of an OpenVLA model"), -1;
    const json_t *image = json_object_get(obj, "image");
    const json_t *instruction = json_object_get(obj, "instruction");
    if (!json_is_string(image) || !json_is_string(instruction))
        return snprintf(why, why_size, "\"image\" and \"instruction\" must be strings"), -1;
    const json_t *status = json_object_get(obj, "status"); /* vh-run --json: only "ok" lines have an action */
    if (status && (!json_is_string(status) || strcmp(json_string_value(status), "ok")))
        return snprintf(why, why_size, "status is not \"ok\": no action to compare with"), -1;
    const json_t *expect = obj;
    const json_t *text_only = json_object_get(obj, "text_only_positions");
    if (hf440 && json_is_object(text_only)) expect = text_only;
    const long n_ids = int_array(json_object_get(expect, "action_ids"), c->action_ids, VH_MAX_ACTION_DIM);
    const long n_action = real_array(json_object_get(expect, "action"), c->action, VH_MAX_ACTION_DIM);
    if (n_ids <= 0 || n_action != n_ids)
        return snprintf(why, why_size, "\"action_ids\" and \"action\" must be arrays of the same length, 1..%d",
                        VH_MAX_ACTION_DIM), -1;
    c->action_dim = (uint32_t)n_ids;
    if (read_steps(json_object_get(expect, "steps"), c, why, why_size)) return -1;
    const json_t *prompt = json_object_get(obj, "prompt_ids");
    if (prompt) {
        c->prompt_ids = malloc(sizeof *c->prompt_ids * (json_array_size(prompt) + 1));
        const long n = c->prompt_ids ? int_array(prompt, c->prompt_ids, VH_CHECK_MAX_PROMPT) : -1;
        if (n < 0) return snprintf(why, why_size, "\"prompt_ids\" must be an array of integers"), -1;
        c->n_prompt_ids = (size_t)n;
    }
    c->image = strdup(base_name(json_string_value(image)));
    c->instruction = dup_string(instruction);
    const json_t *path = json_object_get(obj, "image_path");
    c->image_path = dup_string(json_is_string(path) ? path : image);
    c->dataset = dup_string(json_object_get(obj, "dataset"));
    if (!c->dataset) c->dataset = dup_string(json_object_get(obj, "unnorm_key"));
    if (!c->image || !c->instruction || !c->image_path) return snprintf(why, why_size, "out of memory"), -1;
    return 0;
}

static void free_case(vh_reference_case *c)
{
    free(c->image);
    free(c->image_path);
    free(c->instruction);
    free(c->dataset);
    free(c->prompt_ids);
}

static int add_case(vh_reference *ref, const json_t *obj, int hf440, const char *where, char *why, size_t why_size)
{
    vh_reference_case *grown = realloc(ref->cases, sizeof *grown * (ref->n_cases + 1));
    if (!grown) return snprintf(why, why_size, "out of memory"), -1;
    ref->cases = grown;
    char what[256];
    if (read_case(obj, hf440, &ref->cases[ref->n_cases], what, sizeof what)) {
        free_case(&ref->cases[ref->n_cases]);
        snprintf(why, why_size, "%s: %s: %s", ref->path, where, what);
        return -1;
    }
    ref->n_cases++;
    return 0;
}

/* JSON Lines: one record a line; empty lines skipped. */
typedef struct lines_load {
    vh_reference *ref;
    int hf440;
    char *why;
    size_t why_size;
} lines_load;

static int add_line(json_t *obj, long line, void *user)
{
    lines_load *l = user;
    char where[64];
    snprintf(where, sizeof where, "line %ld", line);
    return add_case(l->ref, obj, l->hf440, where, l->why, l->why_size);
}

static int load_lines(FILE *f, int hf440, vh_reference *ref, char *why, size_t why_size)
{
    lines_load l = {ref, hf440, why, why_size};
    long bad_line = 0;
    json_error_t e;
    const int rc = vh_json_lines_each(f, 0, add_line, &l, &bad_line, &e);
    if (rc && bad_line) snprintf(why, why_size, "%s: line %ld: not JSON (%s)", ref->path, bad_line, e.text);
    return rc;
}

int vh_reference_load(const char *path, int hf440, vh_reference *ref, char *why, size_t why_size)
{
    memset(ref, 0, sizeof *ref);
    struct stat st;
    if (stat(path, &st) != 0) return snprintf(why, why_size, "%s: %s", path, strerror(errno)), -1;
    if (!S_ISREG(st.st_mode)) return snprintf(why, why_size, "%s: not a regular file", path), -1;
    ref->path = strdup(path);
    if (!ref->path) return snprintf(why, why_size, "out of memory"), -1;
    int rc = 0;
    json_error_t e;
    json_t *whole = json_load_file(path, JSON_DISABLE_EOF_CHECK, &e); /* the fixtures' one object */
    const json_t *cases = json_object_get(whole, "cases");
    if (json_is_array(cases)) {
        for (size_t i = 0; i < json_array_size(cases) && rc == 0; i++) {
            char where[64];
            snprintf(where, sizeof where, "cases[%zu]", i);
            rc = add_case(ref, json_array_get(cases, i), hf440, where, why, why_size);
        }
    } else {
        FILE *f = fopen(path, "r");
        if (!f) {
            snprintf(why, why_size, "%s: %s", path, strerror(errno));
            rc = -1;
        } else {
            rc = load_lines(f, hf440, ref, why, why_size);
            fclose(f);
        }
    }
    json_decref(whole);
    if (rc == 0 && ref->n_cases == 0) {
        snprintf(why, why_size, "%s: no records (neither an object with \"cases\" nor JSON lines)", path);
        rc = -1;
    }
    if (rc) vh_reference_free(ref);
    return rc;
}

void vh_reference_free(vh_reference *ref)
{
    for (size_t i = 0; i < ref->n_cases; i++) free_case(&ref->cases[i]);
    free(ref->cases);
    free(ref->path);
    memset(ref, 0, sizeof *ref);
}

const vh_reference_case *vh_reference_find(const vh_reference *ref, const char *image, const char *instruction,
                                           const char *dataset)
{
    const char *name = base_name(image);
    for (size_t i = 0; i < ref->n_cases; i++) {
        const vh_reference_case *c = &ref->cases[i];
        if (dataset && c->dataset && strcmp(c->dataset, dataset)) continue;
        if (!strcmp(c->image, name) && !strcmp(c->instruction, instruction)) return c;
    }
    return NULL;
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *vh_reference_image_file(const vh_reference *ref, const vh_reference_case *c)
{
    const char *recorded = c->image_path;
    if (recorded[0] == '/') return is_file(recorded) ? strdup(recorded) : NULL;
    char *dir = strdup(ref->path);
    if (!dir) return NULL;
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else strcpy(dir, ".");
    char *found = NULL;
    for (;;) { /* the reference's folder, then each one above it */
        const size_t n = strlen(dir) + strlen(recorded) + 2;
        char *candidate = malloc(n);
        if (!candidate) break;
        snprintf(candidate, n, "%s/%s", dir, recorded);
        if (is_file(candidate)) {
            found = candidate;
            break;
        }
        free(candidate);
        slash = strrchr(dir, '/');
        if (!slash || slash == dir) break;
        *slash = '\0';
    }
    free(dir);
    if (!found && is_file(recorded)) found = strdup(recorded);
    return found;
}

/* bf16: whether the run's token at step k, where the ids part, is one of the reference's best there
 * with a logit within the margin of the best's (the gap in *gap). */
static int near_tie(const vh_reference_case *c, uint32_t k, int32_t token, double margin, double *gap)
{
    if (k >= c->n_steps) return 0; /* no logits recorded: nothing says it was close */
    const vh_reference_step *st = &c->steps[k];
    for (uint32_t i = 1; i < st->n_top; i++) {
        if (st->top_ids[i] != token) continue;
        *gap = st->top_logits[0] - st->top_logits[i];
        return *gap < margin;
    }
    return 0;
}

void vh_reference_compare(const vh_reference_case *c, const int32_t *prompt, size_t n_prompt, const vh_action *a,
                          const vh_check_criterion *how, vh_check_result *out)
{
    out->prompt_equal = !c->prompt_ids ||
                        (c->n_prompt_ids == n_prompt && !memcmp(c->prompt_ids, prompt, n_prompt * sizeof *prompt));
    const int ok = a->status == VH_OK && a->action_dim == c->action_dim;
    out->action_ids_equal = ok && !memcmp(a->token_ids, c->action_ids, c->action_dim * sizeof *c->action_ids);
    out->near_tie_step = -1;
    out->near_tie_gap = 0;
    uint32_t compared = ok ? c->action_dim : 0; /* the dims whose values are compared */
    if (ok && !out->action_ids_equal && how->bf16) {
        uint32_t k = 0;
        while (a->token_ids[k] == c->action_ids[k]) k++;
        if (near_tie(c, k, a->token_ids[k], how->bf16_margin, &out->near_tie_gap)) {
            out->near_tie_step = (int)k;
            compared = k; /* later tokens follow another one: the record says nothing of them */
        }
    }
    out->max_action_delta = ok ? 0 : INFINITY;
    for (uint32_t i = 0; i < compared; i++) {
        const double d = fabs(a->values[i] - c->action[i]);
        if (!isnan(out->max_action_delta) && !(d <= out->max_action_delta)) out->max_action_delta = d; /* NaN wins */
    }
    out->pass = ok && out->prompt_equal && (out->action_ids_equal || out->near_tie_step >= 0) &&
                out->max_action_delta <= how->tolerance;
}
