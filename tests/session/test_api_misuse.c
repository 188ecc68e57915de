/* The public API (include/vlahybrid/vlahybrid.h) with bad input and awkward use, through the
 * functions a program sees, on the bundled tiny model with the cpu_generic backend:
 *   - a table of misuse cases (NULL pointers, struct_size wrong, bad session parameters, bad
 *     frames): each returns the documented status, leaves a message naming what was wrong in
 *     vh_last_error() (and in vh_session_last_error() when a session is involved), and queues
 *     nothing;
 *   - inputs at the edges that must be accepted (struct_size larger with a zero tail, 1x1 and
 *     16384-pixel frames, padded strides, invalid UTF-8, an 8192-byte instruction that does not
 *     fit the context);
 *   - every queue policy with real frames, destroy with frames pending, two threads at once;
 *   - silence on stdout/stderr without a log callback, and delivery with one.
 *
 * Frames are held up deterministically by the log callback: the worker logs a frame's failure
 * from its own thread (a too-long instruction fails after the vision stage), and the callback
 * blocks there until the test releases it, so the queue's state is known while it waits. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#define MODEL_A_DIR "models/openvla-tiny"
#define MODEL_B_DIR "tests/fixtures/models/openvla-tiny-b"
#define MODEL_A_SHARD_BYTES (4566048u + 4304880u) /* the two shard files */
#define MAX_INSTRUCTION 8192
#define WAIT_MS 60000 /* generous: valgrind runs this too */

static char *model_a, *model_b; /* absolute paths, set in main */

/* ---------------------------------------------------------------------------------------------
 * Helpers
 */
static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

/* An RGB image of w x h with `stride` bytes a row (padding bytes 0xEE); malloc'd. */
static uint8_t *make_rgb(uint32_t w, uint32_t h, size_t stride, uint32_t seed)
{
    if (!stride) stride = (size_t)w * 3;
    uint8_t *rgb = malloc(stride * h);
    ck_assert_ptr_nonnull(rgb);
    memset(rgb, 0xEE, stride * h);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t c = 0; c < 3; c++)
                rgb[y * stride + x * 3 + c] = (uint8_t)(x * 7 + y * 13 + c * 50 + seed * 31 + (x * y) % 17);
    return rgb;
}

/* `bytes` bytes of "a a a ...": about bytes / 2 tokens, far beyond the prompt budget when long. */
static char *long_instruction(size_t bytes)
{
    char *s = malloc(bytes + 1);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < bytes; i++) s[i] = i % 2 ? ' ' : 'a';
    s[bytes] = '\0';
    return s;
}

/* The log callback: records every message and, when armed, blocks the worker thread in its
 * report of a failed frame until released. */
typedef struct log_capture {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    char text[32768];
    size_t used;
    int n_messages, n_by_level[4], n_from_other_threads;
    pthread_t test_thread;
    int stall_armed, stalled, release;
} log_capture;

static void capture_init(log_capture *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->test_thread = pthread_self();
}

static void capture_free(log_capture *c)
{
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
}

static void capture_log(void *user, vh_log_level level, const char *message)
{
    log_capture *c = user;
    pthread_mutex_lock(&c->lock);
    int n = snprintf(c->text + c->used, sizeof c->text - c->used, "[%d] %s\n", (int)level, message);
    if (n > 0) c->used = c->used + (size_t)n < sizeof c->text ? c->used + (size_t)n : sizeof c->text - 1;
    c->n_messages++;
    if ((int)level >= 0 && (int)level < 4) c->n_by_level[level]++;
    int other = !pthread_equal(pthread_self(), c->test_thread);
    c->n_from_other_threads += other;
    if (c->stall_armed && other && level == VH_LOG_ERROR && !strncmp(message, "frame ", 6)) {
        c->stall_armed = 0;
        c->stalled = 1;
        pthread_cond_broadcast(&c->cond);
        while (!c->release) pthread_cond_wait(&c->cond, &c->lock);
        c->stalled = 0;
        c->release = 0;
    }
    pthread_mutex_unlock(&c->lock);
}

static int capture_contains(log_capture *c, const char *needle)
{
    pthread_mutex_lock(&c->lock);
    int found = strstr(c->text, needle) != NULL;
    pthread_mutex_unlock(&c->lock);
    return found;
}

static void capture_release(log_capture *c)
{
    pthread_mutex_lock(&c->lock);
    c->release = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

typedef struct delayed_release {
    log_capture *capture;
    int ms;
} delayed_release;

static void *release_later(void *arg)
{
    delayed_release *d = arg;
    sleep_ms(d->ms);
    capture_release(d->capture);
    return NULL;
}

/* Parameters for model A on cpu_generic, one thread, the log into `capture` (may be NULL). */
static void base_params(vh_session_params *p, log_capture *capture)
{
    vh_session_params_init(p);
    p->model_path = model_a;
    p->backends = "cpu_generic";
    p->n_threads = 1;
    if (capture) {
        p->log_fn = capture_log;
        p->log_user = capture;
        p->log_level = VH_LOG_DEBUG;
    }
}

static vh_session *open_session(uint32_t capacity, vh_queue_policy policy, log_capture *capture)
{
    vh_session_params p;
    base_params(&p, capture);
    p.queue_capacity = capacity;
    p.queue_policy = policy;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    ck_assert_ptr_nonnull(s);
    return s;
}

/* A small valid frame (the pixels are static so rows can point at them). */
static uint8_t small_rgb[24 * 16 * 3];

static void fill_small_rgb(void)
{
    uint8_t *rgb = make_rgb(24, 16, 0, 5);
    memcpy(small_rgb, rgb, sizeof small_rgb);
    free(rgb);
}

static void small_frame(vh_frame *f, const char *instruction, uint64_t tag)
{
    static pthread_once_t filled = PTHREAD_ONCE_INIT; /* producer threads call this at once */
    pthread_once(&filled, fill_small_rgb);
    vh_frame_init(f);
    f->rgb = small_rgb;
    f->width = 24;
    f->height = 16;
    f->instruction = instruction;
    f->tag = tag;
    f->timestamp_ns = (int64_t)tag * 1000 + 7;
}

static uint64_t submit_ok(vh_session *s, const char *instruction, uint64_t tag)
{
    vh_frame f;
    small_frame(&f, instruction, tag);
    uint64_t id = 0;
    ck_assert_msg(vh_submit_frame(s, &f, &id) == VH_OK, "%s", vh_session_last_error(s));
    ck_assert_uint_ne(id, 0);
    return id;
}

/* Poll one result; it must be `id`, with `status` and the frame's tag. */
static void expect_action(vh_session *s, uint64_t id, uint64_t tag, vh_status status)
{
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
    ck_assert_uint_eq(a.struct_size, sizeof a);
    ck_assert_uint_eq(a.frame_id, id);
    ck_assert_uint_eq(a.tag, tag);
    ck_assert_int_eq(a.timestamp_ns, (int64_t)tag * 1000 + 7);
    ck_assert_msg(a.status == status, "frame %llu: status %d (%s), expected %d (%s)", (unsigned long long)id,
                  a.status, vh_status_string(a.status), status, vh_status_string(status));
    if (status == VH_OK) {
        ck_assert_uint_eq(a.action_dim, 7);
        for (uint32_t i = 0; i < a.action_dim; i++) {
            ck_assert(a.token_ids[i] >= 31744 && a.token_ids[i] <= 31999);
            ck_assert(a.values[i] == a.values[i]); /* not NaN */
        }
        ck_assert(a.submitted_ns <= a.started_ns && a.started_ns <= a.finished_ns);
        ck_assert_int_gt(a.vision_ns, 0);
        ck_assert_int_gt(a.prefill_ns, 0);
    }
}

static void expect_empty(vh_session *s)
{
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, 0), VH_ERR_TIMEOUT);
}

/* Submit a frame that holds the worker up (see the top of the file); returns once it is held. */
static uint64_t submit_staller(vh_session *s, log_capture *c, uint64_t tag)
{
    char *text = long_instruction(MAX_INSTRUCTION);
    pthread_mutex_lock(&c->lock);
    c->stall_armed = 1;
    c->release = 0;
    pthread_mutex_unlock(&c->lock);
    uint64_t id = submit_ok(s, text, tag);
    free(text);
    int64_t until = now_ms() + WAIT_MS;
    pthread_mutex_lock(&c->lock);
    while (!c->stalled && now_ms() < until) {
        pthread_mutex_unlock(&c->lock);
        sleep_ms(2);
        pthread_mutex_lock(&c->lock);
    }
    int stalled = c->stalled;
    pthread_mutex_unlock(&c->lock);
    ck_assert_msg(stalled, "the worker never reported the too-long frame");
    return id;
}

/* ---------------------------------------------------------------------------------------------
 * Statuses, versions, init functions
 */
START_TEST(test_status_strings)
{
    const char *seen[VH_ERR_FORKED + 1];
    for (int st = VH_OK; st <= VH_ERR_FORKED; st++) {
        const char *text = vh_status_string((vh_status)st);
        ck_assert_ptr_nonnull(text);
        ck_assert_msg(*text, "status %d has an empty description", st);
        ck_assert_msg(strcmp(text, vh_status_string((vh_status)9999)) != 0, "status %d is 'unknown'", st);
        for (int j = 0; j < st; j++) ck_assert_msg(strcmp(seen[j], text), "statuses %d and %d share '%s'", j, st, text);
        seen[st] = text;
    }
    const int unknown[] = {VH_ERR_FORKED + 1, 21, 100, -1, 0x7fffffff};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *text = vh_status_string((vh_status)unknown[i]);
        ck_assert_ptr_nonnull(text);
        ck_assert(*text);
    }
    /* the ABI values, which never change */
    ck_assert_int_eq(VH_ERR_INVALID_ARGUMENT, 1);
    ck_assert_int_eq(VH_ERR_BAD_FRAME, 17);
    ck_assert_int_eq(VH_ERR_INTERNAL, 18);
    ck_assert_int_eq(VH_ERR_SHUTDOWN, 19);
    ck_assert_int_eq(VH_ERR_FORKED, 20);
}
END_TEST

START_TEST(test_version)
{
    ck_assert_uint_eq(vh_version_number(), VH_VERSION_NUMBER);
    ck_assert_uint_eq(vh_version_number(), VH_VERSION_MAJOR * 10000u + VH_VERSION_MINOR * 100u + VH_VERSION_PATCH);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", VH_VERSION_MAJOR, VH_VERSION_MINOR, VH_VERSION_PATCH);
    ck_assert_ptr_nonnull(vh_version());
    ck_assert_str_eq(vh_version(), want);
}
END_TEST

