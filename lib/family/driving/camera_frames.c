#include "family/driving/camera_frames.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "family/driving/camera_preprocess.h"
#include "family/driving/petr_math.h"
#include "util/thread_start.h"

/* One stream's (vehicle's) state: its heads' banks and the episode they belong to. */
typedef struct stream_state {
    uint64_t id;
    vh_petr_head_state det, map;
    uint64_t episode;
    uint64_t last_frame;               /* the program's frame count at this stream's last frame */
    int started;                       /* 0: no frame yet in this state */
} stream_state;

/* What the program keeps across frames: the streams seen, made on a stream's first frame, and the
 * position embedding the executor holds (of one rig: recomputed when a frame's rig differs). */
struct vh_camera_stream {
    vh_camera_front fe;
    stream_state streams[VH_CAMERA_MAX_STREAMS];
    uint32_t n_streams;
    uint64_t frames;                   /* camera frames run */
    int have_coords;                   /* cam.pos_embed in the executor is of `lidar2img` */
    float lidar2img[VH_FRONT_END_CAMERAS * 16];
    float *coords;                     /* [image_rows][3 depth_num] */
    const float **inputs;              /* [n_slots] */
};

struct vh_camera_frame {
    float *planes;                     /* [n_cameras][3][S][S] */
    float lidar2img[VH_FRONT_END_CAMERAS * 16]; /* after the image transforms */
    vh_petr_frame frame;
    uint64_t episode, stream;
};

vh_status vh_camera_stream_create(const vh_camera_front *front, vh_camera_stream **out, vh_error *err)
{
    const vh_front_end_config *fe = front->config;
    vh_camera_stream *s = calloc(1, sizeof *s);
    *out = s;
    if (!s) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (the front end's state)");
    s->fe = *front;
    s->coords = malloc(sizeof(float) * fe->heads.image_rows * 3 * fe->position.depth_num);
    s->inputs = calloc(front->n_slots, sizeof *s->inputs);
    if (!s->coords || !s->inputs) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (the front end's state)");
    return VH_OK;
}

void vh_camera_stream_free(vh_camera_stream *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->n_streams; i++) {
        vh_petr_head_state_free(&s->streams[i].det);
        vh_petr_head_state_free(&s->streams[i].map);
    }
    free(s->coords);
    free(s->inputs);
    free(s);
}

vh_status vh_camera_frame_create(const vh_camera_front *front, vh_camera_frame **out, vh_error *err)
{
    const vh_front_end_config *fe = front->config;
    const size_t S = fe->backbone.img_size;
    vh_camera_frame *c = calloc(1, sizeof *c);
    *out = c;
    if (!c || !(c->planes = malloc(sizeof(float) * fe->n_cameras * 3 * S * S)))
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (camera planes)");
    return VH_OK;
}

void vh_camera_frame_free(vh_camera_frame *c)
{
    if (!c) return;
    free(c->planes);
    free(c);
}

static int finite_all(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

vh_status vh_camera_frame_check(const vh_camera_front *front, const vh_frame *f, vh_error *err)
{
    const vh_front_end_config *fe = front->config;
    const char *what = front->frame_name;
    if (f->n_cameras != fe->n_cameras || !f->cameras)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "%s needs its %u camera images (frame->cameras: %u) or its vision "
                            "tokens", what, fe->n_cameras, f->n_cameras);
    for (uint32_t i = 0; i < f->n_cameras; i++)
        if (!f->cameras[i].rgb || !f->cameras[i].width || !f->cameras[i].height)
            return vh_error_set(err, VH_ERR_BAD_FRAME, "frame->cameras[%u] has no pixels", i);
    const size_t n = (size_t)f->n_cameras * 16;
    if (!(f->lidar2img || (f->intrinsics && f->extrinsics)))
        return vh_error_set(err, VH_ERR_BAD_FRAME, "%s from cameras needs each camera's calibration: "
                            "frame->lidar2img, or frame->intrinsics with frame->extrinsics", what);
    if ((f->lidar2img && !finite_all(f->lidar2img, n)) || (f->intrinsics && !finite_all(f->intrinsics, n)) ||
        (f->extrinsics && !finite_all(f->extrinsics, n)))
        return vh_error_set(err, VH_ERR_BAD_FRAME, "a camera's calibration holds a value that is not finite");
    if (!f->ego_pose || !finite_all(f->ego_pose, 16))
        return vh_error_set(err, VH_ERR_BAD_FRAME, "%s from cameras needs frame->ego_pose (finite, LiDAR to world)",
                            what);
    if (!f->can_bus || !finite_all(f->can_bus, VH_CAN_BUS_FLOATS))
        return vh_error_set(err, VH_ERR_BAD_FRAME, "%s from cameras needs frame->can_bus (%d finite floats)", what,
                            VH_CAN_BUS_FLOATS);
    return VH_OK;
}

/* out = a b for 4 x 4 row-major, in double */
static void mat4_mul(const double *a, const double *b, double *out)
{
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
            double acc = 0;
            for (int k = 0; k < 4; k++) acc += a[r * 4 + k] * b[k * 4 + c];
            out[r * 4 + c] = acc;
        }
}

