#include "camera_rig.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RIG_PI 3.14159265358979323846
#define RIG_RADIUS_M 50.0 /* the ego's circle: bounded positions however many frames run */
#define RIG_LAP_FRAMES 120 /* frames a lap: 60 s, about 5.2 m/s */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* n pseudo-random bytes, a pure function of (seed, stream) */
static void fill_pixels(uint64_t seed, uint64_t stream, uint8_t *out, size_t n)
{
    uint64_t state = seed * 0x9e3779b97f4a7c15ull ^ (stream + 1) * 0xd1b54a32d192ed03ull;
    for (size_t i = 0; i < n; i += 8) {
        const uint64_t r = splitmix64(&state);
        for (size_t b = 0; b < 8 && i + b < n; b++) out[i + b] = (uint8_t)(r >> (8 * b));
    }
}

/* Camera c's lidar2img = K lidar2cam: lidar (x forward, y left, z up) to camera (x right, y down,
 * z forward) turned by c x 60 degrees, 1.5 m below and 0.2 m behind the lidar in camera axes. */
static void rig_lidar2img(int c, float out[16])
{
    const double yaw = c * RIG_PI / 3, f = 1266.0, cx = 800, cy = 450;
    const double R[9] = {sin(yaw), -cos(yaw), 0, 0, 0, -1, cos(yaw), sin(yaw), 0};
    const double l2c[16] = {R[0], R[1], R[2], 0, R[3], R[4], R[5], 1.5, R[6], R[7], R[8], 0.2, 0, 0, 0, 1};
    const double K[16] = {f, 0, cx, 0, 0, f, cy, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double acc = 0;
            for (int k = 0; k < 4; k++) acc += K[i * 4 + k] * l2c[k * 4 + j];
            out[i * 4 + j] = (float)acc;
        }
}

int vh_camera_rig_init(vh_camera_rig *rig, uint32_t width, uint32_t height, uint32_t n_sets, uint64_t seed)
{
    memset(rig, 0, sizeof *rig);
    if (!width || !height || !n_sets || n_sets > VH_RIG_MAX_SETS) return -1;
    rig->width = width;
    rig->height = height;
    rig->n_sets = n_sets;
    const size_t bytes = (size_t)width * height * 3;
    for (uint32_t s = 0; s < n_sets; s++)
        for (int c = 0; c < VH_RIG_CAMERAS; c++) {
            if (!(rig->rgb[s][c] = malloc(bytes))) {
                vh_camera_rig_free(rig);
                return -1;
            }
            fill_pixels(seed, (uint64_t)s * VH_RIG_CAMERAS + (uint64_t)c, rig->rgb[s][c], bytes);
            rig->cams[s][c] = (vh_camera_image){.rgb = rig->rgb[s][c], .width = width, .height = height};
        }
    for (int c = 0; c < VH_RIG_CAMERAS; c++) rig_lidar2img(c, rig->lidar2img + c * 16);
    return 0;
}

void vh_camera_rig_free(vh_camera_rig *rig)
{
    for (uint32_t s = 0; s < VH_RIG_MAX_SETS; s++)
        for (int c = 0; c < VH_RIG_CAMERAS; c++) free(rig->rgb[s][c]);
    memset(rig, 0, sizeof *rig);
}

/* Frame k on the circle: heading yaw, LiDAR to world, and the agent's 18 can-bus floats (translation,
 * rotation quaternion w x y z, acceleration, rotation rate, velocity, then the heading in radians and
 * degrees in 0..360, as the agent's pipeline fills them). */
static void rig_state(uint64_t k, vh_rig_state *s)
{
    const double yaw = 2 * RIG_PI * (double)(k % RIG_LAP_FRAMES) / RIG_LAP_FRAMES;
    const double x = RIG_RADIUS_M * sin(yaw), y = RIG_RADIUS_M * (1 - cos(yaw)), z = 1.8;
    const float pose[16] = {(float)cos(yaw), (float)-sin(yaw), 0, (float)x, (float)sin(yaw), (float)cos(yaw), 0,
                            (float)y, 0, 0, 1, (float)z, 0, 0, 0, 1};
    memcpy(s->ego_pose, pose, sizeof pose);
    const double omega = 2 * RIG_PI / (RIG_LAP_FRAMES * (double)VH_RIG_FRAME_NS * 1e-9), v = omega * RIG_RADIUS_M;
    const float can[VH_CAN_BUS_FLOATS] = {(float)x, (float)y, (float)z, (float)cos(yaw / 2), 0, 0, (float)sin(yaw / 2),
                                          0, (float)(v * omega), 9.81f, 0, 0, (float)omega, (float)v, 0, 0,
                                          (float)yaw, (float)(yaw * 180 / RIG_PI)};
    memcpy(s->can_bus, can, sizeof can);
}

void vh_camera_rig_frame(const vh_camera_rig *rig, uint64_t k, vh_rig_state *state, vh_frame *f)
{
    rig_state(k, state);
    f->n_cameras = VH_RIG_CAMERAS;
    f->cameras = rig->cams[k % rig->n_sets];
    f->lidar2img = rig->lidar2img;
    f->ego_pose = state->ego_pose;
    f->can_bus = state->can_bus;
    f->timestamp_ns = 1000000000ll + VH_RIG_FRAME_NS * (int64_t)k;
}
