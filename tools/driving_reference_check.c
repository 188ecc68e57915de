#include "driving_reference_check.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend_numerics.h"
#include "json_line.h"

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* An array of numbers (null: the reference run's NaN or infinity, vh-run prints them so) of at most
 * max values into a malloc'd *out (NULL when empty); its length, or -1 with what in why. */
static long number_array(const json_t *arr, const char *what, size_t max, double *fixed, double **out, char *why,
                         size_t why_size)
{
    if (!json_is_array(arr)) return snprintf(why, why_size, "%s must be an array of numbers", what), -1;
    const size_t n = json_array_size(arr);
    if (n > max) return snprintf(why, why_size, "%s has %zu values, more than %zu", what, n, max), -1;
    double *v = fixed;
    if (!v && n && !(v = malloc(sizeof *v * n))) return snprintf(why, why_size, "out of memory"), -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(arr, i);
        if (!json_is_number(x)) {
            if (v != fixed) free(v);
            if (json_is_null(x))
                return snprintf(why, why_size, "%s[%zu] is null: the reference run gave a NaN or an infinity there",
                                what, i), -1;
            return snprintf(why, why_size, "%s[%zu] is not a number", what, i), -1;
        }
        v[i] = json_number_value(x);
    }
    if (out) *out = v; /* NULL when empty (no fixed array is given with out) */
    return (long)n;
}

static void free_record(vh_driving_record *r)
{
    for (uint32_t i = 0; i < r->n_extras; i++) {
        free(r->extras[i].name);
        free(r->extras[i].values);
    }
    free(r->extras);
    free(r->input);
}

static int read_extras(const json_t *extras, vh_driving_record *r, char *why, size_t why_size)
{
    if (!extras || json_is_null(extras)) return 0;
    if (!json_is_object(extras)) return snprintf(why, why_size, "\"extras\" must be an object of arrays"), -1;
    r->extras = calloc(json_object_size(extras) + 1, sizeof *r->extras);
    if (!r->extras) return snprintf(why, why_size, "out of memory"), -1;
    const char *name;
    const json_t *values;
    json_object_foreach((json_t *)extras, name, values) {
        char what[96];
        snprintf(what, sizeof what, "extras.%.60s", name);
        vh_driving_extra *e = &r->extras[r->n_extras];
        const long n = number_array(values, what, VH_MAX_ACTION_EXTRA_FLOATS, NULL, &e->values, why, why_size);
        if (n < 0) return -1;
        if (!(e->name = strdup(name))) {
            free(e->values);
            return snprintf(why, why_size, "out of memory"), -1;
        }
        e->count = (uint32_t)n;
        r->n_extras++;
    }
    return 0;
}

static const vh_driving_extra *find_extra(const vh_driving_record *r, const char *name)
{
    for (uint32_t i = 0; i < r->n_extras; i++)
        if (!strcmp(r->extras[i].name, name)) return &r->extras[i];
    return NULL;
}

/* An optional integer member in [lo, hi]: 0 absent, 1 read, -1 not one. */
static int optional_integer(const json_t *obj, const char *key, json_int_t lo, json_int_t hi, json_int_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) return -1;
    *out = json_integer_value(v);
    return 1;
}

