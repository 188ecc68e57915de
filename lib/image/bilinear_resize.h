/* Bilinear resizing of float32 images as OpenCV's cv2.resize(img, (dw, dh), interpolation=
 * cv2.INTER_LINEAR) computes it (OpenCV 4.6, imgproc/src/resize.cpp, resizeGeneric_ with
 * HResizeLinear and VResizeLinear on float): destination column x reads source column
 * fx = (x + 0.5) * sw / dw - 0.5 (float), the two taps floor(fx) and floor(fx) + 1 with weights
 * 1 - t and t, t = fx - floor(fx); a column left of the first source column or right of the last
 * takes the edge column alone; a horizontal pass over each source row, then the vertical one the
 * same way, in float32. No antialiasing: downscaling samples, as OpenCV does.
 *
 * Orion's agent stretches each camera's 640 x 320 crop to 640 x 640 this way (mmcv.imresize).
 */
#ifndef VH_IMAGE_BILINEAR_RESIZE_H
#define VH_IMAGE_BILINEAR_RESIZE_H

#include <stdint.h>

/* OpenCV's tap of destination index d along a side of `in` source and `out` destination samples:
 * the first source index and the second's weight t (the first's is 1 - t); a tap past an edge
 * reads the edge alone (single). */
typedef struct vh_bilinear_tap {
    int64_t first;
    float t;
    int single;
} vh_bilinear_tap;
vh_bilinear_tap vh_bilinear_tap_of(int64_t d, int64_t in, int64_t out);

/* src [sh, sw, channels] -> dst [dh, dw, channels], interleaved channels (an HWC float image);
 * sides >= 1; src and dst must not overlap. */
void vh_resize_bilinear_f32(const float *src, int64_t sw, int64_t sh, int64_t channels, float *dst, int64_t dw,
                            int64_t dh);

#endif
