/*
 * Driving frames from a JSON-lines frame file, one line at a time, as a driving stack would hand
 * them over: the format `vh-run --frame-file` reads (doc/api.md, "Frame files"), the members of a
 * camera frame only. This is the example's own small reader on jansson and tools/imageio; the
 * tools' reader (tools/frame_file.c) is not a public API.
 *
 * Members of a line (any other is refused, naming the line):
 *   "cameras"       array of {"name": string, "image": path, and 4 x 4 "lidar2img", or "intrinsics"
 *                   and "extrinsics"}: the six images (PNG or JPEG) with each camera's calibration
 *   "ego_pose"      4 x 4 numbers (4 rows of 4, or 16): LiDAR to world
 *   "can_bus"       18 numbers
 *   "command"       integer 0..5 (absent: the program's --command)
 *   "timestamp_ns"  integer: the capture time (absent: the clock when the line was read)
 *   "noise"         an array of numbers, or a path to a .npy (float32) or raw float32 file
 *                   (absent: drawn from the session's seed and the frame's sequence)
 *   "sequence", "tag", "stream"   integers >= 0
 * Paths are relative to the frame file's folder unless absolute. Empty lines are skipped.
 */
#ifndef ORION_L20_XEON_FRAME_READER_H
#define ORION_L20_XEON_FRAME_READER_H

#include <stddef.h>
#include <stdint.h>

#include <vlahybrid/vlahybrid.h>

#define FRAME_MAX_CAMERAS 16

typedef struct driving_frame {
    long line;                             /* in the file, from 1 */
    uint32_t n_cameras;
    vh_camera_image cameras[FRAME_MAX_CAMERAS]; /* pointing into pixels[] and names[] */
    uint8_t *pixels[FRAME_MAX_CAMERAS];
    char *names[FRAME_MAX_CAMERAS];
    int has_lidar2img, has_intrinsics, has_extrinsics; /* every camera gave it */
    float lidar2img[FRAME_MAX_CAMERAS * 16], intrinsics[FRAME_MAX_CAMERAS * 16], extrinsics[FRAME_MAX_CAMERAS * 16];
    int has_ego_pose, has_can_bus;
    float ego_pose[16], can_bus[VH_CAN_BUS_FLOATS];
    int command;                           /* -1: not given */
    float *noise;                          /* NULL: not given */
    uint32_t n_noise;
    int has_timestamp, has_sequence, has_tag;
    int64_t timestamp_ns;
    uint64_t sequence, tag, stream;        /* stream 0 unless given */
} driving_frame;

typedef struct frame_reader frame_reader;

/* A frame file, or a folder holding frames.jsonl, or "-" for standard input (paths from the
 * current folder). NULL and a message in err when it cannot be opened. */
frame_reader *frame_reader_open(const char *path, char *err, size_t err_size);

/* The next frame, its images decoded. 1: *f filled (free it with driving_frame_clear); 0: the end
 * of the file; -1: a bad line (not JSON, an unknown member, an image that does not decode), skipped,
 * err naming the line; -2: the file cannot be read any further. */
int frame_reader_next(frame_reader *r, driving_frame *f, char *err, size_t err_size);

void driving_frame_clear(driving_frame *f);
void frame_reader_close(frame_reader *r);

#endif
