#include "family/driving/driving_warmup.h"

#include <stdlib.h>

int vh_driving_warmup_frame(float **tokens, uint32_t n, uint32_t width, vh_frame *frame)
{
    if (!*tokens && !(*tokens = calloc((size_t)n * width, sizeof(float)))) return -1;
    vh_frame_init(frame);
    frame->vision_tokens = *tokens;
    frame->n_vision_tokens = n;
    frame->vision_token_width = width;
    frame->command = VH_DRIVING_WARMUP_COMMAND;
    return 1;
}
