/*
 * The public session API (include/vlahybrid/vlahybrid.h): the model and its family's program
 * (lib/family/family.h), the plan, the frame queue and the stage pipeline that drives frames from
 * the queue through the plan's stages.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "family/family.h"
#include "family/model_load.h"
#include "pipeline/frame_runner.h"
#include "pipeline/pass_batch.h"
#include "pipeline/stage_pipeline.h"
#include "plan/plan.h"
#include "queue/frame_queue.h"
#include "session/create_progress.h"
#include "session/frame_copy.h"
#include "session/session_access.h"
#include "util/clock.h"
#include "util/cpu_list.h"
#include "util/knobs.h"
#include "util/log.h"
#include "util/thread_start.h"
#include "util/trace.h"

#define MAX_WARMUP_FRAMES 64

struct vh_session {
    vh_logger log;
    vh_model *model;
    vh_program *program;               /* the model family's state for this session */
    vh_program_shape shape;            /* what its frames are: action size, passes, context */
    vh_plan plan;                      /* all zero until made: destroying it is then a no-op */
    vh_job_context jobs;               /* what every frame job shares */
    uint32_t max_context;
    vh_frame_queue queue;
    int queue_ready;
    vh_stage_pipeline *pipeline;
    vh_trace *trace;

    uint32_t deadline_ms;              /* the session's deadline (0: none) */
    vh_queue_policy policy;

    pthread_mutex_t error_lock;        /* guards last_error */
    vh_error last_error;
    atomic_int shut;                   /* vh_session_shutdown has begun: calls return VH_ERR_SHUTDOWN */
    pid_t pid;                         /* the process that created it: a fork()ed child gets VH_ERR_FORKED */
    int created;                       /* create succeeded: destroy writes the trace (else discards it) */
};

static _Thread_local char thread_session_error[VH_ERROR_MESSAGE_SIZE];

/* The session's last error and the log (a failed call, or a frame's failure from the pipeline's
 * threads). A full queue under VH_QUEUE_REJECT or a frame already started when cancelled is an
 * everyday outcome, not an error: logged at debug level. */
static void remember_error(vh_session *s, const vh_error *err)
{
    pthread_mutex_lock(&s->error_lock);
    s->last_error = *err;
    pthread_mutex_unlock(&s->error_lock);
    vh_log(&s->log, err->status == VH_ERR_BUSY || err->status == VH_ERR_SHUTDOWN ? VH_LOG_DEBUG : VH_LOG_ERROR, "%s",
           err->message);
}

/* Record a failed call: the session's last error, the thread's vh_last_error(), the log. */
static vh_status report(vh_session *s, const vh_error *err)
{
    vh_error_publish_thread(err);
    if (s) remember_error(s, err);
    return err->status;
}

static vh_status fail(vh_session *s, vh_status status, const char *fmt, const char *arg)
{
    vh_error err;
    vh_error_set(&err, status, fmt, arg);
    return report(s, &err);
}

/* A child of fork() holds a copy of the session without its threads (only the forking thread
 * goes on in a child), with its locks in whatever state they were: it touches nothing of it and
 * returns VH_ERR_FORKED at once (getpid() is a cheap system call). */
static int forked(const vh_session *s)
{
    return getpid() != s->pid;
}

static vh_status fail_forked(const vh_session *s, const char *call)
{
    vh_error err;
    vh_error_set(&err, VH_ERR_FORKED, "%s: the session was created in process %ld and this is process %ld, a child "
                 "of fork(): only the creating process can use it (create a session in the child)", call,
                 (long)s->pid, (long)getpid());
    vh_error_publish_thread(&err);
    return VH_ERR_FORKED;
}

#define CHECK_SESSION(s, call)                                                     \
    do {                                                                           \
        if (!(s)) return fail(NULL, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "session"); \
        if (forked(s)) return fail_forked((s), (call));                            \
    } while (0)

/* After vh_session_shutdown every call but the getters and destroy is refused at once. */
static int is_shut(vh_session *s)
{
    return atomic_load(&s->shut) != 0;
}

#define SHUT_MESSAGE "the session was shut down (vh_session_shutdown)%s"

/* A caller's struct is usable when it is at least as long as this version's and whatever lies
 * beyond what this version knows is zero (a newer header's fields left at their defaults). */
