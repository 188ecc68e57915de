/* vh-run --check REFERENCE for the driving models, Orion and MindDrive (doc/check-format.md,
 * "Driving models"): the reference's records, which are the `vh-run --json` lines of a driving
 * model (one a frame), and the comparison of a frame's trajectory, extras and (MindDrive) speed
 * decision with its record. Record k (the k-th non-empty line) is the reference of the run's frame
 * k (its place in the stream, 0, 1, ...): a driving record does not name its frame's inputs fully
 * (inline noise, cameras' calibration), so a frame is matched by its position, and what the record
 * does say of its inputs (the tokens file's name, the command, where the noise came from) must
 * agree. OpenVLA's records are reference_check.h's. */
#ifndef VH_TOOLS_DRIVING_REFERENCE_CHECK_H
#define VH_TOOLS_DRIVING_REFERENCE_CHECK_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vlahybrid/vlahybrid.h"

/* The default tolerances, of each output's largest reference value (doc/check-format.md, "Driving
 * models", says where they come from): fp32 on both sides; bf16, per stage computing in bf16 on
 * either side (a cuda reference checked on cpu_amx: two). The margin: log-probabilities, per
 * bf16 stage. */
#define VH_DRIVING_FP32_TOLERANCE 1e-4
#define VH_ORION_BF16_TOLERANCE 5e-2
#define VH_MINDDRIVE_BF16_TOLERANCE 8e-2
#define VH_DRIVING_BF16_MARGIN 0.25

typedef struct vh_driving_extra {
    char *name;
    double *values;
    uint32_t count;
} vh_driving_extra;

typedef struct vh_driving_record {
    long line;                 /* in the reference, from 1 */
    char *input;               /* "vision_tokens": the frame's tokens file (or its first camera's
                                  image) as the reference run named it; NULL: not recorded */
    int command;               /* -1: not recorded */
    int noise;                 /* "noise": -1 not recorded, 0 null (drawn from the seed and the
                                  sequence), 1 given (a file, or "inline") */
    int has_seed, has_sequence;
    uint64_t seed, sequence;
    uint32_t n_points;
    double trajectory[2 * VH_MAX_TRAJECTORY_POINTS]; /* x0, y0, x1, y1, ... metres */
    int decision;              /* MindDrive's "speed_decision"; -1: none (Orion) */
    double decision_margin;    /* its log-probability minus the next best's ("speed_log_probs");
                                  NAN: not recorded */
    vh_driving_extra *extras;  /* "extras", by name */
    uint32_t n_extras;
} vh_driving_record;

typedef struct vh_driving_reference {
    char *path;
    vh_driving_record *records;
    size_t n_records;
    int minddrive;             /* the records carry a speed decision (every one, or none) */
    uint32_t n_points;         /* every record's */
    char *backends;            /* the first record's "backends"; NULL: not recorded */
    unsigned bf16_stages;      /* the most stages computing in bf16 of a record's "backends" */
} vh_driving_reference;

/* Read the JSON lines at `path`: 0, or -1 with why naming the file and the line (nothing to free
 * then). Refused: a line that is not a JSON object, a record whose status is not "ok", an OpenVLA
 * record, a trajectory or an extra that is not numbers (null: the reference run gave a NaN),
 * records of different trajectory lengths or of both families, no records. */
int vh_driving_reference_load(const char *path, vh_driving_reference *ref, char *why, size_t why_size);
void vh_driving_reference_free(vh_driving_reference *ref);

/* Whether the records are of the model's kind: family "orion" or "minddrive" (MindDrive records
 * have a speed decision, Orion's none) and n_points waypoints (0: not known, not compared). */
int vh_driving_reference_fits(const vh_driving_reference *ref, const char *family, const char *label,
                              uint32_t n_points, char *why, size_t why_size);

/* What the run feeds a frame, as far as a record can tell. */
typedef struct vh_driving_frame_inputs {
    const char *input;         /* the tokens file or the first camera's image */
    int command;
    int noise_given;           /* --noise or the frame file's "noise"; 0: drawn from seed, sequence */
    uint64_t seed, sequence;
} vh_driving_frame_inputs;

/* 0 when the record's inputs (where recorded) are the frame's: the same file name (no folder), the
 * same command, the noise given on both sides or drawn on both from the same seed and sequence;
 * else -1 with why. */
int vh_driving_record_matches(const vh_driving_record *r, const vh_driving_frame_inputs *in, char *why,
                              size_t why_size);

typedef struct vh_driving_criterion {
    int bf16;
    double tolerance;          /* the largest |output - reference| over the output's largest |reference| */
    double margin;             /* bf16: the reference log-probability gap below which the speed
                                  decision may differ */
    unsigned bf16_stages;      /* stages computing in bf16: the run's plus the reference's */
    int tolerance_given, margin_given;
} vh_driving_criterion;

/* numerics: -1 auto (bf16 when a stage of the run or of the reference computes in bf16), 0 fp32,
 * 1 bf16. tolerance, margin: < 0 for the defaults. */
void vh_driving_criterion_choose(const vh_driving_reference *ref, unsigned run_bf16_stages, int numerics,
                                 double tolerance, double margin, vh_driving_criterion *out);

typedef struct vh_driving_result {
    int answered;              /* status ok, a trajectory */
    char mismatch[192];        /* what of the answer's shape is not the record's; "": none */
    double trajectory_delta;   /* max |trajectory - reference|, metres */
    double trajectory_scale;   /* the largest |reference| */
    double trajectory_rel;     /* trajectory_delta over trajectory_scale (1 where that is 0) */
    double extras_rel;         /* the worst extra's, likewise; 0: none compared */
    const char *extras_worst;  /* its name (the record's); NULL: none compared */
    int decision;              /* the run's speed decision; -1: none */
    int decision_equal;        /* 1 without a decision */
    int near_tie;              /* bf16: the decisions differ where the reference's gap is below the margin */
    int pass;
} vh_driving_result;

/* The frame's answer against its record: the trajectory and every extra the record has (but the
 * speed planner's chosen trajectory, "speed_trajectory", where the decisions differ: it is the
 * other decision's mode), each within tolerance of its largest reference value; the decision equal
 * (bf16: or a near-tie). */
void vh_driving_compare(const vh_driving_record *r, const vh_action *a, const vh_driving_criterion *how,
                        vh_driving_result *out);

/* The report: the text of a frame's check line after its name (up to ": pass" or ": FAIL"), the
 * "check" member of its --json object, the summary line, the criterion's stderr line. */
void vh_driving_result_print(FILE *out, const vh_driving_record *r, const vh_action *a, const vh_driving_result *res,
                             const vh_driving_criterion *how);
json_t *vh_driving_result_json(const vh_driving_record *r, const vh_driving_result *res,
                               const vh_driving_criterion *how);
void vh_driving_summary_print(FILE *out, int passed, int n_frames, int near_ties, const vh_driving_criterion *how,
                              const vh_driving_reference *ref);
void vh_driving_criterion_print(FILE *out, const vh_driving_criterion *how, const char *run_backends, int numerics,
                                const vh_driving_reference *ref);

#endif
