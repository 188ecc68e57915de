/* Arrays of floats from files, for vh-run's --vision-tokens and --noise: NumPy's .npy (what
 * numpy.save writes) or raw little-endian float32.
 *
 * .npy (format versions 1.0, 2.0 and 3.0: the magic "\x93NUMPY", the version, a little-endian
 * header length of 2 bytes (1.0) or 4 (2.0, 3.0), a Python dict literal with 'descr',
 * 'fortran_order' and 'shape', then the data): descr '<f4' (float32) or '<f2' (float16, converted
 * to float32 exactly), fortran_order False (C order). Big-endian data, other dtypes, Fortran order,
 * a truncated or overlong file are refused with a message saying what to do instead. */
#ifndef VH_TOOLS_NPY_FILE_H
#define VH_TOOLS_NPY_FILE_H

#include <stddef.h>
#include <stdint.h>

#define VH_NPY_MAX_DIMS 8

typedef struct vh_npy_array {
    float *data;                      /* malloc'd: count floats, C order */
    size_t count;
    uint32_t ndim;
    uint64_t shape[VH_NPY_MAX_DIMS];
    int float16;                      /* the file held float16 ('<f2') */
} vh_npy_array;

/* 1 when the file starts with the .npy magic, 0 when not (or it cannot be read). */
int vh_npy_has_magic(const char *path);

/* Read a .npy file of float32 or float16: 0, or -1 with why (nothing to free then). */
int vh_npy_read(const char *path, vh_npy_array *out, char *why, size_t why_size);

/* The floats of `path` as an array of shape dims[0] x ... x dims[ndim - 1] (C order): a .npy file
 * (by its name's ".npy" or by its magic) whose shape is dims, with any number of leading 1s (a
 * batch of one: (1, 529, 4096) for 529 x 4096), or a raw little-endian float32 file of exactly
 * that many floats. what names the array in messages ("vision tokens"). A malloc'd array, or NULL
 * with why. */
float *vh_read_float_array(const char *path, const char *what, const uint32_t *dims, uint32_t ndim, char *why,
                           size_t why_size);

/* Write rows x cols float32 (C order) as a .npy file (format 1.0, '<f4'): 0, or -1 with why. */
int vh_npy_write_f32(const char *path, const float *data, uint64_t rows, uint64_t cols, char *why, size_t why_size);

#endif