#define MAX_STRUCT_SIZE 65536u /* far beyond any future version; bounds the tail scan below */

static int struct_size_ok(const void *s, size_t caller_size, size_t known_size)
{
    if (caller_size < known_size || caller_size > MAX_STRUCT_SIZE) return 0;
    const unsigned char *tail = (const unsigned char *)s + known_size;
    for (size_t i = 0; i < caller_size - known_size; i++)
        if (tail[i]) return 0;
    return 1;
}

/* The caller's struct_size for a struct whose 0.1.0 and 0.2.0 layouts end at `v01_size` and
 * `v02_size`: one of those exactly, or the current one (and beyond, zero-filled); sizes in between
 * were never released. */
static size_t known_struct_size(size_t caller_size, size_t v01_size, size_t v02_size, size_t current_size)
{
    return caller_size == v01_size || caller_size == v02_size ? caller_size : current_size;
}

static void record_frame_error(void *user, const vh_error *err)
{
    remember_error(user, err);
}

/* Backends named: "a,b" is two. */
static uint32_t count_backends(const char *backends)
{
    uint32_t n = 1;
    for (const char *c = backends; c && *c; c++) n += *c == ',';
    return n;
}

/* Warm-up frames when the caller asks for none in particular: a GPU stage needs three (kernels
 * chosen and timed on first use; a vision graph captured on second use, replayed from the
 * third), packed passes twice their frames in flight (the passes' row counts settle only after a
 * round of frames has entered and left); CPU backends need one (oneDNN primitives, pools). */
static uint32_t default_warmup_frames(const vh_session *s, vh_execution_mode mode, uint32_t in_flight)
{
    int has_gpu = 0;
    for (uint32_t i = 0; i < s->plan.n_stages; i++) has_gpu |= s->plan.stages[i].device == VH_DEVICE_GPU;
    if (!has_gpu) return 1;
    uint32_t n = mode == VH_EXECUTION_PACKED ? 2 * in_flight : 3 + (in_flight > 1 ? in_flight : 0);
    return n < MAX_WARMUP_FRAMES ? n : MAX_WARMUP_FRAMES;
}

/* Run n frames through the whole path and forget them: the first real frame then finds every
 * plan, kernel choice, graph and cache made. They take no frame ids, leave no statistics and no
 * trace. Runs before anyone else has the session. */
static vh_status warm_up(vh_session *s, uint32_t n, vh_create_progress *progress, vh_error *err)
{
    if (n == 0) return VH_OK;
    vh_frame frame;
    const int has = s->model->family->warmup_input(s->program, &frame);
    if (has < 0) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (warm-up frame)");
    if (has == 0) { /* such a model fails frames one by one, not at create: nothing to warm up */
        vh_log_warn(&s->log, "no warm-up: the model's context of %u positions cannot hold a typical frame",
                    s->max_context);
        return VH_OK;
    }
    /* the phase begins: its first frame may take long (kernels chosen, graphs captured) */
    vh_status st = vh_create_progress_report(progress, "warm-up", VH_PROGRESS_WARMUP, err);
    if (st) return st;
    vh_frame_queue_set_policy(&s->queue, VH_QUEUE_BLOCK);
    uint32_t submitted = 0;
    while (submitted < n && st == VH_OK) {
        vh_frame_record *rec = vh_frame_copy(&frame);
        uint64_t id;
        if (!rec) st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (warm-up frame)");
        else if ((st = vh_frame_queue_submit(&s->queue, rec, &id, err))) vh_frame_record_free(rec);
        else submitted++;
    }
    for (uint32_t i = 0; i < submitted; i++) {
        vh_action a;
        vh_action_init(&a);
        vh_frame_queue_poll(&s->queue, &a, sizeof a, -1);
        if (a.status != VH_OK && st == VH_OK)
            st = vh_error_set(err, a.status, "warm-up frame failed: %s", a.message);
        if (st == VH_OK) /* a cancel here still waits for the frames submitted */
            st = vh_create_progress_report(progress, "warm-up",
                                           VH_PROGRESS_WARMUP + (1 - VH_PROGRESS_WARMUP) * (i + 1) / submitted, err);
    }
    vh_frame_queue_set_policy(&s->queue, s->policy);
    vh_frame_queue_reset(&s->queue, 1, 1);
    vh_stage_pipeline_clear_stats(s->pipeline);
    vh_trace_forget(s->trace);
    return st;
}