/* One line's record into r. */
static int read_record(const json_t *obj, vh_driving_record *r, char *why, size_t why_size)
{
    r->command = -1;
    r->noise = -1;
    r->decision = -1;
    r->decision_margin = NAN;
    if (!json_is_object(obj)) return snprintf(why, why_size, "not a JSON object"), -1;
    const json_t *trajectory = json_object_get(obj, "trajectory");
    if (!trajectory && (json_object_get(obj, "action_ids") || json_object_get(obj, "action")))
        return snprintf(why, why_size, "an OpenVLA record (\"action_ids\", \"action\"; no \"trajectory\"): the "
                        "reference of an OpenVLA model, not of a driving model"), -1;
    const json_t *status = json_object_get(obj, "status");
    if (status && (!json_is_string(status) || strcmp(json_string_value(status), "ok")))
        return snprintf(why, why_size, "status is %s, not \"ok\": no trajectory to compare with",
                        json_is_string(status) ? json_string_value(status) : "not a string"), -1;
    if (!trajectory)
        return snprintf(why, why_size, "no \"trajectory\" (a driving model's vh-run --json line has one)"), -1;
    const long n = number_array(trajectory, "\"trajectory\"", 2 * VH_MAX_TRAJECTORY_POINTS, r->trajectory, NULL, why,
                                why_size);
    if (n < 0) return -1;
    if (n == 0 || n % 2)
        return snprintf(why, why_size, "\"trajectory\" has %ld values: (x, y) pairs, 1..%d of them", n,
                        VH_MAX_TRAJECTORY_POINTS), -1;
    r->n_points = (uint32_t)(n / 2);
    json_int_t v;
    int got = optional_integer(obj, "n_points", 0, VH_MAX_TRAJECTORY_POINTS, &v);
    if (got < 0 || (got && (uint32_t)v != r->n_points))
        return snprintf(why, why_size, "\"n_points\" is not the trajectory's %u points", r->n_points), -1;
    const json_t *input = json_object_get(obj, "vision_tokens");
    if (input && !json_is_string(input)) return snprintf(why, why_size, "\"vision_tokens\" must be a string"), -1;
    if (input && !(r->input = strdup(json_string_value(input)))) return snprintf(why, why_size, "out of memory"), -1;
    if ((got = optional_integer(obj, "command", 0, 63, &v)) < 0)
        return snprintf(why, why_size, "\"command\" must be an integer 0..63"), -1;
    if (got) r->command = (int)v;
    const json_t *noise = json_object_get(obj, "noise");
    if (noise && !json_is_null(noise) && !json_is_string(noise))
        return snprintf(why, why_size, "\"noise\" must be null (drawn) or a string (given)"), -1;
    if (noise) r->noise = json_is_string(noise);
    const json_t *seed = json_object_get(obj, "seed"), *sequence = json_object_get(obj, "sequence");
    if ((seed && !json_is_integer(seed)) || (sequence && !json_is_integer(sequence)))
        return snprintf(why, why_size, "\"seed\" and \"sequence\" must be integers"), -1;
    r->has_seed = seed != NULL, r->has_sequence = sequence != NULL;
    r->seed = seed ? (uint64_t)json_integer_value(seed) : 0; /* vh-run prints the uint64 as a json_int_t */
    r->sequence = sequence ? (uint64_t)json_integer_value(sequence) : 0;
    if (read_extras(json_object_get(obj, "extras"), r, why, why_size)) return -1;
    if ((got = optional_integer(obj, "speed_decision", 0, 1 << 20, &v)) < 0)
        return snprintf(why, why_size, "\"speed_decision\" must be an integer >= 0"), -1;
    if (got) {
        r->decision = (int)v;
        const vh_driving_extra *lp = find_extra(r, "speed_log_probs");
        if (lp && (uint32_t)r->decision >= lp->count)
            return snprintf(why, why_size, "\"speed_decision\" %d is not one of extras.speed_log_probs' %u",
                            r->decision, lp->count), -1;
        if (lp && lp->count >= 2) {
            double next = -INFINITY;
            for (uint32_t i = 0; i < lp->count; i++)
                if (i != (uint32_t)r->decision && lp->values[i] > next) next = lp->values[i];
            r->decision_margin = lp->values[r->decision] - next;
        }
    }
    return 0;
}

/* Where a line is not JSON: a hint when the whole file is one object (a fixtures file, cases.json). */
static void not_json(const char *path, long line, const json_error_t *e, char *why, size_t why_size)
{
    json_t *whole = json_load_file(path, 0, NULL);
    if (json_is_object(whole) && json_object_get(whole, "cases"))
        snprintf(why, why_size, "%s is one JSON object with \"cases\" (a fixtures file?), not the vh-run --json lines "
                 "of a driving model", path);
    else snprintf(why, why_size, "%s: line %ld: not JSON (%s)", path, line, e->text);
    json_decref(whole);
}

