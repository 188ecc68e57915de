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

/* The record for an image (any path: its file name is matched) and instruction, or NULL. */
const vh_reference_case *vh_reference_find(const vh_reference *ref, const char *image, const char *instruction);

/* Where a record's image is: image_path as is when absolute, else relative to the reference's folder
 * or any folder above it (the fixtures record repository-relative paths), else to the current
 * folder. A malloc'd path, or NULL when none exists. */
char *vh_reference_image_file(const vh_reference *ref, const vh_reference_case *c);

typedef struct vh_check_result {
    int prompt_equal;           /* prompt ids equal (1 when the record has none) */
    int action_ids_equal;
    double max_action_delta;    /* max |action - reference| over the dims (INFINITY: dims differ) */
    int pass;                   /* status ok, ids equal, max_action_delta <= tolerance */
} vh_check_result;

void vh_reference_compare(const vh_reference_case *c, const int32_t *prompt, size_t n_prompt, const vh_action *a,
                          double tolerance, vh_check_result *out);

#endif