/* The *_init_sized functions: NULL and tiny sizes are ignored, larger sizes get a zero tail. */
START_TEST(test_init_sized)
{
    vh_session_params_init_sized(NULL, sizeof(vh_session_params));
    vh_frame_init_sized(NULL, sizeof(vh_frame));
    vh_action_init_sized(NULL, sizeof(vh_action));
    vh_session_info_init_sized(NULL, sizeof(vh_session_info));

    union {
        vh_frame f;
        unsigned char bytes[sizeof(vh_frame) + 40];
    } big;
    memset(&big, 0xAB, sizeof big);
    vh_frame_init_sized(&big.f, 3); /* shorter than struct_size itself: untouched */
    for (size_t i = 0; i < sizeof big; i++) ck_assert_uint_eq(big.bytes[i], 0xAB);

    vh_frame_init_sized(&big.f, sizeof(vh_frame) + 16);
    ck_assert_uint_eq(big.f.struct_size, sizeof(vh_frame) + 16);
    ck_assert_ptr_null(big.f.rgb);
    for (size_t i = sizeof(vh_frame); i < sizeof(vh_frame) + 16; i++) ck_assert_uint_eq(big.bytes[i], 0);
    for (size_t i = sizeof(vh_frame) + 16; i < sizeof big; i++) ck_assert_uint_eq(big.bytes[i], 0xAB);

    vh_session_params p;
    memset(&p, 0xAB, sizeof p);
    vh_session_params_init(&p);
    ck_assert_uint_eq(p.struct_size, sizeof p);
    ck_assert_ptr_null(p.model_path);
    ck_assert_ptr_null(p.backends);
    ck_assert_ptr_null(p.plugin_path);
    ck_assert_ptr_null(p.unnorm_key);
    ck_assert_ptr_null((void *)(uintptr_t)p.log_fn);
    ck_assert_uint_eq(p.queue_capacity, 2);
    ck_assert_int_eq(p.queue_policy, VH_QUEUE_DROP_OLDEST);
    ck_assert_int_eq(p.n_threads, 0);
    ck_assert_int_eq(p.log_level, VH_LOG_INFO);
    ck_assert_int_eq(p.decode_positions, VH_DECODE_POSITIONS_CONTIGUOUS);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The misuse table
 */
typedef struct ctx {
    vh_session *s;          /* a live session on model A (capacity 4, REJECT) */
    log_capture *log;
    char *not_a_folder;     /* a regular file */
    char *missing;          /* a path that does not exist */
    char *in_missing;       /* a file in that missing folder (cannot be created) */
} ctx;

typedef struct misuse_case {
    const char *name;
    vh_status (*call)(ctx *c);
    vh_status want;
    vh_status want_alt;      /* also accepted (where the header leaves the choice open); VH_OK: none */
    const char *message;     /* must appear in vh_last_error(); "$missing"/"$file": those paths */
    int on_session;          /* 1: vh_session_last_error(c->s) must carry the message too */
} misuse_case;

/* vh_session_create must fail, set *session to NULL and (when it returned VH_OK by mistake) we
 * clean up so the table goes on. */
static vh_status try_create(const vh_session_params *p)
{
    vh_session *s = (vh_session *)&s; /* not NULL: the call must overwrite it */
    vh_status st = vh_session_create(p, &s);
    if (st == VH_OK) {
        vh_session_destroy(s);
        return st;
    }
    ck_assert_msg(s == NULL, "vh_session_create failed but left *session set");
    return st;
}

#define CREATE_CASE(fn, ...)                 \
    static vh_status fn(ctx *c)              \
    {                                        \
        vh_session_params p;                 \
        base_params(&p, c->log);             \
        __VA_ARGS__;                         \
        return try_create(&p);               \
    }

CREATE_CASE(create_no_model_path, p.model_path = NULL)
CREATE_CASE(create_empty_model_path, p.model_path = "")
CREATE_CASE(create_missing_folder, p.model_path = c->missing)
CREATE_CASE(create_file_not_folder, p.model_path = c->not_a_folder)
CREATE_CASE(create_capacity_0, p.queue_capacity = 0)
CREATE_CASE(create_capacity_huge, p.queue_capacity = (1u << 20) + 1)
CREATE_CASE(create_policy_3, p.queue_policy = (vh_queue_policy)3)
CREATE_CASE(create_policy_negative, p.queue_policy = (vh_queue_policy)-1)
CREATE_CASE(create_decode_positions_2, p.decode_positions = (vh_decode_positions)2)
CREATE_CASE(create_threads_negative, p.n_threads = -1)
CREATE_CASE(create_threads_huge, p.n_threads = 4097)
CREATE_CASE(create_backend_unknown, p.backends = "nosuchbackend")
CREATE_CASE(create_backend_empty, p.backends = "")
CREATE_CASE(create_backend_comma, p.backends = ",")
CREATE_CASE(create_backend_empty_middle, p.backends = "a,,b")
CREATE_CASE(create_backend_trailing_comma, p.backends = "cpu_generic,")
CREATE_CASE(create_backend_leading_comma, p.backends = ",cpu_generic")
CREATE_CASE(create_backend_too_many, p.backends = "a,b,c,d,e,f,g,h,i")
CREATE_CASE(create_backend_uppercase, p.backends = "CPU_GENERIC")
CREATE_CASE(create_backend_path, p.backends = "../cpu_generic")
CREATE_CASE(create_backend_long_name,
            p.backends = "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij")
CREATE_CASE(create_split_too_big, p.backends = "cpu_generic,cpu_generic"; p.llm_split = 99)
CREATE_CASE(create_split_negative, p.backends = "cpu_generic,cpu_generic"; p.llm_split = -2)
CREATE_CASE(create_zone_negative, p.backends = "cpu_generic,cpu_generic"; p.split_zone = -2)
CREATE_CASE(create_zone_huge, p.backends = "cpu_generic,cpu_generic"; p.split_zone = 4097)
CREATE_CASE(create_mode_3, p.execution_mode = (vh_execution_mode)3)
CREATE_CASE(create_in_flight_33, p.backends = "cpu_generic,cpu_generic"; p.frames_in_flight = 33)
CREATE_CASE(create_trace_unwritable, p.trace_path = c->in_missing)
CREATE_CASE(create_backend_three, p.backends = "cpu_generic,cpu_generic,cpu_generic"; p.llm_split = 1)
CREATE_CASE(create_plugin_missing_file, p.plugin_path = c->missing)
CREATE_CASE(create_plugin_not_a_plugin, p.plugin_path = c->not_a_folder)
CREATE_CASE(create_plugin_missing_file_any_backend, p.plugin_path = c->missing; p.backends = NULL)
CREATE_CASE(create_unnorm_key_unknown, p.unnorm_key = "no_such_dataset")
CREATE_CASE(create_warmup_65, p.warmup_frames = 65)
CREATE_CASE(create_warmup_negative, p.warmup_frames = -2)
CREATE_CASE(create_deadline_huge, p.deadline_ms = 3600001u)
CREATE_CASE(create_affinity_words, p.cpu_affinity = "not-a-list")
CREATE_CASE(create_affinity_reversed, p.cpu_affinity = "3-1")
CREATE_CASE(create_affinity_trailing_comma, p.cpu_affinity = "0,")
CREATE_CASE(create_affinity_past_setsize, p.cpu_affinity = "0,5000")
CREATE_CASE(create_affinity_unusable, p.cpu_affinity = "1023")

/* Two faults at once: the one checked first (doc/api.md, "Checked in this order") decides. */
CREATE_CASE(order_size_before_fields, p.struct_size = 0; p.model_path = NULL)
CREATE_CASE(order_model_path_before_capacity, p.model_path = NULL; p.queue_capacity = 0)
CREATE_CASE(order_capacity_before_deadline, p.queue_capacity = 0; p.deadline_ms = 3600001u)
CREATE_CASE(order_deadline_before_affinity, p.deadline_ms = 3600001u; p.cpu_affinity = "3-1")
CREATE_CASE(order_affinity_before_model, p.model_path = c->missing; p.cpu_affinity = "3-1")
CREATE_CASE(order_model_before_backends, p.model_path = c->missing; p.backends = "a,,b")
CREATE_CASE(order_unnorm_key_before_trace, p.unnorm_key = "no_such_dataset"; p.trace_path = c->in_missing)
CREATE_CASE(order_trace_before_backends, p.trace_path = c->in_missing; p.backends = "a,,b")
CREATE_CASE(order_backend_names_before_plugins, p.backends = "a,,b"; p.plugin_path = c->missing)
CREATE_CASE(order_plugins_before_split, p.backends = "nosuchbackend,cpu_generic"; p.llm_split = 99)
static vh_status order_create_out_before_params(ctx *c)
{
    (void)c;
    return vh_session_create(NULL, NULL);
}

/* struct_size of vh_session_params: 0, an older (shorter) layout, longer with a non-zero tail. */
typedef union big_params {
    vh_session_params p;
    unsigned char bytes[sizeof(vh_session_params) + 32];
} big_params;

static vh_status create_sized(ctx *c, size_t size, int dirty_tail)
{
    big_params b;
    memset(&b, 0, sizeof b);
    base_params(&b.p, c->log);
    b.p.struct_size = size;
    if (dirty_tail) b.bytes[sizeof b.p + 5] = 1;
    return try_create(&b.p);
}

static vh_status create_size_0(ctx *c) { return create_sized(c, 0, 0); }
static vh_status create_size_small(ctx *c) { return create_sized(c, offsetof(vh_session_params, decode_positions), 0); }
/* between the 0.1.0 layout and this one: cuts a field, never a released size */
static vh_status create_size_between(ctx *c)
{
    return create_sized(c, offsetof(vh_session_params, llm_split) + 2, 0);
}
static vh_status create_size_dirty(ctx *c) { return create_sized(c, sizeof(vh_session_params) + 16, 1); }
static vh_status create_null_params(ctx *c)
{
    (void)c;
    vh_session *s = (vh_session *)&s;
    vh_status st = vh_session_create(NULL, &s);
    ck_assert_ptr_null(s);
    return st;
}
static vh_status create_null_out(ctx *c)
{
    vh_session_params p;
    base_params(&p, c->log);
    return vh_session_create(&p, NULL);
}

/* vh_submit_frame */
typedef union big_frame {
    vh_frame f;
    unsigned char bytes[sizeof(vh_frame) + 32];
} big_frame;

#define FRAME_CASE(fn, ...)                             \
    static vh_status fn(ctx *c)                         \
    {                                                   \
        big_frame b;                                    \
        memset(&b, 0, sizeof b);                        \
        small_frame(&b.f, "pick up the red block", 1);  \
        vh_frame *f = &b.f;                             \
        uint64_t id = 12345;                            \
        __VA_ARGS__;                                    \
        vh_status st = vh_submit_frame(c->s, f, &id);   \
        if (st) ck_assert_uint_eq(id, 12345);           \
        return st;                                      \
    }

static char over_long[MAX_INSTRUCTION + 2];

FRAME_CASE(submit_null_frame, f = NULL)
FRAME_CASE(submit_null_rgb, f->rgb = NULL)
FRAME_CASE(submit_width_0, f->width = 0)
FRAME_CASE(submit_height_0, f->height = 0)
FRAME_CASE(submit_width_16385, f->width = 16385; f->height = 1)
FRAME_CASE(submit_height_16385, f->height = 16385; f->width = 1)
FRAME_CASE(submit_both_huge, f->width = 0xffffffffu; f->height = 0xffffffffu)
FRAME_CASE(submit_stride_short, f->stride = (size_t)f->width * 3 - 1)
FRAME_CASE(submit_stride_one, f->stride = 1)
FRAME_CASE(submit_null_instruction, f->instruction = NULL)
FRAME_CASE(submit_instruction_8193, f->instruction = over_long)
FRAME_CASE(submit_size_0, f->struct_size = 0)
FRAME_CASE(submit_size_small, f->struct_size = offsetof(vh_frame, timestamp_ns))
FRAME_CASE(submit_size_dirty, f->struct_size = sizeof(vh_frame) + 16; b.bytes[sizeof(vh_frame) + 15] = 0x80)
FRAME_CASE(submit_size_between, f->struct_size = offsetof(vh_frame, sequence) + 8)
FRAME_CASE(submit_deadline_negative, f->deadline_ns = -1)

FRAME_CASE(order_frame_size_before_contents, f->struct_size = 0; f->rgb = NULL; f->deadline_ns = -1)
FRAME_CASE(order_family_before_deadline, f->rgb = NULL; f->deadline_ns = -1)
FRAME_CASE(order_deadline_before_structure, f->deadline_ns = -1; f->width = 0)
FRAME_CASE(order_image_before_instruction, f->width = 0; f->instruction = over_long)
static vh_status order_submit_session_before_frame(ctx *c)
{
    (void)c;
    return vh_submit_frame(NULL, NULL, NULL);
}
static vh_status order_poll_session_before_size(ctx *c)
{
    (void)c;
    vh_action a;
    vh_action_init(&a);
    a.struct_size = 0;
    return vh_poll_action(NULL, &a, 0);
}
static vh_status order_info_session_before_info(ctx *c)
{
    (void)c;
    return vh_session_get_info(NULL, NULL);
}

static vh_status submit_null_session(ctx *c)
{
    (void)c;
    vh_frame f;
    small_frame(&f, "x", 0);
    uint64_t id = 0;
    return vh_submit_frame(NULL, &f, &id);
}

/* vh_poll_action */
typedef union big_action {
    vh_action a;
    unsigned char bytes[sizeof(vh_action) + 32];
} big_action;

static vh_status poll_sized(ctx *c, size_t size, int dirty_tail)
{
    big_action b;
    memset(&b, 0, sizeof b);
    vh_action_init(&b.a);
    b.a.struct_size = size;
    if (dirty_tail) b.bytes[sizeof b.a] = 1;
    return vh_poll_action(c->s, &b.a, 0);
}
static vh_status poll_size_0(ctx *c) { return poll_sized(c, 0, 0); }
static vh_status poll_size_small(ctx *c) { return poll_sized(c, offsetof(vh_action, decode_ns), 0); }
static vh_status poll_size_dirty(ctx *c) { return poll_sized(c, sizeof(vh_action) + 8, 1); }
static vh_status poll_size_between(ctx *c) { return poll_sized(c, offsetof(vh_action, sequence) + 8, 0); }

/* vh_session_cancel, vh_session_cancel_pending, vh_session_reset, vh_session_get_stats */
static vh_status cancel_null_session(ctx *c)
{
    (void)c;
    return vh_session_cancel(NULL, 1);
}
static vh_status cancel_id_0(ctx *c) { return vh_session_cancel(c->s, 0); }
static vh_status cancel_id_unknown(ctx *c) { return vh_session_cancel(c->s, 1u << 30); }
static vh_status cancel_pending_null_session(ctx *c)
{
    (void)c;
    return vh_session_cancel_pending(NULL, NULL);
}
static vh_status reset_null_session(ctx *c)
{
    (void)c;
    return vh_session_reset(NULL, 0);
}
static vh_status reset_unknown_flags(ctx *c) { return vh_session_reset(c->s, 2); }

typedef union big_stats {
    vh_session_stats st;
    unsigned char bytes[sizeof(vh_session_stats) + 32];
} big_stats;

static vh_status stats_sized(ctx *c, size_t size, int dirty_tail)
{
    big_stats b;
    memset(&b, 0, sizeof b);
    vh_session_stats_init(&b.st);
    b.st.struct_size = size;
    if (dirty_tail) b.bytes[sizeof b.st + 3] = 1;
    return vh_session_get_stats(c->s, &b.st);
}
static vh_status stats_size_0(ctx *c) { return stats_sized(c, 0, 0); }
static vh_status stats_size_small(ctx *c) { return stats_sized(c, offsetof(vh_session_stats, end_to_end), 0); }
static vh_status stats_size_dirty(ctx *c) { return stats_sized(c, sizeof(vh_session_stats) + 8, 1); }
static vh_status stats_null_stats(ctx *c) { return vh_session_get_stats(c->s, NULL); }
static vh_status stats_null_session(ctx *c)
{
    (void)c;
    vh_session_stats st;
    vh_session_stats_init(&st);
    return vh_session_get_stats(NULL, &st);
}
static vh_status poll_null_action(ctx *c) { return vh_poll_action(c->s, NULL, 0); }
static vh_status poll_null_session(ctx *c)
{
    (void)c;
    vh_action a;
    vh_action_init(&a);
    return vh_poll_action(NULL, &a, 0);
}

/* vh_session_prompt_ids */
static vh_status prompt_null_session(ctx *c)
{
    (void)c;
    int32_t ids[8];
    size_t n;
    return vh_session_prompt_ids(NULL, "x", ids, 8, &n);
}
static vh_status prompt_null_instruction(ctx *c)
{
    int32_t ids[8];
    size_t n;
    return vh_session_prompt_ids(c->s, NULL, ids, 8, &n);
}
static vh_status prompt_null_ids(ctx *c)
{
    size_t n;
    return vh_session_prompt_ids(c->s, "x", NULL, 8, &n);
}
static vh_status prompt_null_count(ctx *c)
{
    int32_t ids[64];
    return vh_session_prompt_ids(c->s, "x", ids, 64, NULL);
}

/* vh_session_get_info */
typedef union big_info {
    vh_session_info i;
    unsigned char bytes[sizeof(vh_session_info) + 32];
} big_info;

static vh_status info_sized(ctx *c, size_t size, int dirty_tail)
{
    big_info b;
    memset(&b, 0, sizeof b);
    vh_session_info_init(&b.i);
    b.i.struct_size = size;
    if (dirty_tail) b.bytes[sizeof b.i + 31 - 16] = 0xff;
    return vh_session_get_info(c->s, &b.i);
}
static vh_status info_size_0(ctx *c) { return info_sized(c, 0, 0); }
static vh_status info_size_small(ctx *c) { return info_sized(c, offsetof(vh_session_info, backend_work_bytes), 0); }
static vh_status info_size_between(ctx *c) { return info_sized(c, offsetof(vh_session_info, gpu_bytes) + 4, 0); }
static vh_status info_size_dirty(ctx *c) { return info_sized(c, sizeof(vh_session_info) + 16, 1); }
static vh_status info_null_info(ctx *c) { return vh_session_get_info(c->s, NULL); }
static vh_status info_null_session(ctx *c)
{
    (void)c;
    vh_session_info i;
    vh_session_info_init(&i);
    return vh_session_get_info(NULL, &i);
}

#define ROW(fn, want, msg, on_session) {#fn, fn, want, VH_OK, msg, on_session}
#define ROW_OR(fn, want, alt, msg, on_session) {#fn, fn, want, alt, msg, on_session}

static const misuse_case misuse_cases[] = {
    /* vh_session_create: pointers and struct_size */
    ROW(create_null_params, VH_ERR_INVALID_ARGUMENT, "params", 0),
    ROW(create_null_out, VH_ERR_INVALID_ARGUMENT, "session", 0),
    ROW(create_size_0, VH_ERR_STRUCT_SIZE, "struct_size", 0),
    ROW(create_size_small, VH_ERR_STRUCT_SIZE, "vh_session_params", 0),
    ROW(create_size_between, VH_ERR_STRUCT_SIZE, "vh_session_params", 0),
    ROW(create_size_dirty, VH_ERR_STRUCT_SIZE, "vh_session_params", 0),
    /* vh_session_create: parameter values */
    ROW(create_no_model_path, VH_ERR_INVALID_ARGUMENT, "model_path", 0),
    ROW(create_empty_model_path, VH_ERR_INVALID_ARGUMENT, "model_path", 0),
    ROW(create_missing_folder, VH_ERR_IO, "$missing", 0),
    ROW(create_file_not_folder, VH_ERR_IO, "$file", 0),
    ROW(create_capacity_0, VH_ERR_INVALID_ARGUMENT, "queue_capacity", 0),
    ROW(create_capacity_huge, VH_ERR_INVALID_ARGUMENT, "queue_capacity", 0),
    ROW(create_policy_3, VH_ERR_INVALID_ARGUMENT, "queue_policy", 0),
    ROW(create_policy_negative, VH_ERR_INVALID_ARGUMENT, "queue_policy", 0),
    ROW(create_decode_positions_2, VH_ERR_INVALID_ARGUMENT, "decode_positions", 0),
    ROW(create_threads_negative, VH_ERR_INVALID_ARGUMENT, "n_threads", 0),
    ROW(create_threads_huge, VH_ERR_INVALID_ARGUMENT, "n_threads", 0),
    ROW(create_backend_unknown, VH_ERR_BACKEND_NOT_FOUND, "nosuchbackend", 0),
    ROW(create_backend_empty, VH_ERR_INVALID_ARGUMENT, "backends", 0),
    ROW(create_backend_comma, VH_ERR_INVALID_ARGUMENT, "backends", 0),
    ROW(create_backend_empty_middle, VH_ERR_INVALID_ARGUMENT, "a,,b", 0),
    ROW(create_backend_trailing_comma, VH_ERR_INVALID_ARGUMENT, "backends", 0),
    ROW(create_backend_leading_comma, VH_ERR_INVALID_ARGUMENT, "backends", 0),
    ROW(create_backend_too_many, VH_ERR_INVALID_ARGUMENT, "backends", 0),
    ROW(create_backend_uppercase, VH_ERR_INVALID_ARGUMENT, "CPU_GENERIC", 0),
    ROW(create_backend_path, VH_ERR_INVALID_ARGUMENT, "../cpu_generic", 0),
    ROW(create_backend_long_name, VH_ERR_INVALID_ARGUMENT, "backend", 0),
    ROW(create_split_too_big, VH_ERR_INVALID_ARGUMENT, "llm_split 99", 0),
    ROW(create_split_negative, VH_ERR_INVALID_ARGUMENT, "llm_split", 0),
    ROW(create_zone_negative, VH_ERR_INVALID_ARGUMENT, "split_zone", 0),
    ROW(create_zone_huge, VH_ERR_INVALID_ARGUMENT, "split_zone", 0),
    ROW(create_mode_3, VH_ERR_INVALID_ARGUMENT, "execution_mode", 0),
    ROW(create_in_flight_33, VH_ERR_INVALID_ARGUMENT, "frames_in_flight", 0),
    ROW(create_trace_unwritable, VH_ERR_IO, "trace file", 0),
    ROW(create_backend_three, VH_ERR_UNSUPPORTED, "at most two stages", 0),
    /* a plugin file that is not there is not found; one that is not a plugin cannot be loaded
     * (the header does not say which of NOT_FOUND / FAILED a missing file gives) */
    ROW_OR(create_plugin_missing_file, VH_ERR_BACKEND_NOT_FOUND, VH_ERR_BACKEND_FAILED, "$missing", 0),
    ROW_OR(create_plugin_missing_file_any_backend, VH_ERR_BACKEND_NOT_FOUND, VH_ERR_BACKEND_FAILED, "$missing", 0),
    ROW_OR(create_plugin_not_a_plugin, VH_ERR_BACKEND_FAILED, VH_ERR_BACKEND_ABI, "$file", 0),
    ROW(create_unnorm_key_unknown, VH_ERR_UNNORM_KEY, "no_such_dataset", 0),
    ROW(create_warmup_65, VH_ERR_INVALID_ARGUMENT, "warmup_frames", 0),
    ROW(create_warmup_negative, VH_ERR_INVALID_ARGUMENT, "warmup_frames", 0),
    ROW(create_deadline_huge, VH_ERR_INVALID_ARGUMENT, "deadline_ms", 0),
    ROW(create_affinity_words, VH_ERR_INVALID_ARGUMENT, "not-a-list", 0),
    ROW(create_affinity_reversed, VH_ERR_INVALID_ARGUMENT, "3-1", 0),
    ROW(create_affinity_trailing_comma, VH_ERR_INVALID_ARGUMENT, "cpu_affinity", 0),
    ROW(create_affinity_past_setsize, VH_ERR_INVALID_ARGUMENT, "5000", 0),
    ROW(create_affinity_unusable, VH_ERR_INVALID_ARGUMENT, "cpu_affinity \"1023\"", 0),
    /* vh_submit_frame */
    ROW(submit_null_session, VH_ERR_INVALID_ARGUMENT, "session", 0),
    ROW(submit_null_frame, VH_ERR_INVALID_ARGUMENT, "frame", 1),
    ROW(submit_size_0, VH_ERR_STRUCT_SIZE, "vh_frame", 1),
    ROW(submit_size_small, VH_ERR_STRUCT_SIZE, "vh_frame", 1),
    ROW(submit_size_dirty, VH_ERR_STRUCT_SIZE, "vh_frame", 1),
    ROW(submit_size_between, VH_ERR_STRUCT_SIZE, "vh_frame", 1),
    ROW(submit_deadline_negative, VH_ERR_INVALID_ARGUMENT, "deadline_ns", 1),
    ROW(submit_null_rgb, VH_ERR_BAD_FRAME, "rgb", 1),
    ROW(submit_width_0, VH_ERR_BAD_FRAME, "16384", 1),
    ROW(submit_height_0, VH_ERR_BAD_FRAME, "16384", 1),
    ROW(submit_width_16385, VH_ERR_BAD_FRAME, "16384", 1),
    ROW(submit_height_16385, VH_ERR_BAD_FRAME, "16384", 1),
    ROW(submit_both_huge, VH_ERR_BAD_FRAME, "16384", 1),
    ROW(submit_stride_short, VH_ERR_BAD_FRAME, "stride", 1),
    ROW(submit_stride_one, VH_ERR_BAD_FRAME, "stride", 1),
    ROW(submit_null_instruction, VH_ERR_BAD_FRAME, "instruction", 1),
    ROW(submit_instruction_8193, VH_ERR_BAD_FRAME, "8192", 1),
    /* vh_poll_action */
    ROW(poll_null_session, VH_ERR_INVALID_ARGUMENT, "session", 0),
    ROW(poll_null_action, VH_ERR_INVALID_ARGUMENT, "action", 1),
    ROW(poll_size_0, VH_ERR_STRUCT_SIZE, "vh_action", 1),
    ROW(poll_size_small, VH_ERR_STRUCT_SIZE, "vh_action", 1),
    ROW(poll_size_dirty, VH_ERR_STRUCT_SIZE, "vh_action", 1),
    ROW(poll_size_between, VH_ERR_STRUCT_SIZE, "vh_action", 1),
    /* cancel, reset, statistics */
    ROW(cancel_null_session, VH_ERR_INVALID_ARGUMENT, "session", 0),
    ROW(cancel_id_0, VH_ERR_INVALID_ARGUMENT, "id 0", 1),
    ROW(cancel_id_unknown, VH_ERR_INVALID_ARGUMENT, "no frame has id", 1),
    ROW(cancel_pending_null_session, VH_ERR_INVALID_ARGUMENT, "session", 0),
    ROW(reset_null_session, VH_ERR_INVALID_ARGUMENT, "session", 0),
    ROW(reset_unknown_flags, VH_ERR_INVALID_ARGUMENT, "flags", 1),
    ROW(stats_null_session, VH_ERR_INVALID_ARGUMENT, "session", 0),
    ROW(stats_null_stats, VH_ERR_INVALID_ARGUMENT, "stats", 1),
    ROW(stats_size_0, VH_ERR_STRUCT_SIZE, "vh_session_stats", 1),
    ROW(stats_size_small, VH_ERR_STRUCT_SIZE, "vh_session_stats", 1),
    ROW(stats_size_dirty, VH_ERR_STRUCT_SIZE, "vh_session_stats", 1),
    /* vh_session_prompt_ids */
    ROW(prompt_null_session, VH_ERR_INVALID_ARGUMENT, "session", 0),
    ROW(prompt_null_instruction, VH_ERR_INVALID_ARGUMENT, "instruction", 1),
    ROW(prompt_null_ids, VH_ERR_INVALID_ARGUMENT, "ids", 1),
    ROW(prompt_null_count, VH_ERR_INVALID_ARGUMENT, "count", 1),
    /* vh_session_get_info */
    ROW(info_null_session, VH_ERR_INVALID_ARGUMENT, "session", 0),
    ROW(info_null_info, VH_ERR_INVALID_ARGUMENT, "info", 1),
    ROW(info_size_0, VH_ERR_STRUCT_SIZE, "vh_session_info", 1),
    ROW(info_size_small, VH_ERR_STRUCT_SIZE, "vh_session_info", 1),
    ROW(info_size_between, VH_ERR_STRUCT_SIZE, "vh_session_info", 1),
    ROW(info_size_dirty, VH_ERR_STRUCT_SIZE, "vh_session_info", 1),
    /* two faults at once: the first in the documented order decides */
    ROW(order_create_out_before_params, VH_ERR_INVALID_ARGUMENT, "session is NULL", 0),
    ROW(order_size_before_fields, VH_ERR_STRUCT_SIZE, "vh_session_params", 0),
    ROW(order_model_path_before_capacity, VH_ERR_INVALID_ARGUMENT, "model_path", 0),
    ROW(order_capacity_before_deadline, VH_ERR_INVALID_ARGUMENT, "queue_capacity", 0),
    ROW(order_deadline_before_affinity, VH_ERR_INVALID_ARGUMENT, "deadline_ms", 0),
    ROW(order_affinity_before_model, VH_ERR_INVALID_ARGUMENT, "3-1", 0),
    ROW(order_model_before_backends, VH_ERR_IO, "$missing", 0),
    ROW(order_unnorm_key_before_trace, VH_ERR_UNNORM_KEY, "no_such_dataset", 0),
    ROW(order_trace_before_backends, VH_ERR_IO, "trace file", 0),
    ROW(order_backend_names_before_plugins, VH_ERR_INVALID_ARGUMENT, "a,,b", 0),
    ROW(order_plugins_before_split, VH_ERR_BACKEND_NOT_FOUND, "nosuchbackend", 0),
    ROW(order_submit_session_before_frame, VH_ERR_INVALID_ARGUMENT, "session is NULL", 0),
    ROW(order_frame_size_before_contents, VH_ERR_STRUCT_SIZE, "vh_frame", 1),
    ROW(order_family_before_deadline, VH_ERR_BAD_FRAME, "rgb", 1),
    ROW(order_deadline_before_structure, VH_ERR_INVALID_ARGUMENT, "deadline_ns", 1),
    ROW(order_image_before_instruction, VH_ERR_BAD_FRAME, "16384", 1),
    ROW(order_poll_session_before_size, VH_ERR_INVALID_ARGUMENT, "session is NULL", 0),
    ROW(order_info_session_before_info, VH_ERR_INVALID_ARGUMENT, "session is NULL", 0),
};
enum { N_MISUSE = sizeof misuse_cases / sizeof misuse_cases[0] };

/* Make the thread's last error something the case's message cannot match, so a stale message
 * cannot pass for the case's own. */
static void prime_last_error(vh_session *s, const char *expected)
{
    for (int k = 0; k < 3; k++) {
        if (s) {
            vh_frame f;
            small_frame(&f, "x", 0);
            f.width = 0;
            vh_session_info i;
            vh_session_info_init(&i);
            int32_t ids[4];
            size_t n;
            if (k == 0) vh_submit_frame(s, &f, NULL);       /* "frame size must be 1..16384 pixels a side" */
            if (k == 1) vh_session_get_info(s, NULL);       /* "info is NULL" */
            if (k == 2) vh_session_prompt_ids(s, "x", ids, 0, &n); /* "ids has room for fewer ids ..." */
            if (!strstr(vh_last_error(), expected) && !strstr(vh_session_last_error(s), expected)) return;
        } else {
            vh_session_info i;
            vh_session_info_init(&i);
            vh_session_params p;
            vh_session_params_init(&p);
            p.queue_capacity = 0;
            p.model_path = "x";
            vh_session *out;
            if (k == 0) vh_session_get_info(NULL, &i); /* "session is NULL" */
            if (k == 1) vh_session_create(&p, &out);   /* "queue_capacity must be in [1, 1048576]" */
            if (k == 2) vh_session_get_info(NULL, &i);
            if (!strstr(vh_last_error(), expected)) return;
        }
    }
    ck_abort_msg("no primer avoids '%s'", expected);
}

typedef struct misuse_fixture {
    ctx c;
    log_capture log;
} misuse_fixture;

static void fixture_open(misuse_fixture *m)
{
    memset(m, 0, sizeof *m);
    capture_init(&m->log);
    m->c.log = &m->log;
    m->c.s = open_session(4, VH_QUEUE_REJECT, &m->log);
    m->c.not_a_folder = vh_test_write_temp("not a folder\n", 13, ".json");
    char *dir = vh_test_make_temp_dir();
    size_t n = strlen(dir) + 32;
    m->c.missing = malloc(n);
    snprintf(m->c.missing, n, "%s/does-not-exist", dir);
    m->c.in_missing = malloc(n + 16);
    snprintf(m->c.in_missing, n + 16, "%s/trace.json", m->c.missing);
    free(dir); /* the folder itself stays empty; removed in fixture_close */
    memset(over_long, 'x', sizeof over_long - 1);
    over_long[sizeof over_long - 1] = '\0';
}

static void fixture_close(misuse_fixture *m)
{
    vh_session_destroy(m->c.s);
    unlink(m->c.not_a_folder);
    free(m->c.not_a_folder);
    free(m->c.in_missing);
    char *slash = strrchr(m->c.missing, '/');
    *slash = '\0';
    rmdir(m->c.missing);
    free(m->c.missing);
    capture_free(&m->log);
}

/* Run one case; returns 1 when it behaved, else 0 with the reason in `why` (so the caller can
 * clean up before it fails: no session is left running, even without check's fork). */
static int run_misuse_case(misuse_fixture *m, const misuse_case *mc, char *why, size_t size)
{
    const char *expected = !strcmp(mc->message, "$missing") ? m->c.missing
                           : !strcmp(mc->message, "$file")  ? m->c.not_a_folder
                                                            : mc->message;
    prime_last_error(mc->on_session ? m->c.s : NULL, expected);
    vh_status st = mc->call(&m->c);
    const char *last = vh_last_error();
    if (getenv("VH_TEST_VERBOSE")) printf("%-40s %-26s %s\n", mc->name, vh_status_string(st), last);
    if (!(st == mc->want || (mc->want_alt != VH_OK && st == mc->want_alt))) {
        snprintf(why, size, "%s: status %d (%s), expected %d (%s); message: %s", mc->name, st,
                 vh_status_string(st), mc->want, vh_status_string(mc->want), last ? last : "(NULL)");
        return 0;
    }
    if (!last || !strstr(last, expected)) {
        snprintf(why, size, "%s: vh_last_error() '%s' does not mention '%s'", mc->name, last ? last : "(NULL)",
                 expected);
        return 0;
    }
    if (mc->on_session) {
        const char *sess = vh_session_last_error(m->c.s);
        if (!sess || !strstr(sess, expected)) {
            snprintf(why, size, "%s: vh_session_last_error() '%s' does not mention '%s'", mc->name,
                     sess ? sess : "(NULL)", expected);
            return 0;
        }
    }
    return 1;
}

/* One case a test (check forks each): the status and the message. */
START_TEST(test_misuse_case)
{
    misuse_fixture m;
    fixture_open(&m);
    char why[1024] = "";
    int ok = run_misuse_case(&m, &misuse_cases[_i], why, sizeof why);
    fixture_close(&m);
    ck_assert_msg(ok, "%s", why);
}
END_TEST

/* Every case in one process (their statuses and messages are test_misuse_case's business), then
 * the session must still work: the failures queued nothing, consumed no frame id, and left
 * nothing broken. */
START_TEST(test_misuse_all_then_session_works)
{
    misuse_fixture m;
    fixture_open(&m);
    for (int i = 0; i < N_MISUSE; i++) misuse_cases[i].call(&m.c); /* statuses: test_misuse_case */
    expect_empty(m.c.s);
    uint64_t id = submit_ok(m.c.s, "pick up the red block", 3);
    ck_assert_uint_eq(id, 1);
    expect_action(m.c.s, 1, 3, VH_OK);
    expect_empty(m.c.s);
    fixture_close(&m);

    vh_session_destroy(NULL); /* a no-op */
    ck_assert_ptr_nonnull(vh_session_last_error(NULL));
}
END_TEST

/* vh_session_create's failures reach the log callback too ("leaves the message in
 * vh_last_error() (and in the log callback)"), whichever check fails. */
START_TEST(test_create_failure_is_logged)
{
    misuse_fixture m;
    fixture_open(&m);
    static vh_status (*const calls[])(ctx *) = {create_missing_folder, create_backend_unknown,
                                               create_unnorm_key_unknown, create_capacity_0,
                                               create_policy_3, create_no_model_path, create_threads_negative};
    char why[1024] = "";
    for (size_t i = 0; i < sizeof calls / sizeof calls[0] && !why[0]; i++) {
        pthread_mutex_lock(&m.log.lock);
        int before = m.log.n_by_level[VH_LOG_ERROR];
        pthread_mutex_unlock(&m.log.lock);
        vh_status st = calls[i](&m.c);
        pthread_mutex_lock(&m.log.lock);
        int after = m.log.n_by_level[VH_LOG_ERROR];
        pthread_mutex_unlock(&m.log.lock);
        if (st == VH_OK)
            snprintf(why, sizeof why, "call %zu succeeded", i);
        else if (after <= before)
            snprintf(why, sizeof why, "call %zu failed with '%s' but logged nothing at VH_LOG_ERROR", i,
                     vh_last_error());
        else if (!capture_contains(&m.log, vh_last_error()))
            snprintf(why, sizeof why, "the log lacks '%s'", vh_last_error());
    }
    fixture_close(&m);
    ck_assert_msg(!why[0], "%s", why);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Inputs that must be accepted
 */
START_TEST(test_struct_size_larger_zero_tail_accepted)
{
    log_capture log;
    capture_init(&log);
    big_params bp;
    memset(&bp, 0, sizeof bp);
    base_params(&bp.p, &log);
    bp.p.struct_size = sizeof(vh_session_params) + 16;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&bp.p, &s) == VH_OK, "%s", vh_last_error());

    big_frame bf;
    memset(&bf, 0, sizeof bf);
    small_frame(&bf.f, "pick up the red block", 42);
    bf.f.struct_size = sizeof(vh_frame) + 24;
    uint64_t id = 0;
    ck_assert_msg(vh_submit_frame(s, &bf.f, &id) == VH_OK, "%s", vh_session_last_error(s));
    ck_assert_uint_eq(id, 1);

    /* the library writes the known fields, keeps struct_size, leaves the tail alone and never
     * writes past struct_size */
    big_action ba;
    memset(&ba, 0xC5, sizeof ba);
    vh_action_init_sized(&ba.a, sizeof(vh_action) + 8);
    ck_assert_int_eq(vh_poll_action(s, &ba.a, WAIT_MS), VH_OK);
    ck_assert_uint_eq(ba.a.struct_size, sizeof(vh_action) + 8);
    ck_assert_uint_eq(ba.a.frame_id, 1);
    ck_assert_uint_eq(ba.a.tag, 42);
    ck_assert_int_eq(ba.a.status, VH_OK);
    ck_assert_uint_eq(ba.a.action_dim, 7);
    for (size_t i = sizeof(vh_action); i < sizeof(vh_action) + 8; i++) ck_assert_uint_eq(ba.bytes[i], 0);
    for (size_t i = sizeof(vh_action) + 8; i < sizeof ba; i++) ck_assert_uint_eq(ba.bytes[i], 0xC5);

    big_info bi;
    memset(&bi, 0xC5, sizeof bi);
    vh_session_info_init_sized(&bi.i, sizeof(vh_session_info) + 8);
    ck_assert_int_eq(vh_session_get_info(s, &bi.i), VH_OK);
    ck_assert_uint_eq(bi.i.struct_size, sizeof(vh_session_info) + 8);
    ck_assert_uint_eq(bi.i.action_dim, 7);
    for (size_t i = sizeof(vh_session_info); i < sizeof(vh_session_info) + 8; i++) ck_assert_uint_eq(bi.bytes[i], 0);
    for (size_t i = sizeof(vh_session_info) + 8; i < sizeof bi; i++) ck_assert_uint_eq(bi.bytes[i], 0xC5);

    vh_session_destroy(s);
    capture_free(&log);
}
END_TEST