/* Parts a camera is cut into, by output rows, at most. */
#define CAMERA_PARTS_MAX 4

/* One part of one camera's preprocessing (its output rows y0..y1-1), on a thread of its own
 * (prepare_planes). */
typedef struct camera_job {
    const vh_camera_prep *prep;
    const vh_camera_image *cam;
    float *planes;
    uint32_t y0, y1;
    double A[9];                       /* the image transforms as a matrix on K (from K = I) */
    int transform;                     /* this part computes A (a camera's first part) */
    vh_status status;
    vh_error err;
    pthread_t thread;
    int started;
} camera_job;

static void *camera_job_run(void *arg)
{
    camera_job *j = arg;
    vh_error_clear(&j->err);
    j->status = vh_camera_preprocess_rows(j->prep, j->cam->rgb, j->cam->width, j->cam->height, j->cam->stride,
                                          j->planes, j->y0, j->y1, j->transform ? j->A : NULL, &j->err);
    return NULL;
}

/* Every camera's planes and image transform: the cameras at once, each cut into as many parts by
 * output rows as the CPUs allow (parts x cameras <= the calling thread's CPUs, at most
 * CAMERA_PARTS_MAX: 2 on 16 CPUs for six cameras), each part on a thread of its own (started here
 * and joined before it returns: a 1600 x 900 camera is milliseconds of one core; the parts give
 * the same bytes as the whole), the first on the calling thread; a part whose thread does not
 * start runs here too. The threads inherit the calling thread's CPU affinity (the intake
 * thread's: the session's CPUs). The first failing camera's error, in camera order. */
static vh_status prepare_planes(const vh_camera_prep *prep, const vh_frame_input *in, uint32_t n, float *planes,
                                size_t plane, camera_job *jobs, double (*transforms)[9], vh_error *err)
{
    const uint32_t cpus = (uint32_t)vh_thread_cpus();
    uint32_t parts = n && cpus > n ? cpus / n : 1;
    if (parts > CAMERA_PARTS_MAX) parts = CAMERA_PARTS_MAX;
    if (parts > prep->out_h) parts = prep->out_h ? prep->out_h : 1;
    const uint32_t n_jobs = n * parts;
    for (uint32_t i = 0; i < n_jobs; i++) {
        const uint32_t cam = i / parts, part = i % parts;
        jobs[i] = (camera_job){.prep = prep, .cam = &in->cameras[cam], .planes = planes + cam * plane,
                               .y0 = (uint32_t)((uint64_t)prep->out_h * part / parts),
                               .y1 = (uint32_t)((uint64_t)prep->out_h * (part + 1) / parts),
                               .A = {1, 0, 0, 0, 1, 0, 0, 0, 1}, .transform = part == 0};
        if (i > 0) jobs[i].started = vh_thread_start(&jobs[i].thread, NULL, camera_job_run, &jobs[i], "vh-camera") == 0;
    }
    for (uint32_t i = 0; i < n_jobs; i++) {
        if (jobs[i].started) pthread_join(jobs[i].thread, NULL);
        else camera_job_run(&jobs[i]);
    }
    for (uint32_t i = 0; i < n_jobs; i++)
        if (jobs[i].status) {
            if (err) *err = jobs[i].err;
            return jobs[i].status;
        }
    for (uint32_t cam = 0; cam < n; cam++) memcpy(transforms[cam], jobs[cam * parts].A, sizeof transforms[cam]);
    return VH_OK;
}

