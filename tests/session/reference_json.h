/* Comparing a backend's floats with a reference stored as a JSON array of float64 (the driving
 * models' fixtures, cases.json): the error relative to the reference's largest value. */
#ifndef VH_TESTS_REFERENCE_JSON_H
#define VH_TESTS_REFERENCE_JSON_H

#include <jansson.h>
#include <stdlib.h>

#include "test_support.h"

/* max |got - want| / max |want| over n values, want the JSON array (its length checked); NaN:
 * infinite. */
static inline double reference_rel_error(const float *got, const json_t *want, size_t n)
{
    ck_assert_uint_eq(json_array_size(want), n);
    double *w = malloc(sizeof *w * (n ? n : 1));
    ck_assert_ptr_nonnull(w);
    for (size_t i = 0; i < n; i++) w[i] = json_number_value(json_array_get(want, i));
    const double e = vh_test_rel_error_of_largest(got, w, n);
    free(w);
    return e;
}

#endif