/* The plan's hook as each stage's executor makes its weights resident: "backend NAME", moving
 * through that stage's share of the backends' part as the backend reports. */
static vh_status report_executor(void *user, uint32_t stage, uint32_t n_stages, const char *backend, double done,
                                 vh_error *err)
{
    char name[80];
    snprintf(name, sizeof name, "backend %s", backend);
    const double share = (VH_PROGRESS_STAGES - VH_PROGRESS_BACKENDS) / n_stages;
    return vh_create_progress_report(user, name, VH_PROGRESS_BACKENDS + share * (stage + done), err);
}

static vh_status load_session(vh_session *s, const vh_session_params *p, vh_error *err)
{
    vh_status st;
    vh_create_progress progress;
    vh_create_progress_init(&progress, p->progress_fn, p->progress_user);
    if ((st = vh_create_progress_report(&progress, "loading weights", VH_PROGRESS_WEIGHTS, err))) return st;
    if ((st = vh_model_load(p->model_path, &s->model, err))) return st;
    if ((st = vh_create_progress_report(&progress, "preparing the model", VH_PROGRESS_PROGRAM, err))) return st;
    if ((st = s->model->family->program_create(s->model, p, &s->program, &s->shape, err))) return st;
    s->max_context = s->shape.max_context;
    const uint32_t passes = s->shape.passes_per_frame;
    const uint32_t segments = s->shape.segments_per_frame ? s->shape.segments_per_frame : 1;
    if (segments > VH_PASS_MAX_SEGMENTS)
        return vh_error_set(err, VH_ERR_INTERNAL, "the model's frames have %u segments (at most %d)", segments,
                            VH_PASS_MAX_SEGMENTS);

    const char *trace_path = p->trace_path ? p->trace_path : vh_knob_trace_path();
    if (trace_path && *trace_path && (st = vh_trace_open(trace_path, &s->trace, err))) return st;

    const uint32_t n_backends = count_backends(p->backends);
    uint32_t in_flight = 1; /* serial, or a pipeline of one stage */
    if (p->execution_mode == VH_EXECUTION_PACKED) /* two stages: two new frames a pass, each staged a pass ahead */
        in_flight = p->frames_in_flight ? p->frames_in_flight : n_backends > 1 ? 2 * (passes + 1) : passes;
    else if (p->execution_mode == VH_EXECUTION_PIPELINE && n_backends > 1)
        in_flight = p->frames_in_flight ? p->frames_in_flight : n_backends;
    if (in_flight > VH_MAX_FRAMES_IN_FLIGHT) in_flight = VH_MAX_FRAMES_IN_FLIGHT;
    const uint32_t zone = p->split_zone >= 0 ? (uint32_t)p->split_zone : p->llm_split >= 0 ? 0 : 2;
    /* packed: a frame stays `passes` passes, so in_flight frames admit up to in_flight / passes a
     * pass (an upper bound with two stages, where it is staged one pass more) */
    const uint32_t per_pass = p->execution_mode == VH_EXECUTION_PACKED ? (in_flight + passes - 1) / passes : 1;
    vh_plan_request req = {.backends = p->backends, .plugin_path = p->plugin_path, .n_threads = p->n_threads,
                           .max_context = s->max_context, .max_sequences = in_flight * segments,
                           .segments_per_frame = segments, .images_per_pass = per_pass,
                           .images_per_frame = s->shape.images_per_frame,
                           .gpu_memory_budget = p->gpu_memory_budget, .llm_split = p->llm_split, .split_zone = zone,
                           .action_tokens = passes, .log = &s->log,
                           .executor_progress = report_executor, .executor_progress_user = &progress};
    if ((st = vh_create_progress_report(&progress, "loading backends", VH_PROGRESS_BACKENDS, err))) return st;
    if ((st = vh_plan_create(s->model, &req, &s->plan, err))) return st;
    if ((st = vh_create_progress_report(&progress, "starting stages", VH_PROGRESS_STAGES, err))) return st;
    for (uint32_t i = 0; i < s->plan.n_stages; i++) {
        const vh_backend_iface *be = s->plan.stages[i].plugin->iface;
        const uint32_t needed = vh_pass_batch_options(s->shape.pass_uses);
        if (needed & ~be->batch_options)
            return vh_error_set(err, VH_ERR_UNSUPPORTED, "backend '%s' cannot run this model's frames: they need "
                                "batch options 0x%x it lacks (hidden rows 0x1, segment embeddings 0x2, plans 0x4, LoRA sets "
                                "per segment 0x8, plans on chosen segments 0x10)",
                                be->name, needed & ~be->batch_options);
    }
    vh_job_context_init(&s->jobs, s->model, &s->plan, s->program, s->max_context);
    s->jobs.segments_per_frame = segments;
    s->jobs.trace = s->trace;
    if ((st = vh_frame_queue_init(&s->queue, p->queue_capacity, p->queue_policy, err))) return st;
    s->queue_ready = 1;
    vh_pipeline_config pc = {.ctx = &s->jobs, .frames = &s->queue, .mode = p->execution_mode,
                             .frames_in_flight = in_flight,
                             .action_tokens = passes,
                             .on_frame_error = record_frame_error, .user = s};
    if ((st = vh_stage_pipeline_start(&pc, &s->pipeline, err))) return st;
    const uint32_t n_warmup = p->warmup_frames >= 0 ? (uint32_t)p->warmup_frames
                                                     : default_warmup_frames(s, p->execution_mode, in_flight);
    const int64_t warm_start = vh_now_ns();
    if ((st = warm_up(s, n_warmup, &progress, err))) return st;
    /* only now: warm-up frames are not the caller's (the workers are idle; the queue orders this) */
    s->jobs.vision_tokens_fn = p->vision_tokens_fn;
    s->jobs.vision_tokens_user = p->vision_tokens_user;
    if ((st = vh_create_progress_report(&progress, "ready", 1.0, err))) return st;

    char backends[128];
    vh_plan_describe(&s->plan, backends, sizeof backends);
    vh_log_info(&s->log, "session ready: %s (%s), %u LLM layers, backend %s, unnorm_key '%s', %u warm-up frames "
                "(%.1f ms)", p->model_path, s->model->family->name, s->model->desc.llm.n_layers, backends,
                s->shape.label, n_warmup,
                (vh_now_ns() - warm_start) / 1e6);
    if (s->plan.n_stages == 2) {
        static const char *const how[] = {"", "given", "the most the GPU memory budget holds", "balanced by measured costs"};
        vh_log_info(&s->log, "split: %u of %u LLM blocks on %s (%s), zone %u..%u, %s, %u frames in flight",
                    s->plan.llm_split, s->plan.n_llm_layers, s->plan.stages[0].plugin->iface->name,
                    how[s->plan.split_source], s->plan.split_min, s->plan.split_max,
                    p->execution_mode == VH_EXECUTION_PACKED ? "packed" : in_flight > 1 ? "pipelined" : "serial",
                    in_flight);
        if (s->plan.split_source == VH_SPLIT_BALANCED)
            vh_log_info(&s->log, "measured per frame: stage 0 fixed %.2f ms + %.3f ms a block, stage 1 fixed %.2f ms + "
                        "%.3f ms a block", s->plan.costs.fixed_ns[0] / 1e6, s->plan.costs.block_ns[0] / 1e6,
                        s->plan.costs.fixed_ns[1] / 1e6, s->plan.costs.block_ns[1] / 1e6);
    }
    return VH_OK;
}

