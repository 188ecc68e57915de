/*
 * OpenVLA as a model family (lib/family/family.h): the frame program of predict_action.
 *
 * A frame: the image resized for each tower (Pillow's bicubic) and normalised with its mean and
 * std; the prompt [BOS | 256 image rows | the rest of "In: What action should the robot take to
 * {instruction}?\nOut:" + 29871]; greedy decoding of action_dim tokens (stopping early at EOS, as
 * transformers' generate does); the last action_dim ids of prompt + generated de-tokenised to bin
 * centres and un-normalised with the chosen dataset's statistics. OpenVLA carries nothing from
 * frame to frame.
 */
#ifndef VH_FAMILY_OPENVLA_FAMILY_H
#define VH_FAMILY_OPENVLA_FAMILY_H

#include "family/family.h"

extern const vh_family vh_family_openvla;

/* How decode steps number their RoPE positions (the session's decode_positions; tests switch it
 * between frames run one at a time). */
void vh_openvla_program_set_decode_positions(vh_program *program, vh_decode_positions positions);

/* The BOS id the prompt starts with (the tokenizer's, else config.json's). */
int32_t vh_openvla_program_bos_id(const vh_program *program);

#endif