/* A caller built against the 0.1 header (vh_session_params without llm_split) is still served:
 * its struct_size is the shorter layout; the field it does not know takes its default. The bytes
 * after its struct are garbage that must not be read. */
START_TEST(test_struct_size_v01_accepted)
{
    log_capture log;
    capture_init(&log);
    big_params bp;
    memset(&bp, 0xA5, sizeof bp);
    base_params(&bp.p, &log);
    bp.p.backends = "cpu_generic";
    const size_t v01 = offsetof(vh_session_params, llm_split);
    bp.p.struct_size = v01;
    memset(bp.bytes + v01, 0xA5, sizeof bp - v01); /* llm_split would read as garbage */
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&bp.p, &s) == VH_OK, "%s", vh_last_error());
    vh_session_destroy(s);
    /* two backends from such a caller: the fields it lacks take their defaults (a chosen split,
     * pipelined) */
    bp.p.backends = "cpu_generic,cpu_generic";
    ck_assert_msg(vh_session_create(&bp.p, &s) == VH_OK, "%s", vh_last_error());
    vh_session_info info;
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
    ck_assert_uint_eq(info.n_stages, 2);
    ck_assert(info.llm_split >= 0 && info.llm_split <= 2);
    ck_assert_int_eq(info.execution_mode, VH_EXECUTION_PIPELINE);
    /* and its shorter vh_session_info gets the fields it knows, nothing past them */
    struct {
        vh_session_info info;
        unsigned char guard[64];
    } old;
    memset(&old, 0x77, sizeof old);
    vh_session_info_init_sized(&old.info, offsetof(vh_session_info, gpu_bytes));
    ck_assert_int_eq(vh_session_get_info(s, &old.info), VH_OK);
    ck_assert_uint_eq(old.info.struct_size, offsetof(vh_session_info, gpu_bytes));
    ck_assert_uint_eq(old.info.n_llm_layers, 2);
    const unsigned char *tail = (const unsigned char *)&old + offsetof(vh_session_info, gpu_bytes);
    for (size_t i = 0; i < sizeof old - offsetof(vh_session_info, gpu_bytes); i++) ck_assert_uint_eq(tail[i], 0x77);
    vh_session_destroy(s);
    capture_free(&log);
}
END_TEST

