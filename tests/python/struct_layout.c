/* Prints the layout of the public structs as the C compiler sees them, as JSON:
 *   {"vh_frame": {"size": 168, "fields": {"rgb": [8, 8], ...}}, ...}
 * (each field: [offset, size]). test_struct_layout.py compares it with the ctypes mirrors of the
 * Python package, field by field. A field added to the header needs a line here and in
 * python/vlahybrid/_structs.py; the sizes catch one forgotten in both. */
#include <stddef.h>
#include <stdio.h>

#include <vlahybrid/vlahybrid.h>

static int first_field;

static void begin(const char *type, size_t size)
{
    printf("%s\"%s\": {\"size\": %zu, \"fields\": {", first_field < 0 ? "" : ", ", type, size);
    first_field = 1;
}

static void field(const char *name, size_t offset, size_t size)
{
    printf("%s\"%s\": [%zu, %zu]", first_field ? "" : ", ", name, offset, size);
    first_field = 0;
}

static void end(void) { printf("}}"); }

#define BEGIN(type) begin(#type, sizeof(type))
#define FIELD(type, name) field(#name, offsetof(type, name), sizeof(((type *)0)->name))

int main(void)
{
    printf("{");
    first_field = -1;

    BEGIN(vh_session_params);
    FIELD(vh_session_params, struct_size);
    FIELD(vh_session_params, model_path);
    FIELD(vh_session_params, backends);
    FIELD(vh_session_params, plugin_path);
    FIELD(vh_session_params, unnorm_key);
    FIELD(vh_session_params, queue_capacity);
    FIELD(vh_session_params, queue_policy);
    FIELD(vh_session_params, n_threads);
    FIELD(vh_session_params, log_fn);
    FIELD(vh_session_params, log_user);
    FIELD(vh_session_params, log_level);
    FIELD(vh_session_params, decode_positions);
    FIELD(vh_session_params, gpu_memory_budget);
    FIELD(vh_session_params, llm_split);
    FIELD(vh_session_params, execution_mode);
    FIELD(vh_session_params, split_zone);
    FIELD(vh_session_params, trace_path);
    FIELD(vh_session_params, frames_in_flight);
    FIELD(vh_session_params, deadline_ms);
    FIELD(vh_session_params, warmup_frames);
    FIELD(vh_session_params, cpu_affinity);
    FIELD(vh_session_params, seed);
    FIELD(vh_session_params, progress_fn);
    FIELD(vh_session_params, progress_user);
    FIELD(vh_session_params, vision_tokens_fn);
    FIELD(vh_session_params, vision_tokens_user);
    end();

    BEGIN(vh_camera_image);
    FIELD(vh_camera_image, rgb);
    FIELD(vh_camera_image, width);
    FIELD(vh_camera_image, height);
    FIELD(vh_camera_image, stride);
    FIELD(vh_camera_image, name);
    end();

    BEGIN(vh_frame);
    FIELD(vh_frame, struct_size);
    FIELD(vh_frame, rgb);
    FIELD(vh_frame, width);
    FIELD(vh_frame, height);
    FIELD(vh_frame, stride);
    FIELD(vh_frame, instruction);
    FIELD(vh_frame, tag);
    FIELD(vh_frame, timestamp_ns);
    FIELD(vh_frame, sequence);
    FIELD(vh_frame, deadline_ns);
    FIELD(vh_frame, n_cameras);
    FIELD(vh_frame, cameras);
    FIELD(vh_frame, lidar2img);
    FIELD(vh_frame, intrinsics);
    FIELD(vh_frame, extrinsics);
    FIELD(vh_frame, ego_pose);
    FIELD(vh_frame, can_bus);
    FIELD(vh_frame, command);
    FIELD(vh_frame, command_timestamp_ns);
    FIELD(vh_frame, vision_tokens);
    FIELD(vh_frame, n_vision_tokens);
    FIELD(vh_frame, vision_token_width);
    FIELD(vh_frame, noise);
    FIELD(vh_frame, n_noise);
    FIELD(vh_frame, unnorm_key);
    FIELD(vh_frame, stream);
    end();

    BEGIN(vh_action_extra_info);
    FIELD(vh_action_extra_info, name);
    FIELD(vh_action_extra_info, offset);
    FIELD(vh_action_extra_info, count);
    end();

    BEGIN(vh_action);
    FIELD(vh_action, struct_size);
    FIELD(vh_action, frame_id);
    FIELD(vh_action, tag);
    FIELD(vh_action, timestamp_ns);
    FIELD(vh_action, status);
    FIELD(vh_action, action_dim);
    FIELD(vh_action, values);
    FIELD(vh_action, token_ids);
    FIELD(vh_action, submitted_ns);
    FIELD(vh_action, started_ns);
    FIELD(vh_action, finished_ns);
    FIELD(vh_action, vision_ns);
    FIELD(vh_action, prefill_ns);
    FIELD(vh_action, decode_ns);
    FIELD(vh_action, sequence);
    FIELD(vh_action, deadline_ns);
    FIELD(vh_action, episode);
    FIELD(vh_action, kind);
    FIELD(vh_action, n_points);
    FIELD(vh_action, trajectory);
    FIELD(vh_action, n_extras);
    FIELD(vh_action, extra_info);
    FIELD(vh_action, extras);
    FIELD(vh_action, message);
    end();

    BEGIN(vh_stage_stats);
    FIELD(vh_stage_stats, backend);
    FIELD(vh_stage_stats, first_block);
    FIELD(vh_stage_stats, n_blocks);
    FIELD(vh_stage_stats, passes);
    FIELD(vh_stage_stats, busy_ns);
    FIELD(vh_stage_stats, handoff_ns);
    FIELD(vh_stage_stats, prefill_block_ns);
    FIELD(vh_stage_stats, decode_block_ns);
    end();

    BEGIN(vh_session_info);
    FIELD(vh_session_info, struct_size);
    FIELD(vh_session_info, action_dim);
    FIELD(vh_session_info, n_llm_layers);
    FIELD(vh_session_info, n_prompt_image_tokens);
    FIELD(vh_session_info, backends);
    FIELD(vh_session_info, unnorm_key);
    FIELD(vh_session_info, host_weight_bytes);
    FIELD(vh_session_info, backend_weight_bytes);
    FIELD(vh_session_info, backend_work_bytes);
    FIELD(vh_session_info, gpu_bytes);
    FIELD(vh_session_info, execution_mode);
    FIELD(vh_session_info, frames_in_flight);
    FIELD(vh_session_info, n_stages);
    FIELD(vh_session_info, stages);
    FIELD(vh_session_info, llm_split);
    FIELD(vh_session_info, split_min);
    FIELD(vh_session_info, split_max);
    FIELD(vh_session_info, split_changes);
    FIELD(vh_session_info, frames_completed);
    FIELD(vh_session_info, handoff_ns);
    end();

    BEGIN(vh_latency);
    FIELD(vh_latency, count);
    FIELD(vh_latency, p50_ns);
    FIELD(vh_latency, p95_ns);
    FIELD(vh_latency, max_ns);
    FIELD(vh_latency, mean_ns);
    end();

    BEGIN(vh_session_stats);
    FIELD(vh_session_stats, struct_size);
    FIELD(vh_session_stats, submitted);
    FIELD(vh_session_stats, rejected);
    FIELD(vh_session_stats, completed);
    FIELD(vh_session_stats, dropped);
    FIELD(vh_session_stats, expired);
    FIELD(vh_session_stats, cancelled);
    FIELD(vh_session_stats, failed);
    FIELD(vh_session_stats, pending);
    FIELD(vh_session_stats, running);
    FIELD(vh_session_stats, unpolled);
    FIELD(vh_session_stats, episode);
    FIELD(vh_session_stats, end_to_end);
    FIELD(vh_session_stats, queue_wait);
    FIELD(vh_session_stats, compute);
    FIELD(vh_session_stats, vision);
    FIELD(vh_session_stats, prefill);
    FIELD(vh_session_stats, decode);
    FIELD(vh_session_stats, n_stages);
    FIELD(vh_session_stats, stage_pass);
    end();

    BEGIN(vh_prompt_request);
    FIELD(vh_prompt_request, struct_size);
    FIELD(vh_prompt_request, instruction);
    FIELD(vh_prompt_request, command);
    end();

    BEGIN(vh_prompt_round);
    FIELD(vh_prompt_round, struct_size);
    FIELD(vh_prompt_round, ids);
    FIELD(vh_prompt_round, ids_capacity);
    FIELD(vh_prompt_round, name);
    FIELD(vh_prompt_round, n_ids);
    FIELD(vh_prompt_round, image_position);
    FIELD(vh_prompt_round, n_image_rows);
    end();

    printf("}\n");
    return 0;
}