static int add_record(vh_driving_reference *ref, const json_t *obj, long line, char *why, size_t why_size)
{
    vh_driving_record *grown = realloc(ref->records, sizeof *grown * (ref->n_records + 1));
    if (!grown) return snprintf(why, why_size, "out of memory"), -1;
    ref->records = grown;
    vh_driving_record *r = &ref->records[ref->n_records];
    memset(r, 0, sizeof *r);
    r->line = line;
    char what[512];
    if (read_record(obj, r, what, sizeof what)) {
        free_record(r);
        return snprintf(why, why_size, "%s: line %ld: %s", ref->path, line, what), -1;
    }
    ref->n_records++;
    const vh_driving_record *first = &ref->records[0];
    if (r->n_points != first->n_points)
        return snprintf(why, why_size, "%s: line %ld: a trajectory of %u points; line %ld's has %u (one model's "
                        "records have one length)", ref->path, line, r->n_points, first->line, first->n_points), -1;
    if ((r->decision >= 0) != (first->decision >= 0))
        return snprintf(why, why_size, "%s: line %ld %s a \"speed_decision\" and line %ld %s (MindDrive's records "
                        "have one, Orion's none)", ref->path, line, r->decision >= 0 ? "has" : "has no",
                        first->line, first->decision >= 0 ? "has" : "has not"), -1;
    const json_t *backends = json_object_get(obj, "backends");
    if (json_is_string(backends)) {
        const unsigned n = vh_backends_bf16_stages(json_string_value(backends));
        if (n > ref->bf16_stages) ref->bf16_stages = n;
        if (!ref->backends && !(ref->backends = strdup(json_string_value(backends))))
            return snprintf(why, why_size, "out of memory"), -1;
    }
    return 0;
}

typedef struct records_load {
    vh_driving_reference *ref;
    char *why;
    size_t why_size;
} records_load;

static int add_line(json_t *obj, long line, void *user)
{
    records_load *l = user;
    return add_record(l->ref, obj, line, l->why, l->why_size);
}

int vh_driving_reference_load(const char *path, vh_driving_reference *ref, char *why, size_t why_size)
{
    memset(ref, 0, sizeof *ref);
    struct stat st;
    if (stat(path, &st) != 0) return snprintf(why, why_size, "%s: %s", path, strerror(errno)), -1;
    if (!S_ISREG(st.st_mode)) return snprintf(why, why_size, "%s: not a regular file", path), -1;
    FILE *f = fopen(path, "r");
    if (!f) return snprintf(why, why_size, "%s: %s", path, strerror(errno)), -1;
    if (!(ref->path = strdup(path))) {
        fclose(f);
        return snprintf(why, why_size, "out of memory"), -1;
    }
    records_load l = {ref, why, why_size};
    long bad_line = 0;
    json_error_t e;
    int rc = vh_json_lines_each(f, JSON_REJECT_DUPLICATES, add_line, &l, &bad_line, &e);
    if (rc && bad_line) not_json(path, bad_line, &e, why, why_size);
    fclose(f);
    if (rc == 0 && ref->n_records == 0) {
        snprintf(why, why_size, "%s: no records (the vh-run --json lines of a driving model)", path);
        rc = -1;
    }
    if (rc) {
        vh_driving_reference_free(ref);
        return -1;
    }
    ref->minddrive = ref->records[0].decision >= 0;
    ref->n_points = ref->records[0].n_points;
    return 0;
}

void vh_driving_reference_free(vh_driving_reference *ref)
{
    for (size_t i = 0; i < ref->n_records; i++) free_record(&ref->records[i]);
    free(ref->records);
    free(ref->backends);
    free(ref->path);
    memset(ref, 0, sizeof *ref);
}