/* vh_session_create's work in a thread of its own, started on the cpu_affinity CPUs: every thread
 * the session starts (its stage threads, the CPU backends' pools) inherits them, and the CPU
 * backends place their threads within them; the caller's thread is never re-pinned. */
typedef struct load_call {
    vh_session *s;
    const vh_session_params *p;
    vh_error *err;
    vh_status st;
} load_call;

static void *load_thread_main(void *arg)
{
    load_call *c = arg;
    c->st = load_session(c->s, c->p, c->err);
    return NULL;
}

static vh_status load_on_cpus(vh_session *s, const vh_session_params *p, vh_error *err)
{
    if (!p->cpu_affinity || !*p->cpu_affinity) return load_session(s, p, err);
    cpu_set_t cpus;
    vh_status st = vh_cpu_list_parse(p->cpu_affinity, &cpus, err);
    if (st) return st;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "pthread_attr_init failed");
    load_call call = {.s = s, .p = p, .err = err, .st = VH_OK};
    pthread_t thread;
    int rc = pthread_attr_setaffinity_np(&attr, sizeof cpus, &cpus);
    if (rc == 0) rc = vh_thread_start(&thread, &attr, load_thread_main, &call, "vh-create");
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return vh_error_set(err, rc == EINVAL ? VH_ERR_INVALID_ARGUMENT : VH_ERR_OUT_OF_MEMORY,
                            "cpu_affinity \"%s\": cannot start a thread on those CPUs (%s)", p->cpu_affinity,
                            rc == EINVAL ? "none of them is usable by this process" : "out of resources");
    pthread_join(thread, NULL);
    return call.st;
}

