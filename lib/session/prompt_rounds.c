/*
 * The prompts a session's frames are fed, for a caller to check against its own agent's:
 * vh_session_prompt_rounds (every round, its image position) and vh_session_prompt_ids (a model
 * with one round). Both answer from the family's prompt_rounds, the ids its prepare lays out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session/session_access.h"

/* The family's rounds for an instruction and command (rounds' ids malloc'd); reported on failure. */
static vh_status family_rounds(vh_session *s, const char *instruction, int32_t command,
                               vh_family_prompt_round rounds[VH_FAMILY_MAX_PROMPT_ROUNDS], uint32_t *n_rounds)
{
    const vh_family *f = vh_session_family(s);
    vh_error err;
    *n_rounds = 0;
    if (!f->prompt_rounds) {
        vh_error_set(&err, VH_ERR_UNSUPPORTED, "model family '%s' has no text prompt", f->name);
        return vh_session_report(s, &err);
    }
    vh_status st = f->prompt_rounds(vh_session_program(s), instruction, command, rounds, n_rounds, &err);
    if (!st && (*n_rounds == 0 || *n_rounds > VH_FAMILY_MAX_PROMPT_ROUNDS)) {
        vh_family_prompt_rounds_free(rounds, *n_rounds > VH_FAMILY_MAX_PROMPT_ROUNDS ? 0 : *n_rounds);
        *n_rounds = 0;
        st = vh_error_set(&err, VH_ERR_INTERNAL, "model family '%s' reported no prompt rounds", f->name);
    }
    return st ? vh_session_report(s, &err) : VH_OK;
}

vh_status vh_session_prompt_ids(vh_session *s, const char *instruction, int32_t *ids, size_t capacity, size_t *count)
{
    vh_status st = vh_session_enter(s, "vh_session_prompt_ids");
    if (st) return st;
    vh_error err;
    if (!instruction || !count || (capacity && !ids)) {
        vh_error_set(&err, VH_ERR_INVALID_ARGUMENT, "instruction, ids and count must not be NULL");
        return vh_session_report(s, &err);
    }
    vh_family_prompt_round rounds[VH_FAMILY_MAX_PROMPT_ROUNDS];
    uint32_t n_rounds = 0;
    if ((st = family_rounds(s, instruction, VH_COMMAND_NONE, rounds, &n_rounds))) return st;
    if (n_rounds != 1) {
        char names[96] = "";
        for (uint32_t i = 0, used = 0; i < n_rounds && used < sizeof names; i++)
            used += (uint32_t)snprintf(names + used, sizeof names - used, i ? ", %s" : "%s", rounds[i].name);
        vh_family_prompt_rounds_free(rounds, n_rounds);
        vh_error_set(&err, VH_ERR_UNSUPPORTED, "a %s model's frames have %u prompt rounds (%s): "
                     "vh_session_prompt_rounds gives each", vh_session_family(s)->name, n_rounds, names);
        return vh_session_report(s, &err);
    }
    const size_t n = rounds[0].n_ids;
    *count = n;
    if (capacity) memcpy(ids, rounds[0].ids, sizeof *ids * (n < capacity ? n : capacity));
    vh_family_prompt_rounds_free(rounds, n_rounds);
    if (n > capacity) {
        vh_error_set(&err, VH_ERR_INVALID_ARGUMENT, "ids has room for fewer ids than the prompt has");
        return vh_session_report(s, &err);
    }
    return VH_OK;
}

/* The library's fields of a caller's round, from the family's; ids copied as far as they fit.
 * 1 when they all fit. */
static int fill_round(vh_prompt_round *out, const vh_family_prompt_round *r)
{
    snprintf(out->name, sizeof out->name, "%s", r->name);
    out->n_ids = r->n_ids;
    out->image_position = r->image_position;
    out->n_image_rows = r->n_image_rows;
    const size_t n = r->n_ids < out->ids_capacity ? r->n_ids : out->ids_capacity;
    if (n) memcpy(out->ids, r->ids, sizeof *out->ids * n);
    return r->n_ids <= out->ids_capacity;
}

/* Round i of the caller's array, whose elements are `stride` bytes (the caller's struct_size). */
static vh_prompt_round *round_at(vh_prompt_round *rounds, size_t stride, uint32_t i)
{
    return (vh_prompt_round *)((char *)rounds + stride * i);
}

vh_status vh_session_prompt_rounds(vh_session *s, const vh_prompt_request *request, vh_prompt_round *rounds,
                                   uint32_t capacity, uint32_t *n_rounds)
{
    vh_status st = vh_session_enter(s, "vh_session_prompt_rounds");
    if (st) return st;
    vh_error err;
    if (!request || !n_rounds || (capacity && !rounds)) {
        vh_error_set(&err, VH_ERR_INVALID_ARGUMENT, "%s is NULL",
                     !request ? "request" : !n_rounds ? "n_rounds" : "rounds (with a capacity above 0)");
        return vh_session_report(s, &err);
    }
    *n_rounds = 0;
    if (!vh_session_struct_size_ok(request, request->struct_size, sizeof *request)) {
        vh_error_set(&err, VH_ERR_STRUCT_SIZE, "vh_prompt_request: struct_size is wrong; call "
                     "vh_prompt_request_init first");
        return vh_session_report(s, &err);
    }
    const size_t stride = capacity ? rounds[0].struct_size : 0; /* the caller's sizeof, at its header */
    for (uint32_t i = 0; i < capacity; i++) {
        const vh_prompt_round *r = round_at(rounds, stride, i);
        if (r->struct_size != stride || !vh_session_struct_size_ok(r, stride, sizeof *r)) {
            vh_error_set(&err, VH_ERR_STRUCT_SIZE, "rounds[%u] (vh_prompt_round): struct_size is wrong; call "
                         "vh_prompt_round_init on each, of one size", i);
            return vh_session_report(s, &err);
        }
        if (r->ids_capacity && !r->ids) {
            vh_error_set(&err, VH_ERR_INVALID_ARGUMENT, "rounds[%u].ids is NULL with an ids_capacity of %zu", i,
                         r->ids_capacity);
            return vh_session_report(s, &err);
        }
    }
    vh_family_prompt_round got[VH_FAMILY_MAX_PROMPT_ROUNDS];
    uint32_t n = 0;
    if ((st = family_rounds(s, request->instruction, request->command, got, &n))) return st;
    *n_rounds = n;
    uint32_t short_round = n; /* the first round whose ids do not fit */
    for (uint32_t i = 0; i < n && i < capacity; i++)
        if (!fill_round(round_at(rounds, stride, i), &got[i]) && short_round == n) short_round = i;
    if (capacity < n)
        vh_error_set(&err, VH_ERR_INVALID_ARGUMENT, "rounds has room for %u of the prompt's %u rounds", capacity, n);
    else if (short_round < n)
        vh_error_set(&err, VH_ERR_INVALID_ARGUMENT, "rounds[%u] ('%s') has room for %zu of its %zu ids", short_round,
                     got[short_round].name, round_at(rounds, stride, short_round)->ids_capacity,
                     got[short_round].n_ids);
    vh_family_prompt_rounds_free(got, n);
    return capacity < n || short_round < n ? vh_session_report(s, &err) : VH_OK;
}