int vh_driving_reference_fits(const vh_driving_reference *ref, const char *family, const char *label,
                              uint32_t n_points, char *why, size_t why_size)
{
    const int minddrive = !strcmp(family, "minddrive");
    if (ref->minddrive != minddrive)
        return snprintf(why, why_size, "%s's records %s speed decision: the reference of %s model, not of %s "
                        "(line %ld)", ref->path, ref->minddrive ? "have a" : "have no",
                        ref->minddrive ? "a MindDrive" : "an Orion", label, ref->records[0].line), -1;
    if (n_points && ref->n_points != n_points)
        return snprintf(why, why_size, "%s's trajectories have %u points; the model's have %u (planner fut_ts): the "
                        "reference of another model", ref->path, ref->n_points, n_points), -1;
    return 0;
}

int vh_driving_record_matches(const vh_driving_record *r, const vh_driving_frame_inputs *in, char *why,
                              size_t why_size)
{
    if (r->input && in->input && strcmp(base_name(r->input), base_name(in->input)))
        return snprintf(why, why_size, "its frame was %s, this frame is %s", base_name(r->input),
                        base_name(in->input)), -1;
    if (r->command >= 0 && r->command != in->command)
        return snprintf(why, why_size, "its frame had command %d, this frame has %d", r->command, in->command), -1;
    if (r->noise >= 0 && r->noise != in->noise_given)
        return snprintf(why, why_size, "its frame's planner noise was %s, this frame's is %s",
                        r->noise ? "given (--noise or the frame file's \"noise\")" : "drawn from the seed",
                        in->noise_given ? "given (--noise or the frame file's \"noise\")" : "drawn from the seed"), -1;
    if (r->noise == 0 && !in->noise_given && r->has_seed && r->seed != in->seed)
        return snprintf(why, why_size, "its frame drew the planner's noise from seed %llu, this run from %llu (--seed)",
                        (unsigned long long)r->seed, (unsigned long long)in->seed), -1;
    if (r->noise == 0 && !in->noise_given && r->has_sequence && r->sequence != in->sequence)
        return snprintf(why, why_size, "its frame drew the planner's noise with sequence %llu, this frame with %llu",
                        (unsigned long long)r->sequence, (unsigned long long)in->sequence), -1;
    return 0;
}

void vh_driving_criterion_choose(const vh_driving_reference *ref, unsigned run_bf16_stages, int numerics,
                                 double tolerance, double margin, vh_driving_criterion *out)
{
    const unsigned stages = run_bf16_stages + ref->bf16_stages;
    const double per_stage = stages ? stages : 1;
    out->bf16_stages = stages;
    out->bf16 = numerics < 0 ? stages > 0 : numerics == 1;
    out->tolerance_given = tolerance >= 0;
    out->margin_given = margin >= 0;
    const double bf16_tol = ref->minddrive ? VH_MINDDRIVE_BF16_TOLERANCE : VH_ORION_BF16_TOLERANCE;
    out->tolerance = tolerance >= 0 ? tolerance : out->bf16 ? bf16_tol * per_stage : VH_DRIVING_FP32_TOLERANCE;
    out->margin = margin >= 0 ? margin : VH_DRIVING_BF16_MARGIN * per_stage;
}

/* max |got - want| over the largest |want| (1 where that is 0), and the two parts. NaN wins. */
static double rel_error(const float *got, const double *want, uint32_t n, double *delta, double *scale)
{
    double d = 0, s = 0;
    for (uint32_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - want[i]);
        if (!isnan(d) && !(e <= d)) d = e; /* a NaN stays */
        if (fabs(want[i]) > s) s = fabs(want[i]);
    }
    if (delta) *delta = d;
    if (scale) *scale = s;
    return d / (s > 0 ? s : 1);
}

