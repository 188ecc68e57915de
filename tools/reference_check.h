/* vh-run --check REFERENCE: the reference records a run is compared with (doc/check-format.md), and
 * the comparison of one frame's prompt ids, action token ids and action values with its record.
 *
 * A reference is either the fixtures' JSON (tests/fixtures/reference/openvla-tiny.json: an object
 * with "cases") or JSON Lines, one record per line, as `vh-run --json` prints them. A record is
 * found by its image's file name (no folder) and its instruction. */
#ifndef VH_TOOLS_REFERENCE_CHECK_H
#define VH_TOOLS_REFERENCE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "vlahybrid/vlahybrid.h"

#define VH_CHECK_MAX_PROMPT 4096
#define VH_CHECK_TOP 5

/* A decode step of a fixture record ("steps"): the reference's best tokens and their logits. */
typedef struct vh_reference_step {
    double margin;                    /* top-1 logit - top-2 logit */
    int32_t top_ids[VH_CHECK_TOP];    /* best first */
    double top_logits[VH_CHECK_TOP];
    uint32_t n_top;
} vh_reference_step;

typedef struct vh_reference_case {
    char *image;                /* the image's file name, without folder */
    char *image_path;           /* the path as recorded (fixtures: repository-relative), or NULL */
    char *instruction;
    char *dataset;              /* norm_stats key the action was un-normalised with, or NULL */
    int32_t *prompt_ids;        /* NULL: not recorded, not compared */
    size_t n_prompt_ids;
    int32_t action_ids[VH_MAX_ACTION_DIM];
    double action[VH_MAX_ACTION_DIM];
    uint32_t action_dim;
    vh_reference_step steps[VH_MAX_ACTION_DIM]; /* the first n_steps of the action's steps */
    uint32_t n_steps;           /* 0: not recorded (vh-run --json lines) */
} vh_reference_case;

typedef struct vh_reference {
    char *path;
    vh_reference_case *cases;
    size_t n_cases;
} vh_reference;

/* Read `path` (either format). hf440: take a fixture case's "text_only_positions" expectations (the
 * openvla-hf440 decode positions) where it has them. 0, or -1 with why. */
int vh_reference_load(const char *path, int hf440, vh_reference *ref, char *why, size_t why_size);
void vh_reference_free(vh_reference *ref);

/* The record for an image (any path: its file name is matched) and instruction, or NULL. With
 * dataset (not NULL) only a record of that dataset or of none. */
const vh_reference_case *vh_reference_find(const vh_reference *ref, const char *image, const char *instruction,
                                           const char *dataset);

/* Where a record's image is: image_path as is when absolute, else relative to the reference's folder
 * or any folder above it (the fixtures record repository-relative paths), else to the current
 * folder. A malloc'd path, or NULL when none exists. */
char *vh_reference_image_file(const vh_reference *ref, const vh_reference_case *c);

/* How a frame is judged (doc/check-format.md, "The criterion"). fp32: the action ids equal the
 * record's and every value is within tolerance. bf16: the same, except that the ids may part from
 * the record's at a step where the reference itself nearly ties: the run's token is one of the
 * step's recorded best, its reference logit within bf16_margin of the best's. The steps after it
 * condition on another token and are not compared, nor are their values. */
typedef struct vh_check_criterion {
    double tolerance;           /* the largest |action - reference| that passes */
    int bf16;
    double bf16_margin;         /* logits */
} vh_check_criterion;

typedef struct vh_check_result {
    int prompt_equal;           /* prompt ids equal (1 when the record has none) */
    int action_ids_equal;
    double max_action_delta;    /* max |action - reference| over the dims compared (INFINITY: dims differ) */
    int near_tie_step;          /* bf16: the step where the ids parted at a near-tie; -1: none */
    double near_tie_gap;        /* ... the reference's best logit minus that of the run's token there */
    int pass;                   /* status ok, prompt ids equal, ids equal (or parted at a near-tie),
                                   max_action_delta <= tolerance */
} vh_check_result;

void vh_reference_compare(const vh_reference_case *c, const int32_t *prompt, size_t n_prompt, const vh_action *a,
                          const vh_check_criterion *how, vh_check_result *out);

#endif
