/*
 * OpenVLA's prompt, as predict_action builds it:
 *   [BOS] + encode("In: What action should the robot take to {instruction}?\nOut:") + [29871]
 * The trailing 29871 (Llama-2's "▁", the empty token the model saw after "Out:" in training) is
 * appended unless the ids already end with it; forgetting it silently changes the actions.
 */
#ifndef VH_FAMILY_OPENVLA_PROMPT_H
#define VH_FAMILY_OPENVLA_PROMPT_H

#include "text/text_tokenizer.h"

#define VH_OPENVLA_EMPTY_TOKEN 29871

/* *ids is malloc'd (caller frees). The instruction is used as given (the reference lower-cases
 * nothing either). */
vh_status vh_openvla_prompt_ids(const vh_text_tokenizer *tok, int32_t bos_id, const char *instruction,
                                int32_t **ids, size_t *n_ids, vh_error *err);

#endif
