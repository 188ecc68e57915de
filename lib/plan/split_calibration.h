/*
 * The costs behind an automatic split: what each of two stages spends per frame on its fixed work
 * (stage 0: the vision towers and projector; stage 1: the LM head) and on each LLM block (one
 * prefill pass + one pass per further action token), measured on the stages' own backends with
 * small throw-away executors (the vision side on stage 0, LLM layer 0 and the head on each), and
 * the split that balances them.
 *
 * Measurements are cached in a file keyed by backends, devices, threads and model shape:
 * $VH_CACHE_DIR, else $XDG_CACHE_HOME/vlahybrid, else ~/.cache/vlahybrid (split-costs-v1.tsv).
 * VH_CACHE_DIR=off disables the cache.
 */
#ifndef VH_PLAN_SPLIT_CALIBRATION_H
#define VH_PLAN_SPLIT_CALIBRATION_H

#include "plan/plan.h"

vh_status vh_split_calibrate(const vh_model *model, const vh_plan_request *req, vh_plugin *const plugins[2],
                             vh_stage_costs *costs, vh_error *err);

/* The LLM blocks on stage 0 (0..n_layers) minimising the slower stage's time per frame,
 * max(fixed0 + s block0, fixed1 + (n - s) block1); the smallest such s. */
uint32_t vh_split_balance(const vh_stage_costs *costs, uint32_t n_layers);

#endif