/* A failed vh_session_create: the thread's last error, and the caller's log callback if any. */
static vh_status create_failed(const vh_logger *log, vh_status status, const char *fmt, const char *arg)
{
    vh_error err;
    vh_error_set(&err, status, fmt, arg);
    vh_error_publish_thread(&err);
    vh_log_error(log, "%s", err.message);
    return status;
}

vh_status vh_session_create(const vh_session_params *params, vh_session **session)
{
    if (!session) return fail(NULL, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "session");
    *session = NULL;
    if (!params) return fail(NULL, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "params");
    /* a caller built against the 0.1 header passes the shorter layout: its fields over the defaults */
    const size_t v03_size = offsetof(vh_session_params, progress_fn); /* 0.3.0 ended at seed */
    const size_t v05_size = offsetof(vh_session_params, vision_tokens_fn); /* 0.4.0, 0.5.0 */
    const size_t known = params->struct_size == v03_size || params->struct_size == v05_size
                             ? params->struct_size
                             : known_struct_size(params->struct_size, offsetof(vh_session_params, llm_split),
                                                 offsetof(vh_session_params, seed), sizeof *params);
    if (!struct_size_ok(params, params->struct_size, known))
        return fail(NULL, VH_ERR_STRUCT_SIZE, "%s: struct_size is wrong; call vh_session_params_init first",
                    "vh_session_params");
    vh_session_params p;
    vh_session_params_init(&p);
    memcpy(&p, params, known);
    p.struct_size = sizeof p;
    const vh_logger log = {.fn = p.log_fn, .user = p.log_user, .level = p.log_level};
    if (!p.model_path || !*p.model_path)
        return create_failed(&log, VH_ERR_INVALID_ARGUMENT, "%s is not set", "model_path");
    if (p.queue_capacity == 0 || p.queue_capacity > 1u << 20)
        return create_failed(&log, VH_ERR_INVALID_ARGUMENT, "%s must be in [1, 1048576]", "queue_capacity");
    if (p.queue_policy != VH_QUEUE_DROP_OLDEST && p.queue_policy != VH_QUEUE_REJECT && p.queue_policy != VH_QUEUE_BLOCK)
        return create_failed(&log, VH_ERR_INVALID_ARGUMENT, "%s is not a vh_queue_policy", "queue_policy");
    if (p.n_threads < 0 || p.n_threads > 4096)
        return create_failed(&log, VH_ERR_INVALID_ARGUMENT, "%s must be in [0, 4096]", "n_threads");
    if (p.decode_positions != VH_DECODE_POSITIONS_CONTIGUOUS && p.decode_positions != VH_DECODE_POSITIONS_OPENVLA_HF440)
        return create_failed(&log, VH_ERR_INVALID_ARGUMENT, "%s is not a vh_decode_positions", "decode_positions");
    if (p.execution_mode != VH_EXECUTION_PIPELINE && p.execution_mode != VH_EXECUTION_SERIAL &&
        p.execution_mode != VH_EXECUTION_PACKED)
        return create_failed(&log, VH_ERR_INVALID_ARGUMENT, "%s is not a vh_execution_mode", "execution_mode");
    if (p.frames_in_flight > VH_MAX_FRAMES_IN_FLIGHT)
        return create_failed(&log, VH_ERR_INVALID_ARGUMENT, "%s must be in [0, 32]", "frames_in_flight");
    if (p.llm_split < -1 || p.split_zone < -1 || p.split_zone > 4096)
        return create_failed(&log, VH_ERR_INVALID_ARGUMENT, "%s", "llm_split must be >= -1 and split_zone in [-1, 4096]");
    if (p.warmup_frames < -1 || p.warmup_frames > MAX_WARMUP_FRAMES)
        return create_failed(&log, VH_ERR_INVALID_ARGUMENT, "%s must be in [-1, 64]", "warmup_frames");
    if (p.deadline_ms > 3600000u)
        return create_failed(&log, VH_ERR_INVALID_ARGUMENT, "%s must be in [0, 3600000] (an hour)", "deadline_ms");

    vh_session *s = calloc(1, sizeof *s);
    if (!s) return create_failed(&log, VH_ERR_OUT_OF_MEMORY, "out of memory%s", "");
    s->log = log;
    s->deadline_ms = p.deadline_ms;
    s->policy = p.queue_policy;
    pthread_mutex_init(&s->error_lock, NULL);
    s->pid = getpid();
    vh_error err;
    vh_error_clear(&err);
    vh_status st = load_on_cpus(s, &p, &err);
    if (st) {
        vh_log_error(&s->log, "%s", err.message);
        vh_error_publish_thread(&err);
        vh_session_destroy(s);
        return st;
    }
    s->created = 1;
    *session = s;
    return VH_OK;
}

