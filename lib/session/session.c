/*
 * The public session API (include/vlahybrid/vlahybrid.h): model, tokenizer, plan and one worker
 * thread that takes frames from the queue and runs them through the frame runner.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "action/action_decoder.h"
#include "model/openvla_model.h"
#include "pipeline/frame_runner.h"
#include "plan/plan.h"
#include "session/frame_queue.h"
#include "text/bpe_tokenizer.h"
#include "text/openvla_prompt.h"
#include "util/clock.h"
#include "util/log.h"

#define MAX_IMAGE_SIDE 16384u
#define MAX_INSTRUCTION_BYTES 8192u
/* KV positions reserved for the prompt's text beyond the image tokens and the action. */
#define PROMPT_TEXT_BUDGET 512u

struct vh_session {
    vh_logger log;
    vh_model *model;
    vh_tokenizer *tokenizer;
    const vh_action_stats *stats;
    vh_action_decoder decoder;
    vh_plan plan;
    vh_frame_runner runner;
    uint32_t max_context;
    vh_frame_queue queue;
    pthread_t worker;
    int worker_started;

    pthread_mutex_t error_lock;        /* guards last_error */
    vh_error last_error;
};

static _Thread_local char thread_session_error[VH_ERROR_MESSAGE_SIZE];

/* Record a failed call: the session's last error, the thread's vh_last_error(), the log. */
static vh_status report(vh_session *s, const vh_error *err)
{
    vh_error_publish_thread(err);
    if (s) {
        pthread_mutex_lock(&s->error_lock);
        s->last_error = *err;
        pthread_mutex_unlock(&s->error_lock);
        vh_log_error(&s->log, "%s", err->message);
    }
    return err->status;
}

static vh_status fail(vh_session *s, vh_status status, const char *fmt, const char *arg)
{
    vh_error err;
    vh_error_set(&err, status, fmt, arg);
    return report(s, &err);
}

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

static void *worker_main(void *arg)
{
    vh_session *s = arg;
    vh_frame_record *rec;
    while ((rec = vh_frame_queue_take(&s->queue))) {
        vh_frame_result out;
        vh_error err;
        vh_error_clear(&err);
        vh_status st = vh_frame_runner_run(&s->runner, rec->rgb, rec->width, rec->height, (size_t)rec->width * 3,
                                           rec->instruction, &out, &err);
        vh_action *a = &rec->result;
        a->status = st;
        if (st == VH_OK) {
            a->action_dim = out.action_dim;
            memcpy(a->values, out.values, sizeof out.values);
            memcpy(a->token_ids, out.token_ids, sizeof out.token_ids);
            a->vision_ns = out.vision_ns;
            a->prefill_ns = out.prefill_ns;
            a->decode_ns = out.decode_ns;
        } else {
            vh_error_prefix(&err, "frame %llu: ", (unsigned long long)a->frame_id);
            pthread_mutex_lock(&s->error_lock);
            s->last_error = err;
            pthread_mutex_unlock(&s->error_lock);
            vh_log_error(&s->log, "%s", err.message);
        }
        vh_frame_queue_finish(&s->queue, rec);
    }
    return NULL;
}

