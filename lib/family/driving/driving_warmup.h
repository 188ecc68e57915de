/*
 * The warm-up frame of a driving family that starts from vision tokens: all-zero tokens and the
 * lane-follow command make the rows and passes of every frame (the values do not matter).
 */
#ifndef VH_FAMILY_DRIVING_WARMUP_H
#define VH_FAMILY_DRIVING_WARMUP_H

#include <stdint.h>

#include "vlahybrid/vlahybrid.h"

#define VH_DRIVING_WARMUP_COMMAND 3 /* lane follow */

/* Fill *frame with n x width zero tokens (*tokens, the program's, made on first use) and lane
 * follow: 1; -1 when out of memory. */
int vh_driving_warmup_frame(float **tokens, uint32_t n, uint32_t width, vh_frame *frame);

#endif