void vh_session_destroy(vh_session *s)
{
    if (!s) return;
    if (forked(s)) { /* the parent's threads own it: nothing released, VH_ERR_FORKED in vh_last_error */
        fail_forked(s, "vh_session_destroy");
        return;
    }
    if (s->queue_ready) vh_frame_queue_close(&s->queue);
    vh_stage_pipeline_stop(s->pipeline); /* frames in flight finish first */
    if (s->queue_ready) vh_frame_queue_destroy(&s->queue);
    if (s->trace) { /* a failed create leaves the user's file as it was */
        vh_error err;
        if (vh_trace_close(s->trace, s->created, &err)) vh_log_error(&s->log, "%s", err.message);
    }
    vh_plan_destroy(&s->plan);
    if (s->program) s->model->family->program_free(s->program);
    vh_model_free(s->model);
    pthread_mutex_destroy(&s->error_lock);
    free(s);
}

vh_status vh_session_shutdown(vh_session *s)
{
    CHECK_SESSION(s, "vh_session_shutdown");
    if (!atomic_exchange(&s->shut, 1)) vh_log_debug(&s->log, "shutdown: waking every waiting call");
    vh_frame_queue_shutdown(&s->queue); /* every caller waits until the frames started are answered */
    return VH_OK;
}

vh_status vh_submit_frame(vh_session *s, const vh_frame *frame, uint64_t *frame_id)
{
    CHECK_SESSION(s, "vh_submit_frame");
    if (is_shut(s)) return fail(s, VH_ERR_SHUTDOWN, SHUT_MESSAGE, "");
    if (!frame) return fail(s, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "frame");
    /* 0.1.0 .. 0.5.0 callers pass the struct as it ended then */
    const size_t known = frame->struct_size == offsetof(vh_frame, unnorm_key) ||
                                 frame->struct_size == offsetof(vh_frame, stream) /* 0.4.0, 0.5.0 */
                             ? frame->struct_size
                             : known_struct_size(frame->struct_size, offsetof(vh_frame, sequence),
                                                 offsetof(vh_frame, n_cameras), sizeof *frame);
    if (!struct_size_ok(frame, frame->struct_size, known))
        return fail(s, VH_ERR_STRUCT_SIZE, "%s: struct_size is wrong; call vh_frame_init first", "vh_frame");
    vh_frame f; /* the caller's fields over the defaults of the ones its header lacks */
    vh_frame_init(&f);
    memcpy(&f, frame, known);
    frame = &f;
    /* what the model needs (the family), then what every frame must be (sizes, counts, numbers) */
    vh_error err;
    vh_status st = s->model->family->check_frame(s->program, frame, &err);
    if (!st) st = vh_frame_check_structure(frame, &err);
    if (st) return report(s, &err);

    vh_frame_record *rec = vh_frame_copy(frame);
    if (!rec) return fail(s, VH_ERR_OUT_OF_MEMORY, "out of memory copying the frame%s", "");
    rec->result.tag = frame->tag;
    rec->result.timestamp_ns = frame->timestamp_ns;
    rec->result.sequence = frame->sequence;
    rec->result.deadline_ns = frame->deadline_ns ? frame->deadline_ns
                              : s->deadline_ms ? rec->result.submitted_ns + (int64_t)s->deadline_ms * 1000000 : 0;

    uint64_t id = 0;
    st = vh_frame_queue_submit(&s->queue, rec, &id, &err);
    if (st) {
        vh_frame_record_free(rec);
        return report(s, &err);
    }
    if (frame_id) *frame_id = id;
    return VH_OK;
}