START_TEST(test_session_info)
{
    vh_session *s = open_session(2, VH_QUEUE_DROP_OLDEST, NULL);
    vh_session_info info;
    memset(&info, 0x5A, sizeof info);
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
    ck_assert_uint_eq(info.struct_size, sizeof info);
    ck_assert_uint_eq(info.action_dim, 7);
    ck_assert_uint_eq(info.n_llm_layers, 2);
    ck_assert_uint_eq(info.n_prompt_image_tokens, 256);
    ck_assert_str_eq(info.backends, "cpu_generic");
    ck_assert_str_eq(info.unnorm_key, "bridge_orig");
    ck_assert_uint_eq(info.host_weight_bytes, MODEL_A_SHARD_BYTES);
    ck_assert_uint_gt(info.backend_weight_bytes, 0);
    ck_assert_uint_gt(info.backend_work_bytes, 0);
    ck_assert_uint_eq(info.gpu_bytes, 0);
    ck_assert_uint_eq(info.n_stages, 1); /* one stage: serial, whatever the mode asked */
    ck_assert_int_eq(info.execution_mode, VH_EXECUTION_SERIAL);
    ck_assert_uint_eq(info.frames_in_flight, 1);
    ck_assert_int_eq(info.llm_split, -1);
    ck_assert_str_eq(info.stages[0].backend, "cpu_generic");
    ck_assert_uint_eq(info.stages[0].first_block, 0);
    vh_session_destroy(s);

    /* model B: explicit unnorm_key, GQA, 3 layers, 14 x 14 patches; NULL backends = the best */
    vh_session_params p;
    base_params(&p, NULL);
    p.model_path = model_b;
    p.backends = NULL;
    p.unnorm_key = "fractal20220817_data";
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
    ck_assert_uint_eq(info.action_dim, 7);
    ck_assert_uint_eq(info.n_llm_layers, 3);
    ck_assert_uint_eq(info.n_prompt_image_tokens, 196);
    ck_assert_str_eq(info.unnorm_key, "fractal20220817_data");
    ck_assert(info.backends[0] != '\0');
    ck_assert_uint_gt(info.host_weight_bytes, 0);
    vh_session_destroy(s);
}
END_TEST