void vh_driving_compare(const vh_driving_record *r, const vh_action *a, const vh_driving_criterion *how,
                        vh_driving_result *out)
{
    memset(out, 0, sizeof *out);
    out->decision = -1;
    out->decision_equal = 1;
    out->answered = a->status == VH_OK && a->kind == VH_ACTION_TRAJECTORY;
    out->trajectory_delta = out->trajectory_rel = INFINITY;
    if (!out->answered) return;
    if (a->n_points != r->n_points) {
        snprintf(out->mismatch, sizeof out->mismatch, "a trajectory of %u points, the reference's %u", a->n_points,
                 r->n_points);
        return;
    }
    out->trajectory_rel = rel_error(a->trajectory, r->trajectory, 2 * r->n_points, &out->trajectory_delta,
                                    &out->trajectory_scale);
    if (r->decision >= 0) {
        if (a->action_dim != 1) {
            snprintf(out->mismatch, sizeof out->mismatch, "no speed decision, the reference's %d", r->decision);
            return;
        }
        const double value = a->values[0];
        out->decision = value >= 0 && value < (1 << 20) ? (int)value : -1; /* (a NaN is no decision) */
        out->decision_equal = out->decision == r->decision;
        out->near_tie = !out->decision_equal && how->bf16 && r->decision_margin < how->margin; /* NaN: no */
    } else if (a->action_dim == 1) {
        snprintf(out->mismatch, sizeof out->mismatch, "a speed decision (%g) the reference has not", a->values[0]);
        return;
    }
    for (uint32_t i = 0; i < r->n_extras; i++) {
        const vh_driving_extra *e = &r->extras[i];
        /* the speed planner's chosen mode follows the decision: another decision, another mode */
        if (!out->decision_equal && !strcmp(e->name, "speed_trajectory")) continue;
        uint32_t count = 0;
        const float *v = vh_action_extra(a, e->name, &count);
        if (!v || count != e->count) {
            if (v) snprintf(out->mismatch, sizeof out->mismatch, "extra %.40s has %u values, the reference's %u",
                            e->name, count, e->count);
            else snprintf(out->mismatch, sizeof out->mismatch, "no extra %.40s (the reference has it)", e->name);
            return;
        }
        const double rel = rel_error(v, e->values, e->count, NULL, NULL);
        if (!out->extras_worst || (!isnan(out->extras_rel) && !(rel <= out->extras_rel))) { /* a NaN stays */
            out->extras_rel = rel;
            out->extras_worst = e->name;
        }
    }
    out->pass = out->trajectory_rel <= how->tolerance && out->extras_rel <= how->tolerance &&
                (out->decision_equal || out->near_tie);
}

void vh_driving_result_print(FILE *out, const vh_driving_record *r, const vh_action *a, const vh_driving_result *res,
                             const vh_driving_criterion *how)
{
    if (!res->answered) {
        fprintf(out, "no trajectory (%s): FAIL\n",
                a->status == VH_OK ? "not a trajectory" : vh_status_string(a->status));
        return;
    }
    if (res->mismatch[0]) {
        fprintf(out, "%s: FAIL\n", res->mismatch);
        return;
    }
    if (res->trajectory_delta == 0) fprintf(out, "trajectory equal");
    else fprintf(out, "trajectory max |d| %.3g m, %.3g of the largest %.3g m", res->trajectory_delta,
                 res->trajectory_rel, res->trajectory_scale);
    if (res->extras_worst && res->extras_rel == 0) fprintf(out, "; extras equal");
    else if (res->extras_worst)
        fprintf(out, "; extras within %.3g of their largest (worst %s)", res->extras_rel, res->extras_worst);
    if (r->decision >= 0) {
        if (res->decision_equal) fprintf(out, "; speed decision equal (%d)", r->decision);
        else if (res->near_tie)
            fprintf(out, "; speed decision %d, the reference's %d: a near-tie, reference log-probability gap %.3g < %g "
                    "(speed_trajectory not compared)", res->decision, r->decision, r->decision_margin, how->margin);
        else if (isfinite(r->decision_margin))
            fprintf(out, "; speed decision %d DIFFERS from the reference's %d (reference log-probability gap %.3g)",
                    res->decision, r->decision, r->decision_margin);
        else fprintf(out, "; speed decision %d DIFFERS from the reference's %d", res->decision, r->decision);
    }
    fprintf(out, " (tolerance %g of the largest): %s\n", how->tolerance, res->pass ? "pass" : "FAIL");
}