static vh_status load_session(vh_session *s, const vh_session_params *p, vh_error *err)
{
    vh_status st;
    if ((st = vh_model_load(p->model_path, &s->model, err))) return st;
    const vh_openvla_config *c = &s->model->config;

    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.model", p->model_path);
    if ((st = vh_tokenizer_load(path, &s->tokenizer, err))) return st;
    if (vh_tokenizer_vocab_size(s->tokenizer) > c->vocab)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s has %u pieces, more than the model's vocab_size %u", path,
                            vh_tokenizer_vocab_size(s->tokenizer), c->vocab);

    if ((st = vh_openvla_config_dataset(c, p->unnorm_key, &s->stats, err))) return st;
    if ((st = vh_action_decoder_init(&s->decoder, c->vocab_unpadded, c->n_action_bins, s->stats, err))) return st;

    uint64_t context = (uint64_t)s->model->desc.n_image_tokens + PROMPT_TEXT_BUDGET + s->stats->dim;
    s->max_context = context < c->max_positions ? (uint32_t)context : c->max_positions;

    vh_plan_request req = {.backends = p->backends, .plugin_path = p->plugin_path, .n_threads = p->n_threads,
                           .max_context = s->max_context, .gpu_memory_budget = p->gpu_memory_budget,
                           .llm_split = p->llm_split, .log = &s->log};
    if ((st = vh_plan_create(s->model, &req, &s->plan, err))) return st;
    if ((st = vh_frame_runner_init(&s->runner, s->model, &s->plan, s->tokenizer, &s->decoder, s->max_context, err)))
        return st;
    s->runner.decode_positions = p->decode_positions;
    if ((st = vh_frame_queue_init(&s->queue, p->queue_capacity, p->queue_policy, err))) return st;
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0)
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "cannot start the worker thread");
    s->worker_started = 1;

    char backends[128];
    vh_plan_describe(&s->plan, backends, sizeof backends);
    vh_log_info(&s->log, "session ready: %s, %u LLM layers, backend %s, unnorm_key '%s'", p->model_path,
                c->n_layers, backends, s->stats->dataset);
    return VH_OK;
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
    const size_t v01_size = offsetof(vh_session_params, llm_split);
    const size_t known = params->struct_size >= v01_size && params->struct_size < sizeof *params
                             ? params->struct_size : sizeof *params;
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

    vh_session *s = calloc(1, sizeof *s);
    if (!s) return create_failed(&log, VH_ERR_OUT_OF_MEMORY, "out of memory%s", "");
    s->log = log;
    pthread_mutex_init(&s->error_lock, NULL);
    vh_error err;
    vh_error_clear(&err);
    vh_status st = load_session(s, &p, &err);
    if (st) {
        vh_log_error(&s->log, "%s", err.message);
        vh_error_publish_thread(&err);
        vh_session_destroy(s);
        return st;
    }
    *session = s;
    return VH_OK;
}

void vh_session_destroy(vh_session *s)
{
    if (!s) return;
    if (s->worker_started) {
        vh_frame_queue_close(&s->queue);
        pthread_join(s->worker, NULL);
        vh_frame_queue_destroy(&s->queue);
    }
    vh_frame_runner_free(&s->runner);
    vh_plan_destroy(&s->plan);
    vh_action_decoder_free(&s->decoder);
    vh_tokenizer_free(s->tokenizer);
    vh_model_free(s->model);
    pthread_mutex_destroy(&s->error_lock);
    free(s);
}

vh_status vh_submit_frame(vh_session *s, const vh_frame *frame, uint64_t *frame_id)
{
    if (!s) return fail(NULL, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "session");
    if (!frame) return fail(s, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "frame");
    if (!struct_size_ok(frame, frame->struct_size, sizeof *frame))
        return fail(s, VH_ERR_STRUCT_SIZE, "%s: struct_size is wrong; call vh_frame_init first", "vh_frame");
    const size_t row_bytes = (size_t)frame->width * 3, stride = frame->stride ? frame->stride : row_bytes;
    if (!frame->rgb) return fail(s, VH_ERR_BAD_FRAME, "%s is NULL", "frame->rgb");
    if (frame->width == 0 || frame->height == 0 || frame->width > MAX_IMAGE_SIDE || frame->height > MAX_IMAGE_SIDE)
        return fail(s, VH_ERR_BAD_FRAME, "frame size must be 1..16384 pixels a side%s", "");
    if (stride < row_bytes) return fail(s, VH_ERR_BAD_FRAME, "frame stride is smaller than width * 3%s", "");
    if (!frame->instruction) return fail(s, VH_ERR_BAD_FRAME, "%s is NULL", "frame->instruction");
    size_t text_len = strnlen(frame->instruction, MAX_INSTRUCTION_BYTES + 1);
    if (text_len > MAX_INSTRUCTION_BYTES)
        return fail(s, VH_ERR_BAD_FRAME, "the instruction is longer than %s bytes", "8192");

    vh_frame_record *rec = calloc(1, sizeof *rec);
    if (!rec) return fail(s, VH_ERR_OUT_OF_MEMORY, "out of memory%s", "");
    rec->width = frame->width;
    rec->height = frame->height;
    rec->rgb = malloc(row_bytes * frame->height);
    rec->instruction = malloc(text_len + 1);
    if (!rec->rgb || !rec->instruction) {
        vh_frame_record_free(rec);
        return fail(s, VH_ERR_OUT_OF_MEMORY, "out of memory copying the frame%s", "");
    }
    for (uint32_t y = 0; y < frame->height; y++)
        memcpy(rec->rgb + y * row_bytes, frame->rgb + y * stride, row_bytes);
    memcpy(rec->instruction, frame->instruction, text_len + 1);
    vh_action_init(&rec->result);
    rec->result.tag = frame->tag;
    rec->result.timestamp_ns = frame->timestamp_ns;
    rec->result.submitted_ns = vh_now_ns();

    vh_error err;
    uint64_t id = 0;
    vh_status st = vh_frame_queue_submit(&s->queue, rec, &id, &err);
    if (st) {
        vh_frame_record_free(rec);
        return report(s, &err);
    }
    if (frame_id) *frame_id = id;
    return VH_OK;
}