START_TEST(test_prompt_ids)
{
    vh_session *s = open_session(2, VH_QUEUE_DROP_OLDEST, NULL);
    const char *text = "pick up the red block";
    int32_t full[256];
    size_t n = 0;
    ck_assert_int_eq(vh_session_prompt_ids(s, text, full, 256, &n), VH_OK);

    /* what OpenVLA's predict_action computes (the fixture's reference) */
    char *path = vh_test_fixture_path("reference/openvla-tiny.json");
    json_error_t jerr;
    json_t *ref = json_load_file(path, 0, &jerr);
    ck_assert_msg(ref, "%s: %s", path, jerr.text);
    free(path);
    json_t *cases = json_object_get(ref, "cases");
    int compared = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        if (strcmp(json_string_value(json_object_get(c, "instruction")), text)) continue;
        json_t *want = json_object_get(c, "prompt_ids");
        ck_assert_uint_eq(json_array_size(want), n);
        for (size_t k = 0; k < n; k++) ck_assert_int_eq(full[k], json_integer_value(json_array_get(want, k)));
        compared = 1;
        break;
    }
    json_decref(ref);
    ck_assert_msg(compared, "no reference case for '%s'", text);
    ck_assert_int_eq(full[0], 1);
    ck_assert_int_eq(full[n - 1], 29871);

    /* too small: INVALID_ARGUMENT, *count the full length, the room there is filled, nothing past it */
    int32_t part[256];
    for (size_t k = 0; k < 256; k++) part[k] = -7;
    size_t count = 0;
    ck_assert_int_eq(vh_session_prompt_ids(s, text, part, n - 1, &count), VH_ERR_INVALID_ARGUMENT);
    ck_assert_uint_eq(count, n);
    for (size_t k = 0; k + 1 < n; k++) ck_assert_int_eq(part[k], full[k]);
    ck_assert_int_eq(part[n - 1], -7);
    ck_assert(strlen(vh_session_last_error(s)) > 0);
    ck_assert(strlen(vh_last_error()) > 0);

    /* capacity 0 (ids may then be NULL): the length query */
    count = 0;
    ck_assert_int_eq(vh_session_prompt_ids(s, text, NULL, 0, &count), VH_ERR_INVALID_ARGUMENT);
    ck_assert_uint_eq(count, n);
    /* exactly enough */
    count = 0;
    ck_assert_int_eq(vh_session_prompt_ids(s, text, part, n, &count), VH_OK);
    ck_assert_uint_eq(count, n);

    /* an empty instruction is a prompt too */
    ck_assert_int_eq(vh_session_prompt_ids(s, "", part, 256, &count), VH_OK);
    ck_assert_uint_gt(count, 2);

    /* invalid UTF-8: each bad byte reads as U+FFFD, as sentencepiece does */
    int32_t bad[256], fffd[256];
    size_t n_bad = 0, n_fffd = 0;
    ck_assert_int_eq(vh_session_prompt_ids(s, "open \xff the \x80 door", bad, 256, &n_bad), VH_OK);
    ck_assert_int_eq(vh_session_prompt_ids(s, "open \xef\xbf\xbd the \xef\xbf\xbd door", fffd, 256, &n_fffd), VH_OK);
    ck_assert_uint_eq(n_bad, n_fffd);
    for (size_t k = 0; k < n_bad; k++) ck_assert_int_eq(bad[k], fffd[k]);
    vh_session_destroy(s);
}
END_TEST

