/* The *_init_sized functions: fill defaults into the first struct_size bytes the caller knows.
 * A caller compiled against an older, shorter struct gets only the fields it has; one compiled
 * against a newer, longer struct gets zeros in the fields this library does not know, which is
 * what the library accepts there (see vh_struct_check). */
#include <string.h>

#include "vlahybrid/vlahybrid.h"

#define FILL_DEFAULTS(type, ptr, caller_size, ...)                              \
    do {                                                                      \
        type defaults_ = {__VA_ARGS__};                                       \
        defaults_.struct_size = (caller_size) < sizeof(type) ? (caller_size) : sizeof(type); \
        memcpy((ptr), &defaults_, defaults_.struct_size);                     \
        if ((caller_size) > sizeof(type))                                     \
            memset((char *)(ptr) + sizeof(type), 0, (caller_size) - sizeof(type)); \
        (ptr)->struct_size = (caller_size);                                   \
    } while (0)

void vh_session_params_init_sized(vh_session_params *params, size_t struct_size)
{
    if (!params || struct_size < sizeof params->struct_size) return;
    FILL_DEFAULTS(vh_session_params, params, struct_size,
                  .queue_capacity = 2,
                  .queue_policy = VH_QUEUE_DROP_OLDEST,
                  .n_threads = 0,
                  .log_level = VH_LOG_INFO,
                  .llm_split = -1,
                  .execution_mode = VH_EXECUTION_PIPELINE,
                  .split_zone = -1,
                  .warmup_frames = -1);
}

void vh_frame_init_sized(vh_frame *frame, size_t struct_size)
{
    if (!frame || struct_size < sizeof frame->struct_size) return;
    FILL_DEFAULTS(vh_frame, frame, struct_size, .stride = 0, .command = VH_COMMAND_NONE);
}

void vh_action_init_sized(vh_action *action, size_t struct_size)
{
    if (!action || struct_size < sizeof action->struct_size) return;
    FILL_DEFAULTS(vh_action, action, struct_size, .status = VH_OK);
}

void vh_session_info_init_sized(vh_session_info *info, size_t struct_size)
{
    if (!info || struct_size < sizeof info->struct_size) return;
    FILL_DEFAULTS(vh_session_info, info, struct_size, .llm_split = -1);
}

void vh_session_stats_init_sized(vh_session_stats *stats, size_t struct_size)
{
    if (!stats || struct_size < sizeof stats->struct_size) return;
    FILL_DEFAULTS(vh_session_stats, stats, struct_size, .n_stages = 0);
}

void vh_prompt_request_init_sized(vh_prompt_request *request, size_t struct_size)
{
    if (!request || struct_size < sizeof request->struct_size) return;
    FILL_DEFAULTS(vh_prompt_request, request, struct_size, .command = VH_COMMAND_NONE);
}

void vh_prompt_round_init_sized(vh_prompt_round *round, size_t struct_size)
{
    if (!round || struct_size < sizeof round->struct_size) return;
    FILL_DEFAULTS(vh_prompt_round, round, struct_size, .image_position = -1);
}
