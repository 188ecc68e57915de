/* The det head's scene memory: the can-bus history and the FIFO of history tokens (OrionHead's
 * memory_canbus, his_memory_canbus_len, memory_scene_query, scene_memory_timestamp). */
#include <stdlib.h>
#include <string.h>

#include "family/driving/petr_memory.h"

vh_status vh_petr_scene_init(vh_petr_scene_memory *s, uint32_t embed, uint32_t num_memory, uint32_t scene_len,
                             uint32_t canbus_len, vh_error *err)
{
    memset(s, 0, sizeof *s);
    if (!embed || !num_memory || !scene_len || !canbus_len)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "scene memory: an empty size");
    s->embed = embed;
    s->num_memory = num_memory;
    s->scene_len = scene_len;
    s->canbus_len = canbus_len;
    s->canbus = calloc((size_t)(canbus_len + 1) * VH_PETR_CANBUS, sizeof(float));
    s->query = calloc((size_t)(scene_len + num_memory) * embed, sizeof(float));
    s->age = calloc((size_t)scene_len + num_memory, sizeof(double));
    if (!s->canbus || !s->query || !s->age) {
        vh_petr_scene_free(s);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "scene memory: %u tokens of %u", scene_len, embed);
    }
    return VH_OK;
}

void vh_petr_scene_free(vh_petr_scene_memory *s)
{
    if (!s) return;
    free(s->canbus);
    free(s->query);
    free(s->age);
    memset(s, 0, sizeof *s);
}

/* memory_canbus[:, :his_len, 1:4] += sign can_bus[:3];  [:, :his_len, -1] += sign can_bus[-1] */
static void shift_canbus(vh_petr_scene_memory *s, const float can_bus[18], float sign)
{
    const uint32_t n = s->his_len < (int64_t)s->n_canbus ? (uint32_t)s->his_len : s->n_canbus;
    for (uint32_t i = 0; i < n; i++) {
        float *v = s->canbus + (size_t)i * VH_PETR_CANBUS;
        for (int k = 0; k < 3; k++) v[1 + k] += sign * can_bus[k];
        v[VH_PETR_CANBUS - 1] += sign * can_bus[17];
    }
}

void vh_petr_scene_pre_update(vh_petr_scene_memory *s, double timestamp, const float can_bus[18], float x)
{
    if (!s->started) {
        s->started = true;
        s->n_canbus = s->canbus_len;
        s->n_query = s->scene_len;
        memset(s->canbus, 0, sizeof(float) * s->n_canbus * VH_PETR_CANBUS);
        memset(s->query, 0, sizeof(float) * s->n_query * s->embed);
        for (uint32_t i = 0; i < s->n_query; i++) s->age[i] = 0.0;
        s->his_len = 0;
        return;
    }
    for (uint32_t i = 0; i < s->n_query; i++) s->age[i] += timestamp;
    if (s->n_query > s->scene_len) s->n_query = s->scene_len;
    for (uint32_t i = 0; i < s->n_query; i++) s->age[i] *= (double)x;
    shift_canbus(s, can_bus, -1.0f);
    if (s->n_canbus > s->canbus_len) s->n_canbus = s->canbus_len;
    for (size_t i = 0; i < (size_t)s->n_canbus * VH_PETR_CANBUS; i++) s->canbus[i] *= x;
    s->his_len = x != 0.0f ? s->his_len : 0;
    for (size_t i = 0; i < (size_t)s->n_query * s->embed; i++) s->query[i] *= x;
}

static void rec_can_bus(const float can_bus[18], float command, float *out)
{
    out[0] = command;
    for (int k = 0; k < 18; k++) out[1 + k] = (k < 3 || k == 17) ? 0.0f : can_bus[k];
}

void vh_petr_scene_post_update(vh_petr_scene_memory *s, double timestamp, const float can_bus[18], float command,
                               const float *history)
{
    memmove(s->canbus + VH_PETR_CANBUS, s->canbus, sizeof(float) * s->n_canbus * VH_PETR_CANBUS);
    rec_can_bus(can_bus, command, s->canbus);
    s->n_canbus++;
    s->his_len++;
    shift_canbus(s, can_bus, 1.0f);
    const size_t M = s->num_memory;
    memmove(s->query + M * s->embed, s->query, sizeof(float) * s->n_query * s->embed);
    memcpy(s->query, history, sizeof(float) * M * s->embed);
    memmove(s->age + M, s->age, sizeof(double) * s->n_query);
    for (size_t i = 0; i < M; i++) s->age[i] = 0.0;
    s->n_query += (uint32_t)M;
    for (uint32_t i = 0; i < s->n_query; i++) s->age[i] -= timestamp;
}

uint32_t vh_petr_canbus_input(const vh_petr_scene_memory *s, const vh_petr_bank *det, const float can_bus[18],
                              float command, float *out)
{
    uint32_t n = 0;
    rec_can_bus(can_bus, command, out);
    n += VH_PETR_CANBUS;
    memcpy(out + n, s->canbus, sizeof(float) * s->canbus_len * VH_PETR_CANBUS);
    n += s->canbus_len * VH_PETR_CANBUS;
    const uint32_t K = det->c.topk, groups = det->c.memory_len / K;
    for (uint32_t g = 0; g < groups; g++)
        for (int k = 0; k < 16; k++) {
            double sum = 0.0;
            for (uint32_t i = 0; i < K; i++) sum += det->egopose[((size_t)g * K + i) * 16 + k];
            out[n++] = (float)(sum / K);
        }
    return n;
}
