/* vh-run --frame-file FILE: a stream of frames, each with its own inputs, as JSON Lines (one JSON
 * object a line; doc/api.md, "Frame files"). Every line is read and checked here, before the
 * model loads, so that a bad line stops the run before any frame is submitted.
 *
 * Members of a line (any other is refused, with the line number):
 *   "image"          string: the frame's PNG or JPEG (OpenVLA)
 *   "vision_tokens"  string: the frame's vision tokens, .npy or raw float32 (Orion, MindDrive)
 *   "instruction"    string (OpenVLA)
 *   "command"        integer 0..63 (driving models; vh-run checks it against the model's range)
 *   "noise"          string (a .npy or raw float32 file) or an array of numbers
 *   "timestamp_ns"   integer: the frame's capture time, returned in its answer
 *   "sequence"       integer >= 0: the frame's sequence (a sampling model draws its noise from it)
 *   "tag"            integer >= 0: the caller's value, printed with the frame's answer
 *   "stream"         integer >= 0: the stream (vehicle) the frame belongs to (vh_frame.stream)
 *   "unnorm_key"     string: the dataset that un-normalises this frame's action (OpenVLA)
 *   "cameras"        array of {"name": string, "image": string, and 4 x 4 "lidar2img",
 *                    "intrinsics", "extrinsics"}: a multi-camera frame's images and calibration,
 *                    passed to the library as vh_frame.cameras (and its lidar2img, intrinsics,
 *                    extrinsics where every camera gives them)
 *   "ego_pose"       4 x 4 numbers (nested arrays, or 16 in a row): LiDAR to world
 *   "can_bus"        18 numbers
 * Paths are relative to the frame file's folder unless absolute. Empty lines are skipped. Which of
 * the members a model needs (and which it refuses) is vh-run's to check, knowing the model. */
#ifndef VH_TOOLS_FRAME_FILE_H
#define VH_TOOLS_FRAME_FILE_H

#include <stddef.h>
#include <stdint.h>

#define VH_FRAME_FILE_MAX_CAMERAS 16

typedef struct vh_frame_file_camera {
    char *name;  /* may be NULL */
    char *image; /* resolved path */
    int has_lidar2img, has_intrinsics, has_extrinsics;
    float lidar2img[16], intrinsics[16], extrinsics[16];
} vh_frame_file_camera;

typedef struct vh_frame_file_entry {
    long line;                 /* in the file, from 1 */
    char *image;               /* resolved path, or NULL */
    char *vision_tokens;       /* resolved path, or NULL */
    char *instruction;         /* or NULL */
    char *unnorm_key;          /* or NULL */
    int command;               /* -1: not given */
    char *noise_file;          /* resolved path, or NULL */
    float *noise;              /* an inline "noise" array, or NULL */
    uint32_t n_noise;
    int has_timestamp, has_sequence, has_tag, has_stream;
    int64_t timestamp_ns;
    uint64_t sequence, tag, stream;
    uint32_t n_cameras;
    vh_frame_file_camera cameras[VH_FRAME_FILE_MAX_CAMERAS];
    int has_ego_pose, has_can_bus;
    float ego_pose[16], can_bus[18];
} vh_frame_file_entry;

typedef struct vh_frame_file {
    char *path;
    vh_frame_file_entry *entries;
    size_t n_entries;
} vh_frame_file;

/* Read every line of `path` (at most max_entries frames): 0, or -1 with why naming the file and
 * the line (nothing to free then). */
int vh_frame_file_load(const char *path, size_t max_entries, vh_frame_file *out, char *why, size_t why_size);
void vh_frame_file_free(vh_frame_file *ff);

#endif