START_TEST(test_poll_timeouts)
{
    vh_session *s = open_session(2, VH_QUEUE_REJECT, NULL);
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, 0), VH_ERR_TIMEOUT);
    /* A timeout waits at least its time (a lower bound holds on any machine; no upper bound is
     * asserted: a busy machine may wake the poller late). */
    int64_t t0 = now_ms();
    ck_assert_int_eq(vh_poll_action(s, &a, 60), VH_ERR_TIMEOUT);
    ck_assert_int_ge(now_ms() - t0, 55);
    ck_assert_uint_eq(a.struct_size, sizeof a);
    /* a result that arrives while waiting is returned before the timeout */
    submit_ok(s, "pick up the red block", 9);
    ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
    ck_assert_uint_eq(a.frame_id, 1);
    ck_assert_int_eq(a.status, VH_OK);
    ck_assert_int_eq(vh_poll_action(s, &a, 0), VH_ERR_TIMEOUT);
    vh_session_destroy(s);
}
END_TEST

/* Frames at the limits are accepted and answered. */
START_TEST(test_edge_frames_accepted)
{
    vh_session *s = open_session(8, VH_QUEUE_BLOCK, NULL);
    const struct {
        uint32_t w, h;
    } sizes[] = {{1, 1}, {16384, 1}, {1, 16384}, {3, 2}};
    uint64_t id = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *rgb = make_rgb(sizes[i].w, sizes[i].h, 0, (uint32_t)i);
        vh_frame f;
        small_frame(&f, "pick up the red block", 100 + i);
        f.rgb = rgb;
        f.width = sizes[i].w;
        f.height = sizes[i].h;
        ck_assert_msg(vh_submit_frame(s, &f, &id) == VH_OK, "%ux%u: %s", sizes[i].w, sizes[i].h,
                      vh_session_last_error(s));
        free(rgb); /* the frame was copied */
        expect_action(s, id, 100 + i, VH_OK);
    }

    /* a padded stride gives exactly the packed frame's action; frame_id may be NULL */
    const uint32_t w = 37, h = 29;
    uint8_t *packed = make_rgb(w, h, 0, 3), *padded = make_rgb(w, h, w * 3 + 13, 3);
    vh_frame f;
    small_frame(&f, "put the cup on the plate", 7);
    f.rgb = packed;
    f.width = w;
    f.height = h;
    f.stride = w * 3;
    ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_OK);
    f.rgb = padded;
    f.stride = w * 3 + 13;
    ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_OK);
    free(packed);
    free(padded);
    vh_action a, b;
    vh_action_init(&a);
    vh_action_init(&b);
    ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
    ck_assert_int_eq(vh_poll_action(s, &b, WAIT_MS), VH_OK);
    ck_assert_int_eq(a.status, VH_OK);
    ck_assert_int_eq(b.status, VH_OK);
    ck_assert_uint_eq(b.frame_id, a.frame_id + 1);
    ck_assert_mem_eq(a.token_ids, b.token_ids, sizeof a.token_ids);
    ck_assert_mem_eq(a.values, b.values, sizeof a.values);
    vh_session_destroy(s);
}
END_TEST

/* Invalid UTF-8 is accepted and answered; an instruction of 8192 bytes is accepted at submit but
 * cannot fit the context: answered VH_ERR_BAD_FRAME, and the session goes on. */
START_TEST(test_instruction_edges)
{
    log_capture log;
    capture_init(&log);
    vh_session *s = open_session(4, VH_QUEUE_BLOCK, &log);
    uint64_t a = submit_ok(s, "pick up \xff\xfe the \xc3 block \x80", 1);
    uint64_t empty = submit_ok(s, "", 2);
    char *text = long_instruction(MAX_INSTRUCTION);
    ck_assert_uint_eq(strlen(text), MAX_INSTRUCTION);
    uint64_t too_long = submit_ok(s, text, 3);
    free(text);
    uint64_t after = submit_ok(s, "pick up the red block", 4);
    expect_action(s, a, 1, VH_OK);
    expect_action(s, empty, 2, VH_OK);
    expect_action(s, too_long, 3, VH_ERR_BAD_FRAME);
    const char *why = vh_session_last_error(s);
    ck_assert_msg(strstr(why, "too long"), "session error: '%s'", why);
    ck_assert_msg(capture_contains(&log, "too long"), "log: %s", log.text);
    expect_action(s, after, 4, VH_OK);
    vh_session_destroy(s);
    capture_free(&log);
}
END_TEST

/* A status's message belongs to its call: a timed-out poll after a failed submit, or after a
 * failed frame, says it timed out (the issue: "TimeoutError: the instruction is longer than..."),
 * and each failed frame's action carries its own message (vh_action.message, 0.5.0), an answered
 * frame's none. */
START_TEST(test_messages_belong_to_their_call)
{
    vh_session *s = open_session(4, VH_QUEUE_BLOCK, NULL);
    ck_assert_int_eq(vh_submit_frame(s, NULL, NULL), VH_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(vh_last_error(), "frame is NULL");
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, 50), VH_ERR_TIMEOUT);
    ck_assert_str_eq(vh_last_error(), "no action within 50 ms");
    ck_assert_int_eq(vh_poll_action(s, &a, 0), VH_ERR_TIMEOUT);
    ck_assert_str_eq(vh_last_error(), "no action ready (timeout 0 ms)");

    char *text = long_instruction(MAX_INSTRUCTION);
    const uint64_t too_long = submit_ok(s, text, 1), fine = submit_ok(s, "pick up the red block", 2);
    free(text);
    char *longer = long_instruction(MAX_INSTRUCTION - 100); /* fails too, with its own length */
    const uint64_t also_long = submit_ok(s, longer, 3);
    free(longer);
    ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
    ck_assert_uint_eq(a.frame_id, too_long);
    ck_assert_int_eq(a.status, VH_ERR_BAD_FRAME);
    ck_assert_msg(strstr(a.message, "frame 1: ") && strstr(a.message, "too long"), "message: '%s'", a.message);
    char first[sizeof a.message];
    memcpy(first, a.message, sizeof first);
    ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
    ck_assert_uint_eq(a.frame_id, fine);
    ck_assert_int_eq(a.status, VH_OK);
    ck_assert_str_eq(a.message, "");
    ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
    ck_assert_uint_eq(a.frame_id, also_long);
    ck_assert_int_eq(a.status, VH_ERR_BAD_FRAME);
    ck_assert_msg(strstr(a.message, "frame 3: ") && strcmp(a.message, first), "message: '%s' after '%s'", a.message,
                  first);
    ck_assert_int_eq(vh_poll_action(s, &a, 50), VH_ERR_TIMEOUT);
    ck_assert_str_eq(vh_last_error(), "no action within 50 ms");

    /* a 0.4.0 caller's vh_action (it ends before message) gets the fields it knows, nothing past them */
    struct {
        vh_action action;
        unsigned char guard[8];
    } old;
    const size_t v04 = offsetof(vh_action, message);
    memset(&old, 0x5a, sizeof old);
    vh_action_init_sized(&old.action, v04);
    submit_ok(s, "open the drawer", 4);
    ck_assert_int_eq(vh_poll_action(s, &old.action, WAIT_MS), VH_OK);
    ck_assert_uint_eq(old.action.struct_size, v04);
    ck_assert_int_eq(old.action.status, VH_OK);
    const unsigned char *tail = (const unsigned char *)&old + v04;
    for (size_t i = 0; i < sizeof old - v04; i++) ck_assert_uint_eq(tail[i], 0x5a);
    vh_session_destroy(s);
}
END_TEST

/* fork(): the child's copy of a session has none of its threads. Every session function called in
 * the child returns VH_ERR_FORKED at once (no wait, no hang), destroy there releases nothing and
 * says so in vh_last_error(); the parent's session goes on. */
START_TEST(test_forked_child_is_refused)
{
    vh_session *s = open_session(4, VH_QUEUE_BLOCK, NULL);
    const uint64_t before = submit_ok(s, "pick up the red block", 1);
    expect_action(s, before, 1, VH_OK);
    fflush(NULL);
    const pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        int bad = 0; /* the child reports through its exit status: 0 all as documented */
        vh_frame f;
        small_frame(&f, "open the drawer", 2);
        uint64_t id = 0;
        vh_action a;
        vh_action_init(&a);
        bad |= (vh_submit_frame(s, &f, &id) != VH_ERR_FORKED || id != 0) << 0;
        bad |= (!strstr(vh_last_error(), "fork")) << 1;
        bad |= (vh_poll_action(s, &a, -1) != VH_ERR_FORKED) << 2; /* -1: would wait forever */
        bad |= (vh_session_cancel(s, 1) != VH_ERR_FORKED || vh_session_cancel_pending(s, NULL) != VH_ERR_FORKED ||
                vh_session_reset(s, 0) != VH_ERR_FORKED || vh_session_shutdown(s) != VH_ERR_FORKED) << 3;
        vh_session_info info;
        vh_session_info_init(&info);
        vh_session_stats stats;
        vh_session_stats_init(&stats);
        size_t n = 0;
        bad |= (vh_session_get_info(s, &info) != VH_ERR_FORKED || vh_session_get_stats(s, &stats) != VH_ERR_FORKED ||
                vh_session_prompt_ids(s, "x", NULL, 0, &n) != VH_ERR_FORKED) << 4;
        vh_prompt_request req;
        vh_prompt_request_init(&req);
        req.instruction = "x";
        uint32_t n_rounds = 0;
        bad |= (vh_session_prompt_rounds(s, &req, NULL, 0, &n_rounds) != VH_ERR_FORKED) << 7;
        bad |= (!strstr(vh_session_last_error(s), "fork")) << 5;
        vh_submit_frame(NULL, NULL, NULL); /* another message first: destroy must set its own */
        vh_session_destroy(s);
        bad |= (!strstr(vh_last_error(), "vh_session_destroy") || !strstr(vh_last_error(), "fork")) << 6;
        _exit(bad);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status 0x%x (bits: the failed checks)",
                  status);
    const uint64_t after = submit_ok(s, "open the drawer", 3);
    expect_action(s, after, 3, VH_OK);
    vh_session_destroy(s);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Queue policies with real frames
 */