vh_status vh_poll_action(vh_session *s, vh_action *action, int32_t timeout_ms)
{
    if (!s) return fail(NULL, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "session");
    if (!action) return fail(s, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "action");
    if (!struct_size_ok(action, action->struct_size, sizeof *action))
        return fail(s, VH_ERR_STRUCT_SIZE, "%s: struct_size is wrong; call vh_action_init first", "vh_action");
    return vh_frame_queue_poll(&s->queue, action, timeout_ms);
}

const char *vh_session_last_error(vh_session *s)
{
    if (!s) return "session is NULL";
    pthread_mutex_lock(&s->error_lock);
    memcpy(thread_session_error, s->last_error.message, sizeof thread_session_error);
    pthread_mutex_unlock(&s->error_lock);
    return thread_session_error;
}

vh_status vh_session_prompt_ids(vh_session *s, const char *instruction, int32_t *ids, size_t capacity,
                                size_t *count)
{
    if (!s) return fail(NULL, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "session");
    if (!instruction || !count || (capacity && !ids))
        return fail(s, VH_ERR_INVALID_ARGUMENT, "%s", "instruction, ids and count must not be NULL");
    int32_t *all = NULL;
    size_t n = 0;
    vh_error err;
    vh_status st = vh_openvla_prompt_ids(s->tokenizer, s->runner.bos_id, instruction, &all, &n, &err);
    if (st) return report(s, &err);
    *count = n;
    if (capacity) memcpy(ids, all, sizeof *ids * (n < capacity ? n : capacity));
    free(all);
    if (n > capacity) return fail(s, VH_ERR_INVALID_ARGUMENT, "%s", "ids has room for fewer ids than the prompt has");
    return VH_OK;
}

vh_status vh_session_get_info(vh_session *s, vh_session_info *info)
{
    if (!s) return fail(NULL, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "session");
    if (!info) return fail(s, VH_ERR_INVALID_ARGUMENT, "%s is NULL", "info");
    if (!struct_size_ok(info, info->struct_size, sizeof *info))
        return fail(s, VH_ERR_STRUCT_SIZE, "%s: struct_size is wrong; call vh_session_info_init first",
                    "vh_session_info");
    vh_session_info out;
    vh_session_info_init(&out);
    out.action_dim = s->stats->dim;
    out.n_llm_layers = s->model->desc.llm.n_layers;
    out.n_prompt_image_tokens = s->model->desc.n_image_tokens;
    vh_plan_describe(&s->plan, out.backends, sizeof out.backends);
    snprintf(out.unnorm_key, sizeof out.unnorm_key, "%s", s->stats->dataset);
    out.host_weight_bytes = vh_checkpoint_mapped_bytes(s->model->checkpoint);
    for (uint32_t i = 0; i < s->plan.n_stages; i++) {
        vh_memory_report m = {0};
        const vh_stage *st = &s->plan.stages[i];
        if (st->plugin->iface->memory(st->executor, &m) == VH_OK) {
            out.backend_weight_bytes += m.weight_bytes;
            out.backend_work_bytes += m.cache_bytes + m.work_bytes;
        }
    }
    size_t caller_size = info->struct_size;
    memcpy(info, &out, sizeof out);
    info->struct_size = caller_size;
    return VH_OK;
}
