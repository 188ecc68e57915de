/*
 * MindDrive's config.json as tools/minddrive/convert_minddrive.py writes it
 * (doc/minddrive-converter.md): model_type "minddrive"; text_config (the llava-qwen2 folder's
 * Qwen2Config, vocab_size = the embedding's rows after the released code's resize); lora (the two
 * experts, kept apart); planners.speed / planners.path (two VAE + GRU planners); vision_tokens;
 * prompt (the two rounds' texts as the released inference pipeline writes them); the meta-action
 * tokens and the command -> path mode mapping; front_end (optional: the camera front end, as Orion's).
 */
#ifndef VH_FAMILY_MINDDRIVE_CONFIG_H
#define VH_FAMILY_MINDDRIVE_CONFIG_H

#include "family/driving/driving_config.h"
#include "family/driving/front_end.h"

#define VH_MINDDRIVE_MAX_SPEEDS 16
#define VH_MINDDRIVE_COMMANDS 6 /* CARLA RoadOption - 1 */

typedef struct vh_minddrive_round {
    char *text;                        /* the round's conversation, the image marker in it */
    uint32_t lora_set;                 /* its expert's LoRA set (the order of lora.experts) */
} vh_minddrive_round;

typedef struct vh_minddrive_config {
    vh_driving_llm_config llm;         /* Qwen2: q/k/v biases, grouped-query attention, tied head */
    uint32_t lora_rank;
    float lora_scale;                  /* alpha / r */
    char experts[2][32];               /* LoRA set 0's and set 1's adapter names */
    vh_driving_planner_config speed, path;
    char speed_feature[64], path_feature[64]; /* the tokens whose hidden rows feed each planner */
    uint32_t n_vision_tokens;
    char image_marker[32];
    vh_minddrive_round decision, action;
    uint32_t n_speeds;                 /* = speed.n_modes */
    char speed_tokens[VH_MINDDRIVE_MAX_SPEEDS][64]; /* the speed meta-actions, decision index order */
    uint32_t path_mode_of_command[VH_MINDDRIVE_COMMANDS];
    vh_front_end_config front_end;     /* config.json's front_end (Orion's, the heads' out_dims the LLM's
                                          width), or not present: the frames bring the vision tokens */
} vh_minddrive_config;

/* Parse config.json text (`source` names it in messages). On failure *cfg is left empty. */
vh_status vh_minddrive_config_parse(const char *json_text, size_t len, const char *source, vh_minddrive_config *cfg,
                                    vh_error *err);
void vh_minddrive_config_free(vh_minddrive_config *cfg);

#endif