vh_status vh_camera_frame_prepare(const vh_camera_front *front, vh_camera_frame *c, const vh_frame_input *in,
                                  vh_error *err)
{
    const vh_front_end_config *fe = front->config;
    vh_camera_prep prep = vh_camera_prep_agent();
    prep.out_w = prep.out_h = fe->backbone.img_size;
    const size_t plane = (size_t)3 * prep.out_w * prep.out_h;
    camera_job jobs[VH_FRONT_END_CAMERAS * CAMERA_PARTS_MAX];
    if (fe->n_cameras > VH_FRONT_END_CAMERAS)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%u cameras: the front end takes %d", fe->n_cameras,
                            VH_FRONT_END_CAMERAS);
    double transforms[VH_FRONT_END_CAMERAS][9];
    vh_status st = prepare_planes(&prep, in, fe->n_cameras, c->planes, plane, jobs, transforms, err);
    if (st) return st;
    for (uint32_t i = 0; i < fe->n_cameras; i++) {
        const double *A = transforms[i];
        double K[9];
        double A4[16] = {A[0], A[1], A[2], 0, A[3], A[4], A[5], 0, A[6], A[7], A[8], 0, 0, 0, 0, 1}, src[16], l2i[16];
        if (in->intrinsics && in->extrinsics) { /* the agent's lidar2img: K' (4 x 4) @ lidar2cam */
            const float *k = in->intrinsics + i * 16;
            for (int r = 0; r < 3; r++)
                for (int q = 0; q < 3; q++) K[r * 3 + q] = k[r * 4 + q];
            double K4[16] = {0};
            for (int r = 0; r < 3; r++)
                for (int q = 0; q < 3; q++) {
                    double acc = 0;
                    for (int j = 0; j < 3; j++) acc += A[r * 3 + j] * K[j * 3 + q];
                    K4[r * 4 + q] = acc;
                }
            K4[15] = 1;
            for (int j = 0; j < 16; j++) src[j] = in->extrinsics[i * 16 + j];
            mat4_mul(K4, src, l2i);
        } else {
            for (int j = 0; j < 16; j++) src[j] = in->lidar2img[i * 16 + j];
            mat4_mul(A4, src, l2i);
        }
        for (int j = 0; j < 16; j++) c->lidar2img[i * 16 + j] = (float)l2i[j];
    }
    vh_petr_frame *f = &c->frame;
    memset(f, 0, sizeof *f);
    f->timestamp = (double)in->timestamp_ns * 1e-9;
    memcpy(f->ego_pose, in->ego_pose, sizeof f->ego_pose);
    double inv[16];
    if (!vh_mat4_invert(f->ego_pose, inv))
        return vh_error_set(err, VH_ERR_BAD_FRAME, "frame->ego_pose has no inverse");
    for (int j = 0; j < 16; j++) f->ego_pose_inv[j] = (float)inv[j];
    memcpy(f->can_bus, in->can_bus, sizeof f->can_bus);
    f->command = (float)in->command;
    c->episode = in->episode;
    c->stream = in->stream;
    return VH_OK;
}

/* The stream's next frame as its first: nothing its banks hold now is read again. */
static void stream_restart(stream_state *n)
{
    n->started = 0;
    vh_petr_head_state_restart(&n->det);
    vh_petr_head_state_restart(&n->map);
}

/* Stream `id`'s state, made on its first frame. Past VH_CAMERA_MAX_STREAMS the stream seen least
 * recently gives its place: its memory is dropped, and its next frame starts afresh (as after a gap). */
static vh_status stream_of(vh_camera_stream *s, uint64_t id, stream_state **out, vh_error *err)
{
    s->frames++;
    stream_state *n = NULL;
    for (uint32_t i = 0; i < s->n_streams && !n; i++)
        if (s->streams[i].id == id) n = &s->streams[i];
    if (!n && s->n_streams == VH_CAMERA_MAX_STREAMS) {
        n = &s->streams[0];
        for (uint32_t i = 1; i < s->n_streams; i++)
            if (s->streams[i].last_frame < n->last_frame) n = &s->streams[i];
        n->id = id;
        stream_restart(n);
    }
    if (!n) {
        n = &s->streams[s->n_streams];
        memset(n, 0, sizeof *n);
        n->id = id;
        const vh_camera_front *fe = &s->fe;
        vh_status st = vh_petr_head_state_init(&n->det, &fe->graph->det, &fe->config->heads, fe->n_slots, err);
        if (!st) st = vh_petr_head_state_init(&n->map, &fe->graph->map, &fe->config->heads, fe->n_slots, err);
        if (st) {
            vh_petr_head_state_free(&n->det);
            vh_petr_head_state_free(&n->map);
            return st;
        }
        s->n_streams++;
    }
    n->last_frame = s->frames;
    *out = n;
    return VH_OK;
}