START_TEST(test_policy_reject)
{
    log_capture log;
    capture_init(&log);
    vh_session *s = open_session(2, VH_QUEUE_REJECT, &log);
    uint64_t held = submit_staller(s, &log, 1);
    ck_assert_uint_eq(held, 1);
    ck_assert_uint_eq(submit_ok(s, "pick up the red block", 2), 2);
    ck_assert_uint_eq(submit_ok(s, "pick up the red block", 3), 3);
    vh_frame f;
    small_frame(&f, "pick up the red block", 4);
    uint64_t id = 777;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(vh_submit_frame(s, &f, &id), VH_ERR_BUSY);
        ck_assert_uint_eq(id, 777);
        ck_assert_msg(strstr(vh_last_error(), "full"), "'%s'", vh_last_error());
        ck_assert_msg(strstr(vh_session_last_error(s), "full"), "'%s'", vh_session_last_error(s));
    }
    expect_empty(s); /* frame 1 is still running */
    capture_release(&log);
    expect_action(s, 1, 1, VH_ERR_BAD_FRAME);
    expect_action(s, 2, 2, VH_OK);
    expect_action(s, 3, 3, VH_OK);
    ck_assert_uint_eq(submit_ok(s, "pick up the red block", 4), 4); /* BUSY took no id */
    expect_action(s, 4, 4, VH_OK);
    expect_empty(s);
    vh_session_destroy(s);
    capture_free(&log);
}
END_TEST

START_TEST(test_policy_drop_oldest)
{
    log_capture log;
    capture_init(&log);
    vh_session *s = open_session(2, VH_QUEUE_DROP_OLDEST, &log);
    submit_staller(s, &log, 1);
    for (uint64_t i = 2; i <= 6; i++) ck_assert_uint_eq(submit_ok(s, "pick up the red block", i), i);
    /* 2, 3, 4 are displaced and answered, but nothing comes out before frame 1 */
    expect_empty(s);
    capture_release(&log);
    expect_action(s, 1, 1, VH_ERR_BAD_FRAME);
    expect_action(s, 2, 2, VH_ERR_DROPPED);
    expect_action(s, 3, 3, VH_ERR_DROPPED);
    expect_action(s, 4, 4, VH_ERR_DROPPED);
    expect_action(s, 5, 5, VH_OK);
    expect_action(s, 6, 6, VH_OK);
    expect_empty(s);
    vh_session_destroy(s);
    capture_free(&log);
}
END_TEST

typedef struct blocked_submit {
    vh_session *s;
    atomic_int done;
    vh_status status;
    uint64_t id;
} blocked_submit;

static void *submit_in_thread(void *arg)
{
    blocked_submit *b = arg;
    vh_frame f;
    small_frame(&f, "pick up the red block", 3);
    b->status = vh_submit_frame(b->s, &f, &b->id);
    atomic_store(&b->done, 1);
    return NULL;
}

START_TEST(test_policy_block)
{
    log_capture log;
    capture_init(&log);
    vh_session *s = open_session(1, VH_QUEUE_BLOCK, &log);
    submit_staller(s, &log, 1);
    ck_assert_uint_eq(submit_ok(s, "pick up the red block", 2), 2);
    blocked_submit b = {.s = s};
    atomic_init(&b.done, 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, submit_in_thread, &b), 0);
    sleep_ms(200);
    ck_assert_msg(!atomic_load(&b.done), "vh_submit_frame returned with the queue full (policy BLOCK)");
    capture_release(&log);
    pthread_join(t, NULL);
    ck_assert_int_eq(b.status, VH_OK);
    ck_assert_uint_eq(b.id, 3);
    expect_action(s, 1, 1, VH_ERR_BAD_FRAME);
    expect_action(s, 2, 2, VH_OK);
    expect_action(s, 3, 3, VH_OK);
    vh_session_destroy(s);
    capture_free(&log);
}
END_TEST

/* Destroy while a frame runs and others wait: returns (no hang); valgrind sees no leak. */
START_TEST(test_destroy_with_frames_pending)
{
    log_capture log;
    capture_init(&log);
    vh_session *s = open_session(4, VH_QUEUE_DROP_OLDEST, &log);
    submit_staller(s, &log, 1);
    for (uint64_t i = 2; i <= 5; i++) submit_ok(s, "pick up the red block", i);
    delayed_release d = {&log, 300};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, release_later, &d), 0);
    int64_t t0 = now_ms();
    vh_session_destroy(s); /* cancels 2..5, waits for frame 1 to finish */
    ck_assert_int_lt(now_ms() - t0, WAIT_MS);
    pthread_join(t, NULL);
    capture_free(&log);

    /* no staller: frames queued, some done and never polled, then destroy at once */
    for (int round = 0; round < 3; round++) {
        s = open_session(3, round == 2 ? VH_QUEUE_BLOCK : VH_QUEUE_DROP_OLDEST, NULL);
        for (int i = 0; i < 3 + round; i++) submit_ok(s, "pick up the red block", (uint64_t)i);
        if (round == 1) sleep_ms(100);
        vh_session_destroy(s);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Threads
 */
enum { N_THREADED = 10 };

typedef struct producer {
    vh_session *s;
    uint64_t tag_base;
    int n;
    int failures;
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
    for (int i = 0; i < p->n; i++) {
        vh_frame f;
        small_frame(&f, "pick up the red block", p->tag_base + (uint64_t)i);
        if (vh_submit_frame(p->s, &f, NULL) != VH_OK) p->failures++;
    }
    return NULL;
}

typedef struct consumer {
    vh_session *s;
    int n;
    vh_action actions[2 * N_THREADED];
    int polled;
    vh_status poll_status;
    atomic_int done;
} consumer;

static void *consume(void *arg)
{
    consumer *c = arg;
    for (c->polled = 0; c->polled < c->n; c->polled++) {
        vh_action_init(&c->actions[c->polled]);
        c->poll_status = vh_poll_action(c->s, &c->actions[c->polled], WAIT_MS);
        if (c->poll_status != VH_OK) break;
    }
    atomic_store(&c->done, 1);
    return NULL;
}

/* One thread submits while another polls (policy BLOCK: nothing is dropped), and a third asks
 * for the session's info and prompt ids meanwhile (both documented thread-safe). */
START_TEST(test_submit_and_poll_from_two_threads)
{
    vh_session *s = open_session(2, VH_QUEUE_BLOCK, NULL);
    producer p = {.s = s, .tag_base = 500, .n = N_THREADED};
    consumer c = {.s = s, .n = N_THREADED};
    atomic_init(&c.done, 0);
    pthread_t tp, tc;
    ck_assert_int_eq(pthread_create(&tc, NULL, consume, &c), 0);
    ck_assert_int_eq(pthread_create(&tp, NULL, produce, &p), 0);
    int queries = 0, query_failures = 0;
    while (!atomic_load(&c.done)) {
        vh_session_info info;
        vh_session_info_init(&info);
        int32_t ids[64];
        size_t n = 0;
        query_failures += vh_session_get_info(s, &info) != VH_OK || info.action_dim != 7;
        query_failures += vh_session_prompt_ids(s, "pick up the red block", ids, 64, &n) != VH_OK || n != 20;
        queries++;
        sleep_ms(1);
    }
    pthread_join(tp, NULL);
    pthread_join(tc, NULL);
    ck_assert_int_gt(queries, 0);
    ck_assert_int_eq(query_failures, 0);
    ck_assert_int_eq(p.failures, 0);
    ck_assert_int_eq(c.poll_status, VH_OK);
    ck_assert_int_eq(c.polled, N_THREADED);
    for (int i = 0; i < N_THREADED; i++) {
        ck_assert_uint_eq(c.actions[i].frame_id, (uint64_t)i + 1);
        ck_assert_uint_eq(c.actions[i].tag, 500 + (uint64_t)i);
        ck_assert_int_eq(c.actions[i].status, VH_OK);
    }
    expect_empty(s);
    vh_session_destroy(s);
}
END_TEST

/* Two submitting threads and a polling one, policy DROP_OLDEST: every frame is answered once,
 * ids in order, each thread's frames in its own order, the last frame never dropped. */
START_TEST(test_two_producers_drop_oldest)
{
    vh_session *s = open_session(1, VH_QUEUE_DROP_OLDEST, NULL);
    producer p1 = {.s = s, .tag_base = 1000, .n = N_THREADED}, p2 = {.s = s, .tag_base = 2000, .n = N_THREADED};
    consumer c = {.s = s, .n = 2 * N_THREADED};
    pthread_t t1, t2, tc;
    ck_assert_int_eq(pthread_create(&tc, NULL, consume, &c), 0);
    ck_assert_int_eq(pthread_create(&t1, NULL, produce, &p1), 0);
    ck_assert_int_eq(pthread_create(&t2, NULL, produce, &p2), 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pthread_join(tc, NULL);
    ck_assert_int_eq(p1.failures + p2.failures, 0);
    ck_assert_int_eq(c.poll_status, VH_OK);
    ck_assert_int_eq(c.polled, 2 * N_THREADED);
    int seen1[N_THREADED] = {0}, seen2[N_THREADED] = {0}, next1 = 0, next2 = 0, ok = 0;
    for (int i = 0; i < 2 * N_THREADED; i++) {
        const vh_action *a = &c.actions[i];
        ck_assert_uint_eq(a->frame_id, (uint64_t)i + 1);
        ck_assert(a->status == VH_OK || a->status == VH_ERR_DROPPED);
        ok += a->status == VH_OK;
        int k;
        if (a->tag >= 2000) {
            k = (int)(a->tag - 2000);
            ck_assert_int_eq(k, next2++);
            seen2[k]++;
        } else {
            k = (int)(a->tag - 1000);
            ck_assert_int_eq(k, next1++);
            seen1[k]++;
        }
    }
    for (int k = 0; k < N_THREADED; k++) ck_assert(seen1[k] == 1 && seen2[k] == 1);
    ck_assert_int_eq(c.actions[2 * N_THREADED - 1].status, VH_OK); /* nothing came after it */
    ck_assert_int_ge(ok, 1);
    vh_session_destroy(s);
}
END_TEST

/* Sessions are independent: several threads each create a session (models A and B, plugin loaded
 * and unloaded concurrently), run frames and destroy it, at the same time; every thread gets the
 * actions one session alone gives. */
enum { PARALLEL_THREADS = 3, PARALLEL_ROUNDS = 2, PARALLEL_FRAMES = 2 };

typedef struct parallel_job {
    int which;                                     /* 0: model A, 1: model B */
    int32_t tokens[PARALLEL_ROUNDS][PARALLEL_FRAMES][7];
    vh_status create_status;
    int failures;
    char error[512];
} parallel_job;

static void run_job_round(parallel_job *j, int round)
{
    vh_session_params p;
    base_params(&p, NULL);
    if (j->which) {
        p.model_path = model_b;
        p.unnorm_key = "bridge_orig";
    }
    vh_session *s = NULL;
    j->create_status = vh_session_create(&p, &s);
    if (j->create_status != VH_OK) {
        snprintf(j->error, sizeof j->error, "%s", vh_last_error());
        j->failures++;
        return;
    }
    for (int k = 0; k < PARALLEL_FRAMES; k++) {
        uint8_t *rgb = make_rgb(32, 24, 0, (uint32_t)k);
        vh_frame f;
        small_frame(&f, k ? "open the drawer" : "pick up the red block", (uint64_t)k);
        f.rgb = rgb;
        f.width = 32;
        f.height = 24;
        if (vh_submit_frame(s, &f, NULL) != VH_OK) j->failures++;
        free(rgb);
    }
    for (int k = 0; k < PARALLEL_FRAMES; k++) {
        vh_action a;
        vh_action_init(&a);
        if (vh_poll_action(s, &a, WAIT_MS) != VH_OK || a.status != VH_OK || a.tag != (uint64_t)k) {
            j->failures++;
            continue;
        }
        memcpy(j->tokens[round][k], a.token_ids, sizeof j->tokens[round][k]);
    }
    vh_session_destroy(s);
}

static void *parallel_job_main(void *arg)
{
    parallel_job *j = arg;
    for (int r = 0; r < PARALLEL_ROUNDS; r++) run_job_round(j, r);
    return NULL;
}

START_TEST(test_sessions_in_parallel_threads)
{
    parallel_job alone[2];
    memset(alone, 0, sizeof alone);
    for (int w = 0; w < 2; w++) {
        alone[w].which = w;
        run_job_round(&alone[w], 0);
        ck_assert_msg(alone[w].failures == 0, "model %d alone: %s", w, alone[w].error);
    }
    parallel_job jobs[PARALLEL_THREADS];
    pthread_t threads[PARALLEL_THREADS];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < PARALLEL_THREADS; i++) {
        jobs[i].which = i % 2;
        ck_assert_int_eq(pthread_create(&threads[i], NULL, parallel_job_main, &jobs[i]), 0);
    }
    for (int i = 0; i < PARALLEL_THREADS; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < PARALLEL_THREADS; i++) {
        ck_assert_msg(jobs[i].failures == 0, "thread %d: %d failures (%s)", i, jobs[i].failures, jobs[i].error);
        for (int r = 0; r < PARALLEL_ROUNDS; r++)
            ck_assert_mem_eq(jobs[i].tokens[r], alone[jobs[i].which].tokens[0], sizeof jobs[i].tokens[r]);
    }
}
END_TEST

/* vh_last_error is per thread: "" in a thread that never failed, and one thread's failure does
 * not show in another. */
static void *thread_last_error(void *arg)
{
    char *out = arg;
    snprintf(out, 256, "%s", vh_last_error());
    vh_session_get_info(NULL, NULL); /* fails here only */
    return NULL;
}

START_TEST(test_last_error_per_thread)
{
    vh_poll_action(NULL, NULL, 0);
    char before[512];
    snprintf(before, sizeof before, "%s", vh_last_error());
    ck_assert(before[0] != '\0');
    char seen[256] = "unset";
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, thread_last_error, seen), 0);
    pthread_join(t, NULL);
    ck_assert_str_eq(seen, "");
    ck_assert_str_eq(vh_last_error(), before);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Output: nothing on stdout/stderr without a callback; messages through it with one
 */