static json_t *real_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *vh_driving_result_json(const vh_driving_record *r, const vh_driving_result *res,
                               const vh_driving_criterion *how)
{
    json_t *check = json_object();
    json_object_set_new(check, "reference_line", json_integer(r->line));
    const int compared = res->answered && !res->mismatch[0];
    json_object_set_new(check, "trajectory_max_delta", compared ? real_or_null(res->trajectory_delta) : json_null());
    json_object_set_new(check, "trajectory_max_relative", compared ? real_or_null(res->trajectory_rel) : json_null());
    json_object_set_new(check, "extras_max_relative", res->extras_worst ? real_or_null(res->extras_rel) : json_null());
    json_object_set_new(check, "extras_worst", res->extras_worst ? json_string(res->extras_worst) : json_null());
    if (r->decision >= 0) {
        json_object_set_new(check, "speed_decision_equal", json_boolean(compared && res->decision_equal));
        json_object_set_new(check, "reference_speed_decision", json_integer(r->decision));
        json_object_set_new(check, "reference_decision_gap", real_or_null(r->decision_margin));
    }
    if (res->mismatch[0]) json_object_set_new(check, "mismatch", json_string(res->mismatch));
    json_object_set_new(check, "tolerance", json_real(how->tolerance));
    json_object_set_new(check, "criterion", json_string(how->bf16 ? "bf16" : "fp32"));
    if (how->bf16 && r->decision >= 0) {
        json_object_set_new(check, "margin", json_real(how->margin));
        json_object_set_new(check, "near_tie", json_boolean(res->near_tie));
    }
    json_object_set_new(check, "pass", json_boolean(res->pass));
    return check;
}

void vh_driving_summary_print(FILE *out, int passed, int n_frames, int near_ties, const vh_driving_criterion *how,
                              const vh_driving_reference *ref)
{
    fprintf(out, "check: %d of %d frames pass (%strajectories and extras within %g of each one's largest reference "
            "value", passed, n_frames, how->bf16 ? "bf16 criterion: " : "", how->tolerance);
    if (ref->minddrive && how->bf16)
        fprintf(out, ", speed decisions equal or parted at a reference near-tie, log-probability gap < %g, in %d "
                "frames", how->margin, near_ties);
    else if (ref->minddrive) fprintf(out, ", speed decisions equal");
    fprintf(out, ") against %s", ref->path);
    if ((size_t)n_frames < ref->n_records) fprintf(out, " (its first %d of %zu records)", n_frames, ref->n_records);
    if (how->bf16) fprintf(out, "; for fp32 parity run with --backend cpu_generic against a cpu_generic reference");
    fprintf(out, "\n");
}

void vh_driving_criterion_print(FILE *out, const vh_driving_criterion *how, const char *run_backends, int numerics,
                                const vh_driving_reference *ref)
{
    fprintf(out, "vh-run: --check judges by the %s criterion (%s: the run's %s, the reference's %s): "
            "trajectories and extras within %g of each one's largest reference value",
            how->bf16 ? "bf16" : "fp32", numerics < 0 ? "the backends' compute" : "--numerics; the backends",
            run_backends, ref->backends ? ref->backends : "not recorded", how->tolerance);
    if (how->tolerance_given) fprintf(out, " (--check-tolerance)");
    else if (how->bf16 && how->bf16_stages > 1)
        fprintf(out, " (%g for each of the %u stages computing in bf16)", how->tolerance / how->bf16_stages,
                how->bf16_stages);
    if (ref->minddrive && how->bf16)
        fprintf(out, ", speed decisions equal but at a reference near-tie (log-probability gap < %g)", how->margin);
    else if (ref->minddrive) fprintf(out, ", speed decisions equal");
    fprintf(out, "; doc/check-format.md, \"Driving models\"\n");
}