/* The heads' runs through the first stage (vh_petr_runner over vh_vision_runner). */
typedef struct head_runner {
    const vh_vision_runner *r;
    uint32_t n_slots;
} head_runner;

static vh_status head_run(void *user, uint32_t first, uint32_t n, const float *const *inputs, vh_error *err)
{
    const head_runner *h = user;
    vh_batch b = {.struct_size = sizeof b, .options = VH_BATCH_SLOT_INPUTS, .n_frames = 1,
                  .n_slot_inputs = h->n_slots, .slot_inputs = inputs};
    return h->r->run(h->r->user, &b, first, n, err);
}

static vh_status head_read(void *user, uint32_t slot, float *dst, size_t n, vh_error *err)
{
    const head_runner *h = user;
    return h->r->read_slot(h->r->user, slot, 0, dst, n, err);
}

vh_status vh_camera_frame_run(const vh_camera_front *front, vh_camera_stream *s, const vh_camera_frame *c,
                              const vh_vision_runner *r, float *tokens, vh_error *err)
{
    const vh_front_end_config *fe = front->config;
    const vh_front_end_graph *g = front->graph;
    const uint32_t n_slots = front->n_slots;
    const size_t S = fe->backbone.img_size, plane = 3 * S * S;
    /* the ViT on the six cameras */
    const float *planes[VH_FRONT_END_CAMERAS];
    for (uint32_t i = 0; i < fe->n_cameras; i++) planes[i] = c->planes + i * plane;
    vh_batch vit = {.struct_size = sizeof vit, .n_images = fe->n_cameras, .pixels = planes};
    vh_status st = r->run(r->user, &vit, g->first_block, g->vit_blocks, err);
    if (st) return st;
    /* the position embedding: again only when the rig's lidar2img changed */
    const size_t n_mat = (size_t)fe->n_cameras * 16;
    if (!s->have_coords || memcmp(s->lidar2img, c->lidar2img, sizeof(float) * n_mat)) {
        const uint32_t grid = fe->backbone.img_size / fe->backbone.patch_size;
        if ((st = vh_petr_position_coords(&fe->position, fe->n_cameras, c->lidar2img, grid, grid, s->coords, err)))
            return st;
        memset(s->inputs, 0, sizeof *s->inputs * n_slots);
        s->inputs[g->coords] = s->coords;
        vh_batch pos = {.struct_size = sizeof pos, .options = VH_BATCH_SLOT_INPUTS, .n_frames = 1,
                        .n_slot_inputs = n_slots, .slot_inputs = s->inputs};
        s->have_coords = 0;
        if ((st = r->run(r->user, &pos, g->position_block, 1, err))) return st;
        memcpy(s->lidar2img, c->lidar2img, sizeof(float) * n_mat);
        s->have_coords = 1;
    }
    /* the heads, their banks this stream's; a new episode starts them afresh */
    stream_state *ss = NULL;
    if ((st = stream_of(s, c->stream, &ss, err))) return st;
    vh_petr_frame f = c->frame;
    f.same_episode = ss->started && ss->episode == c->episode;
    ss->episode = c->episode;
    ss->started = 1;
    const head_runner h = {r, n_slots};
    const vh_petr_runner pr = {.user = (void *)&h, .run = head_run, .read = head_read, .n_slots = n_slots};
    const uint32_t det_rows = vh_petr_head_token_rows(&g->det);
    st = vh_petr_head_frame(&g->det, &fe->heads, &ss->det, &pr, &f, NULL, NULL, tokens, err);
    if (!st) st = vh_petr_head_frame(&g->map, &fe->heads, &ss->map, &pr, &f, NULL, NULL,
                                     tokens + (size_t)det_rows * g->det.n.out_dims, err);
    /* a frame that failed midway may leave its banks half-updated: the stream's next frame starts afresh */
    if (st) stream_restart(ss);
    return st;
}