vh_status vh_poll_action(vh_session *s, vh_action *action, int32_t timeout_ms)
{
    CHECK_SESSION(s, "vh_poll_action");
    if (is_shut(s)) return fail(s, VH_ERR_SHUTDOWN, SHUT_MESSAGE, "");
    if (!action) return fail(s, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "action");
    const size_t caller_size = action->struct_size;
    /* 0.1.0, 0.2.0 and 0.3.0 / 0.4.0 callers (no message) pass the struct as it ended then */
    const size_t known = caller_size == offsetof(vh_action, message)
                             ? caller_size
                             : known_struct_size(caller_size, offsetof(vh_action, sequence),
                                                 offsetof(vh_action, kind), sizeof *action);
    if (!struct_size_ok(action, caller_size, known))
        return fail(s, VH_ERR_STRUCT_SIZE, "%s: struct_size is wrong; call vh_action_init first", "vh_action");
    vh_status st = vh_frame_queue_poll(&s->queue, action, known, timeout_ms);
    action->struct_size = caller_size;
    if (st == VH_ERR_SHUTDOWN) return fail(s, st, SHUT_MESSAGE, " while polling");
    if (st == VH_ERR_TIMEOUT) { /* an everyday outcome: the thread's message only, not the session's */
        vh_error err;
        vh_error_set(&err, st, timeout_ms > 0 ? "no action within %ld ms" : "no action ready (timeout %ld ms)",
                     (long)timeout_ms);
        vh_error_publish_thread(&err);
    }
    return st;
}

vh_status vh_session_cancel(vh_session *s, uint64_t frame_id)
{
    CHECK_SESSION(s, "vh_session_cancel");
    if (is_shut(s)) return fail(s, VH_ERR_SHUTDOWN, SHUT_MESSAGE, "");
    vh_error err;
    vh_status st = vh_frame_queue_cancel(&s->queue, frame_id, &err);
    return st ? report(s, &err) : VH_OK;
}

vh_status vh_session_cancel_pending(vh_session *s, uint32_t *n_cancelled)
{
    CHECK_SESSION(s, "vh_session_cancel_pending");
    if (is_shut(s)) return fail(s, VH_ERR_SHUTDOWN, SHUT_MESSAGE, "");
    uint32_t n = vh_frame_queue_cancel_pending(&s->queue);
    if (n_cancelled) *n_cancelled = n;
    return VH_OK;
}

vh_status vh_session_reset(vh_session *s, uint32_t flags)
{
    CHECK_SESSION(s, "vh_session_reset");
    if (is_shut(s)) return fail(s, VH_ERR_SHUTDOWN, SHUT_MESSAGE, "");
    if (flags & ~VH_RESET_STATISTICS) return fail(s, VH_ERR_INVALID_ARGUMENT, "%s", "unknown vh_session_reset flags");
    const uint64_t episode = vh_frame_queue_reset(&s->queue, (flags & VH_RESET_STATISTICS) != 0, 0);
    if (is_shut(s)) return fail(s, VH_ERR_SHUTDOWN, SHUT_MESSAGE, " during the reset"); /* woke its wait */
    if (flags & VH_RESET_STATISTICS) vh_stage_pipeline_clear_stats(s->pipeline);
    vh_log_debug(&s->log, "reset: episode %llu begins", (unsigned long long)episode);
    return VH_OK;
}