START_TEST(test_silent_without_log_callback)
{
    char *path = vh_test_write_temp("", 0, ".out");
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    int fd = open(path, O_WRONLY | O_TRUNC);
    ck_assert(saved_out >= 0 && saved_err >= 0 && fd >= 0);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);

    /* no ck_assert in here: record, check after the descriptors are back */
    vh_status st[16];
    int k = 0;
    vh_session_params p;
    base_params(&p, NULL);
    vh_session *s = NULL;
    p.model_path = "/nonexistent/vlahybrid/model";
    st[k++] = vh_session_create(&p, &s);                          /* IO */
    base_params(&p, NULL);
    p.backends = "nosuchbackend";
    st[k++] = vh_session_create(&p, &s);                          /* BACKEND_NOT_FOUND */
    base_params(&p, NULL);
    p.plugin_path = path;                                         /* not a shared object: dlopen fails */
    st[k++] = vh_session_create(&p, &s);
    base_params(&p, NULL);
    p.backends = NULL;                                            /* the search over every plugin */
    st[k++] = vh_session_create(&p, &s);                          /* OK */
    vh_frame f;
    small_frame(&f, "pick up the red block", 1);
    st[k++] = vh_submit_frame(s, &f, NULL);                       /* OK */
    char *text = long_instruction(MAX_INSTRUCTION);
    small_frame(&f, text, 2);
    st[k++] = vh_submit_frame(s, &f, NULL);                       /* OK, answered BAD_FRAME */
    free(text);
    small_frame(&f, "x", 3);
    f.stride = 1;
    st[k++] = vh_submit_frame(s, &f, NULL);                       /* BAD_FRAME */
    vh_action a1, a2;
    vh_action_init(&a1);
    vh_action_init(&a2);
    st[k++] = vh_poll_action(s, &a1, WAIT_MS);
    st[k++] = vh_poll_action(s, &a2, WAIT_MS);
    vh_session_info info;
    vh_session_info_init(&info);
    st[k++] = vh_session_get_info(s, &info);
    int32_t ids[4];
    size_t n;
    st[k++] = vh_session_prompt_ids(s, "pick up the red block", ids, 4, &n); /* too small */
    vh_session_destroy(s);

    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);

    size_t size = 0;
    uint8_t *written = vh_test_read_file(path, &size);
    unlink(path);
    free(path);
    ck_assert_ptr_nonnull(written);
    ck_assert_msg(size == 0, "the library wrote %zu bytes to stdout/stderr: %.400s", size, written);
    free(written);
    const vh_status want[] = {VH_ERR_IO, VH_ERR_BACKEND_NOT_FOUND, st[2], VH_OK, VH_OK, VH_OK, VH_ERR_BAD_FRAME,
                              VH_OK, VH_OK, VH_OK, VH_ERR_INVALID_ARGUMENT};
    for (int i = 0; i < k; i++) ck_assert_msg(st[i] == want[i], "call %d: status %d, expected %d", i, st[i], want[i]);
    ck_assert_int_ne(st[2], VH_OK);
    ck_assert_int_eq(a1.status, VH_OK);
    ck_assert_int_eq(a2.status, VH_ERR_BAD_FRAME);
}
END_TEST

START_TEST(test_log_callback)
{
    /* DEBUG: the load's debug and info messages arrive, with the user pointer */
    log_capture log;
    capture_init(&log);
    vh_session *s = open_session(2, VH_QUEUE_BLOCK, &log);
    ck_assert_msg(log.n_by_level[VH_LOG_INFO] >= 1, "log: %s", log.text);
    ck_assert_msg(log.n_by_level[VH_LOG_DEBUG] >= 1, "log: %s", log.text);
    ck_assert_msg(capture_contains(&log, "session ready"), "log: %s", log.text);
    ck_assert_msg(capture_contains(&log, "cpu_generic"), "log: %s", log.text);
    /* a caller's error: logged at ERROR, the same text as vh_session_last_error */
    vh_frame f;
    small_frame(&f, "x", 1);
    f.stride = 2;
    ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_ERR_BAD_FRAME);
    ck_assert_int_ge(log.n_by_level[VH_LOG_ERROR], 1);
    ck_assert_msg(capture_contains(&log, vh_session_last_error(s)), "log: %s", log.text);
    /* a frame's failure: logged from the worker thread */
    char *text = long_instruction(MAX_INSTRUCTION);
    uint64_t id = submit_ok(s, text, 2);
    free(text);
    expect_action(s, id, 2, VH_ERR_BAD_FRAME);
    ck_assert_msg(capture_contains(&log, "too long"), "log: %s", log.text);
    pthread_mutex_lock(&log.lock);
    ck_assert_int_ge(log.n_from_other_threads, 1);
    pthread_mutex_unlock(&log.lock);
    vh_session_destroy(s);
    capture_free(&log);

    /* ERROR: nothing below it arrives */
    capture_init(&log);
    vh_session_params p;
    base_params(&p, &log);
    p.log_level = VH_LOG_ERROR;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    ck_assert_msg(log.n_messages == 0, "log at level ERROR: %s", log.text);
    submit_ok(s, "pick up the red block", 3);
    expect_action(s, 1, 3, VH_OK);
    ck_assert_msg(log.n_messages == 0, "log at level ERROR: %s", log.text);
    small_frame(&f, "x", 4);
    f.width = 0;
    ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_ERR_BAD_FRAME);
    ck_assert_int_eq(log.n_messages, 1);
    ck_assert_int_eq(log.n_by_level[VH_LOG_ERROR], 1);
    vh_session_destroy(s);
    capture_free(&log);

    /* a failed load is logged */
    capture_init(&log);
    base_params(&p, &log);
    p.model_path = "/nonexistent/vlahybrid/model";
    s = (vh_session *)&s;
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_IO);
    ck_assert_ptr_null(s);
    ck_assert_int_ge(log.n_by_level[VH_LOG_ERROR], 1);
    ck_assert_msg(capture_contains(&log, "/nonexistent/vlahybrid/model"), "log: %s", log.text);
    capture_free(&log);
}
END_TEST

int main(void)
{
    model_a = vh_test_source_path(MODEL_A_DIR);
    model_b = vh_test_source_path(MODEL_B_DIR);

    Suite *suite = suite_create("api_misuse");
    TCase *basics = tcase_create("basics");
    tcase_add_test(basics, test_status_strings);
    tcase_add_test(basics, test_version);
    tcase_add_test(basics, test_init_sized);
    tcase_add_test(basics, test_last_error_per_thread);
    suite_add_tcase(suite, basics);

    TCase *misuse = tcase_create("misuse");
    tcase_set_timeout(misuse, 300);
    tcase_add_loop_test(misuse, test_misuse_case, 0, N_MISUSE);
    tcase_add_test(misuse, test_misuse_all_then_session_works);
    tcase_add_test(misuse, test_create_failure_is_logged);
    suite_add_tcase(suite, misuse);

    TCase *accept = tcase_create("accepted");
    tcase_set_timeout(accept, 300);
    tcase_add_test(accept, test_struct_size_larger_zero_tail_accepted);
    tcase_add_test(accept, test_struct_size_v01_accepted);
    tcase_add_test(accept, test_session_info);
    tcase_add_test(accept, test_prompt_ids);
    tcase_add_test(accept, test_poll_timeouts);
    tcase_add_test(accept, test_edge_frames_accepted);
    tcase_add_test(accept, test_instruction_edges);
    tcase_add_test(accept, test_messages_belong_to_their_call);
    tcase_add_test(accept, test_forked_child_is_refused);
    suite_add_tcase(suite, accept);

    TCase *queue = tcase_create("queue");
    tcase_set_timeout(queue, 300);
    tcase_add_test(queue, test_policy_reject);
    tcase_add_test(queue, test_policy_drop_oldest);
    tcase_add_test(queue, test_policy_block);
    tcase_add_test(queue, test_destroy_with_frames_pending);
    tcase_add_test(queue, test_submit_and_poll_from_two_threads);
    tcase_add_test(queue, test_two_producers_drop_oldest);
    tcase_add_test(queue, test_sessions_in_parallel_threads);
    suite_add_tcase(suite, queue);

    TCase *output = tcase_create("output");
    tcase_set_timeout(output, 300);
    tcase_add_test(output, test_silent_without_log_callback);
    tcase_add_test(output, test_log_callback);
    suite_add_tcase(suite, output);

    int rc = vh_test_run_suite(suite);
    free(model_a);
    free(model_b);
    return rc;
}
