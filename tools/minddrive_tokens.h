/* MindDrive's 15 added tokens, its two prompts, and the tokenizer files of a converted MindDrive
 * folder, for vh-synth-checkpoint --family minddrive. Everything here restates
 * tools/minddrive/convert_minddrive.py (doc/minddrive-converter.md), which restates the released
 * code (github.com/xiaomi-mlab/MindDrive @ 1a4085d):
 *   - the token lists and prompts are the converter's SPEED_TOKENS, PATH_TOKENS, ADDED_TOKENS,
 *     PATH_MODE_OF_COMMAND, PROMPT_DECISION and PROMPT_ACTION;
 *   - the ids are plan_tokenizer's replay of transformers 4.45's add_tokens bookkeeping (a token that
 *     is already added keeps its id, one in the BPE vocabulary keeps that id, any other gets
 *     len(vocab U added) + k), refused where tokenizers' rule (largest added id + 1) disagrees;
 *   - tokenizer.json gets the new entries exactly as write_tokenizer_files / added_token_entry write
 *     them (special true; normalized, lstrip, rstrip, single_word false), sorted by id. */
#ifndef VH_TOOLS_MINDDRIVE_TOKENS_H
#define VH_TOOLS_MINDDRIVE_TOKENS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

enum { MD_N_SPEED_TOKENS = 7, MD_N_META_TOKENS = 13, MD_N_ADDED_TOKENS = 15, MD_N_COMMANDS = 6 };

/* ADDED_TOKENS: the 13 meta-action tokens (the first 7 are the speeds), <waypoint_ego>, <path_waypoint_ego>. */
extern const char *const md_added_tokens[MD_N_ADDED_TOKENS];
extern const int md_path_mode_of_command[MD_N_COMMANDS];
extern const char md_prompt_decision[], md_prompt_action[];
#define MD_WAYPOINT_TOKEN "<waypoint_ego>"
#define MD_PATH_WAYPOINT_TOKEN "<path_waypoint_ego>"

typedef struct md_tokenizer {
    json_t *json;                     /* the given tokenizer.json */
    uint64_t base_len;                /* len(tokenizer) before the 15: |vocab U added| */
    uint64_t n_entries;               /* after the 15: max(base_len, largest of the 15's ids + 1) */
    int64_t ids[MD_N_ADDED_TOKENS];   /* the 15's ids, in md_added_tokens' order */
    int is_new[MD_N_ADDED_TOKENS];    /* 1: appended to added_tokens (0: the tokenizer had it) */
    int64_t eos_id;                   /* <|endoftext|>'s id, -1 when the tokenizer has none */
} md_tokenizer;

/* Read a Hugging Face tokenizer.json and give the 15 tokens their ids. 0, or -1 with the reason in why. */
int md_tokenizer_load(const char *path, md_tokenizer *t, char *why, size_t why_size);
void md_tokenizer_free(md_tokenizer *t);

/* New references, NULL when out of memory. */
json_t *md_tokenizer_json(const md_tokenizer *t);   /* tokenizer.json with the 15 in added_tokens */
json_t *md_tokenizer_config(const md_tokenizer *t); /* tokenizer_config.json (Qwen2's, with the 15) */
json_t *md_added_tokens_json(const md_tokenizer *t); /* added_tokens.json: {token: id} for the 15 */

#endif
