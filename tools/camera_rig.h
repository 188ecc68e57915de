/* A synthetic six-camera rig for Orion's camera front end (doc/api.md, "Driving models", "From six
 * cameras"), as tests/session/test_orion_cameras.c builds one: six cameras 60 degrees apart around
 * the ego, each with the agent's 1600 x 900 intrinsics (focal 1266, centre 800, 450); images of any
 * size (the library resizes them by the 1600 x 900 rig's factor, so the calibration stays the rig's
 * whatever the size); seeded pseudo-random pixels, a few image sets used in turn. Frame k is 0.5 s
 * after frame k - 1 (the heads' memory starts afresh after a gap of 2 s or more, so it stays live)
 * and its ego drives a circle of 50 m radius, a lap in 120 frames (about 5.2 m/s), can_bus to match.
 * Used by vh-bench; free for vh-run and tests. */
#ifndef VH_TOOLS_CAMERA_RIG_H
#define VH_TOOLS_CAMERA_RIG_H

#include <stdint.h>

#include "vlahybrid/vlahybrid.h"

#define VH_RIG_CAMERAS 6
#define VH_RIG_MAX_SETS 8
#define VH_RIG_FRAME_NS 500000000ll /* frames 0.5 s apart, the agent's rate */

typedef struct vh_camera_rig {
    uint32_t width, height, n_sets;
    uint8_t *rgb[VH_RIG_MAX_SETS][VH_RIG_CAMERAS];
    vh_camera_image cams[VH_RIG_MAX_SETS][VH_RIG_CAMERAS];
    float lidar2img[VH_RIG_CAMERAS * 16];
} vh_camera_rig;

/* What frame k carries that changes from frame to frame; the frame points into it, so it must
 * live until the frame is submitted (the library copies at submit). */
typedef struct vh_rig_state {
    float ego_pose[16];
    float can_bus[VH_CAN_BUS_FLOATS];
} vh_rig_state;

/* n_sets (1..VH_RIG_MAX_SETS) sets of six width x height images, pixels a pure function of
 * (seed, set, camera). 0, or -1 (out of memory or a bad size; the rig is then freed). */
int vh_camera_rig_init(vh_camera_rig *rig, uint32_t width, uint32_t height, uint32_t n_sets, uint64_t seed);
void vh_camera_rig_free(vh_camera_rig *rig);

/* Frame k's cameras (image set k mod n_sets), calibration, ego pose, can_bus and timestamp_ns
 * (1 s + 0.5 s k) on f, which is otherwise left as it is (command, sequence, stream: the caller's). */
void vh_camera_rig_frame(const vh_camera_rig *rig, uint64_t k, vh_rig_state *state, vh_frame *f);

#endif