vh_status vh_session_get_stats(vh_session *s, vh_session_stats *stats)
{
    CHECK_SESSION(s, "vh_session_get_stats");
    if (!stats) return fail(s, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "stats");
    const size_t caller_size = stats->struct_size;
    if (!struct_size_ok(stats, caller_size, sizeof *stats))
        return fail(s, VH_ERR_STRUCT_SIZE, "%s: struct_size is wrong; call vh_session_stats_init first",
                    "vh_session_stats");
    vh_frame_stats *frames = malloc(sizeof *frames); /* ~50 KB: not on a caller's possibly small stack */
    if (!frames) return fail(s, VH_ERR_OUT_OF_MEMORY, "out of memory%s", "");
    vh_session_stats out;
    vh_session_stats_init(&out);
    vh_frame_queue_stats(&s->queue, frames, &out.pending, &out.running, &out.unpolled, &out.episode);
    vh_frame_stats_summary(frames, &out);
    free(frames);
    if (vh_stage_pipeline_pass_stats(s->pipeline, &out)) return fail(s, VH_ERR_OUT_OF_MEMORY, "out of memory%s", "");
    memcpy(stats, &out, sizeof out);
    stats->struct_size = caller_size;
    return VH_OK;
}

const char *vh_session_last_error(vh_session *s)
{
    if (!s) return "session is NULL";
    if (forked(s)) {
        fail_forked(s, "vh_session_last_error");
        return vh_last_error();
    }
    pthread_mutex_lock(&s->error_lock);
    memcpy(thread_session_error, s->last_error.message, sizeof thread_session_error);
    pthread_mutex_unlock(&s->error_lock);
    return thread_session_error;
}

vh_status vh_session_get_info(vh_session *s, vh_session_info *info)
{
    CHECK_SESSION(s, "vh_session_get_info");
    if (!info) return fail(s, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "info");
    /* a caller built with the 0.1.0 header has the shorter struct: it gets the fields it knows */
    const size_t known = known_struct_size(info->struct_size, offsetof(vh_session_info, gpu_bytes), sizeof *info, sizeof *info);
    if (!struct_size_ok(info, info->struct_size, known))
        return fail(s, VH_ERR_STRUCT_SIZE, "%s: struct_size is wrong; call vh_session_info_init first",
                    "vh_session_info");
    vh_session_info out;
    vh_session_info_init(&out);
    out.action_dim = s->shape.action_dim;
    out.n_llm_layers = s->model->desc.llm.n_layers;
    out.n_prompt_image_tokens = s->model->desc.n_image_tokens;
    vh_plan_describe(&s->plan, out.backends, sizeof out.backends);
    snprintf(out.unnorm_key, sizeof out.unnorm_key, "%s", s->shape.label);
    out.host_weight_bytes = vh_checkpoint_mapped_bytes(s->model->checkpoint);
    for (uint32_t i = 0; i < s->plan.n_stages; i++) {
        vh_memory_report m = {.struct_size = sizeof m};
        const vh_stage *st = &s->plan.stages[i];
        if (st->plugin->iface->memory(st->executor, &m) == VH_OK) {
            out.backend_weight_bytes += m.weight_bytes;
            out.backend_work_bytes += m.cache_bytes + m.work_bytes;
            if (st->device == VH_DEVICE_GPU) out.gpu_bytes += m.weight_bytes + m.cache_bytes + m.work_bytes;
        }
    }
    vh_stage_pipeline_stats(s->pipeline, &out);
    size_t caller_size = info->struct_size;
    memcpy(info, &out, known);
    info->struct_size = caller_size;
    return VH_OK;
}

/* For the API's functions in other files (session_access.h; vh_session_prompt_ids and
 * vh_session_prompt_rounds are in prompt_rounds.c). */
vh_status vh_session_enter(vh_session *s, const char *call)
{
    CHECK_SESSION(s, call);
    if (is_shut(s)) return fail(s, VH_ERR_SHUTDOWN, SHUT_MESSAGE, "");
    return VH_OK;
}

vh_status vh_session_report(vh_session *s, const vh_error *err) { return report(s, err); }

int vh_session_struct_size_ok(const void *st, size_t caller_size, size_t known_size)
{
    return struct_size_ok(st, caller_size, known_size);
}

const vh_family *vh_session_family(const vh_session *s) { return s->model->family; }

const vh_program *vh_session_program(const vh_session *s) { return s->program; }
