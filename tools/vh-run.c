/*
 * vh-run: run a VLA model on a stream of image files and print one action per frame.
 *
 *   vh-run --model DIR --image FILE [--image FILE ...] --instruction TEXT [--unnorm-key KEY]
 *          [--backend NAME[,NAME...]] [--threads N] [--plugin-path P] [--json] [--verbose]
 *          [--decode-positions contiguous|openvla-hf440]
 *          [--split N] [--mode serial|pipeline|packed] [--gpu-mem-budget BYTES] [--zone N] [--trace PATH]
 *
 * With no --model and no --image it runs the bundled tiny OpenVLA model on the bundled frames.
 * The images are submitted in order as one stream (policy "block": none is dropped); results are
 * printed in that order. With --json each frame is one JSON object on its own line of stdout.
 * Errors go to stderr; the exit status is 0 when every frame produced an action, 1 when a frame
 * failed, 2 when the session could not start or the arguments are wrong.
 */
#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bundled_data.h"
#include "image_file.h"
#include "stage_options.h"
#include "vlahybrid/vlahybrid.h"

#define MAX_IMAGES 4096


#define MAX_PROMPT_IDS 4096

typedef struct options {
    const char *model;
    const char *images[MAX_IMAGES];
    int n_images;
    const char *instruction;
    const char *unnorm_key;
    const char *backends;
    const char *plugin_path;
    int threads;
    vh_session_params stage; /* --split, --mode, --gpu-mem-budget, --zone, --trace */
    int hf440_positions;
    int json;
    int verbose;
} options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vh-run [--model DIR] [--image FILE ...] [--instruction TEXT] [--unnorm-key KEY]\n"
            "              [--backend NAME[,NAME...]] [--threads N] [--plugin-path PATH] [--json] [--verbose]\n"
            "              [--decode-positions contiguous|openvla-hf440] [--split N] [--mode serial|pipeline|packed]\n"
            "              [--gpu-mem-budget BYTES] [--zone N] [--trace PATH]\n"
            VH_STAGE_OPTIONS_USAGE
            "Runs a Vision-Language-Action model on the images, in order, and prints one action per image.\n"
            "Without --model/--image: the bundled tiny OpenVLA model (%s) on the bundled frames (%s).\n",
            VH_BUNDLED_MODEL_DIR, VH_BUNDLED_FRAMES_DIR);
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    vh_session_params_init(&o->stage);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--verbose")) {
            o->verbose = 1;
        } else if (!has_value) {
            fprintf(stderr, "vh-run: %s needs a value\n", a);
            return -1;
        } else if (!strcmp(a, "--model")) {
            o->model = argv[++i];
        } else if (!strcmp(a, "--image")) {
            if (o->n_images == MAX_IMAGES) {
                fprintf(stderr, "vh-run: at most %d images\n", MAX_IMAGES);
                return -1;
            }
            o->images[o->n_images++] = argv[++i];
        } else if (!strcmp(a, "--instruction")) {
            o->instruction = argv[++i];
        } else if (!strcmp(a, "--unnorm-key")) {
            o->unnorm_key = argv[++i];
        } else if (!strcmp(a, "--backend")) {
            o->backends = argv[++i];
        } else if (!strcmp(a, "--plugin-path")) {
            o->plugin_path = argv[++i];
        } else if (!strcmp(a, "--decode-positions")) {
            const char *v = argv[++i];
            if (!strcmp(v, "contiguous")) o->hf440_positions = 0;
            else if (!strcmp(v, "openvla-hf440")) o->hf440_positions = 1;
            else {
                fprintf(stderr, "vh-run: --decode-positions is 'contiguous' or 'openvla-hf440'\n");
                return -1;
            }
        } else if (!strcmp(a, "--threads")) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 0 || n > 4096) {
                fprintf(stderr, "vh-run: %s needs a number in [0, 4096]\n", a);
                return -1;
            }
            o->threads = (int)n;
        } else {
            int taken = vh_parse_stage_option("vh-run", a, argv[++i], &o->stage);
            if (taken < 0) return -1;
            if (!taken) {
                fprintf(stderr, "vh-run: unknown option %s\n", a);
                return -1;
            }
        }
    }
    return 0;
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The bundled frames: every .png/.jpg of the folder, sorted by name. */
static int add_default_frames(options *o, char ***owned)
{
    const char *frames_dir = VH_BUNDLED_FRAMES_DIR;
    DIR *d = opendir(frames_dir);
    if (!d) {
        fprintf(stderr, "vh-run: no --image given and the bundled frames (%s) are missing\n", frames_dir);
        return -1;
    }
    char **paths = calloc(MAX_IMAGES, sizeof *paths);
    struct dirent *e;
    while (paths && (e = readdir(d)) && o->n_images < MAX_IMAGES) {
        const char *dot = strrchr(e->d_name, '.');
        if (!dot || (strcmp(dot, ".png") && strcmp(dot, ".jpg") && strcmp(dot, ".jpeg"))) continue;
        size_t n = strlen(frames_dir) + strlen(e->d_name) + 2;
        char *p = malloc(n);
        if (!p) break;
        snprintf(p, n, "%s/%s", frames_dir, e->d_name);
        paths[o->n_images++] = p;
    }
    closedir(d);
    if (!paths) return -1;
    qsort(paths, (size_t)o->n_images, sizeof *paths, compare_strings);
    for (int i = 0; i < o->n_images; i++) o->images[i] = paths[i];
    *owned = paths;
    return o->n_images ? 0 : -1;
}

static void log_to_stderr(void *user, vh_log_level level, const char *message)
{
    (void)user;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "vh-run [%s] %s\n", names[level <= VH_LOG_DEBUG ? level : VH_LOG_DEBUG], message);
}

typedef struct submitter {
    vh_session *session;
    const options *opt;
    atomic_int n_submitted;            /* frames accepted so far */
    atomic_int finished;               /* every image has been tried */
} submitter;

static void *submit_all(void *arg)
{
    submitter *sub = arg;
    for (int i = 0; i < sub->opt->n_images; i++) {
        uint8_t *rgb = NULL;
        uint32_t w = 0, h = 0;
        char why[512];
        vh_status st = vh_image_load(sub->opt->images[i], &rgb, &w, &h, why, sizeof why);
        if (st) {
            fprintf(stderr, "vh-run: %s\n", why);
            continue;
        }
        vh_frame f;
        vh_frame_init(&f);
        f.rgb = rgb;
        f.width = w;
        f.height = h;
        f.instruction = sub->opt->instruction;
        f.tag = (uint64_t)i;
        st = vh_submit_frame(sub->session, &f, NULL);
        free(rgb);
        if (st) fprintf(stderr, "vh-run: %s: %s\n", sub->opt->images[i], vh_last_error());
        else atomic_fetch_add(&sub->n_submitted, 1);
    }
    atomic_store(&sub->finished, 1);
    return NULL;
}

static void print_text(const options *o, const vh_action *a)
{
    printf("frame %llu %s: ", (unsigned long long)a->frame_id, o->images[a->tag]);
    if (a->status != VH_OK) {
        printf("%s\n", vh_status_string(a->status));
        return;
    }
    printf("action [");
    for (uint32_t i = 0; i < a->action_dim; i++) printf("%s%.6f", i ? ", " : "", a->values[i]);
    printf("] tokens [");
    for (uint32_t i = 0; i < a->action_dim; i++) printf("%s%d", i ? ", " : "", a->token_ids[i]);
    printf("]  vision %.1f ms, prefill %.1f ms, decode %.1f ms\n", a->vision_ns / 1e6, a->prefill_ns / 1e6,
           a->decode_ns / 1e6);
}

static void print_json(const options *o, const vh_action *a, const int32_t *prompt, size_t n_prompt)
{
    json_t *obj = json_object();
    json_object_set_new(obj, "frame", json_integer((json_int_t)a->frame_id));
    json_object_set_new(obj, "image", json_string(o->images[a->tag]));
    json_object_set_new(obj, "instruction", json_string(o->instruction));
    json_object_set_new(obj, "status", json_string(a->status == VH_OK ? "ok" : vh_status_string(a->status)));
    json_t *ids = json_array();
    for (size_t i = 0; i < n_prompt; i++) json_array_append_new(ids, json_integer(prompt[i]));
    json_object_set_new(obj, "prompt_ids", ids);
    json_t *tokens = json_array(), *values = json_array();
    if (a->status == VH_OK) {
        for (uint32_t i = 0; i < a->action_dim; i++) {
            json_array_append_new(tokens, json_integer(a->token_ids[i]));
            json_array_append_new(values, json_real(a->values[i]));
        }
    }
    json_object_set_new(obj, "action_ids", tokens);
    json_object_set_new(obj, "action", values);
    json_object_set_new(obj, "vision_ms", json_real(a->vision_ns / 1e6));
    json_object_set_new(obj, "prefill_ms", json_real(a->prefill_ns / 1e6));
    json_object_set_new(obj, "decode_ms", json_real(a->decode_ns / 1e6));
    json_object_set_new(obj, "latency_ms", json_real((a->finished_ns - a->submitted_ns) / 1e6));
    char *text = json_dumps(obj, JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (text) printf("%s\n", text);
    free(text);
    json_decref(obj);
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o)) {
        usage(stderr);
        return 2;
    }
    char **owned_paths = NULL;
    if (!o.model) o.model = VH_BUNDLED_MODEL_DIR;
    if (o.n_images == 0 && add_default_frames(&o, &owned_paths)) return 2;
    if (!o.instruction) o.instruction = "pick up the red block";

    vh_session_params p = o.stage;
    p.model_path = o.model;
    p.backends = o.backends;
    p.plugin_path = o.plugin_path;
    p.unnorm_key = o.unnorm_key;
    p.n_threads = o.threads;
    p.queue_policy = VH_QUEUE_BLOCK;
    p.decode_positions = o.hf440_positions ? VH_DECODE_POSITIONS_OPENVLA_HF440 : VH_DECODE_POSITIONS_CONTIGUOUS;
    if (o.verbose) {
        p.log_fn = log_to_stderr;
        p.log_level = VH_LOG_DEBUG;
    }
    vh_session *s = NULL;
    if (vh_session_create(&p, &s) != VH_OK) {
        fprintf(stderr, "vh-run: %s\n", vh_last_error());
        return 2;
    }

    int32_t prompt[MAX_PROMPT_IDS];
    size_t n_prompt = 0;
    if (vh_session_prompt_ids(s, o.instruction, prompt, MAX_PROMPT_IDS, &n_prompt) != VH_OK) {
        fprintf(stderr, "vh-run: %s\n", vh_last_error());
        vh_session_destroy(s);
        return 2;
    }

    /* Decode and submit on one thread, print results here as they come. */
    submitter sub = {.session = s, .opt = &o};
    pthread_t thread;
    if (pthread_create(&thread, NULL, submit_all, &sub) != 0) {
        fprintf(stderr, "vh-run: cannot start the submitting thread\n");
        vh_session_destroy(s);
        return 2;
    }
    int polled = 0, failures = 0;
    while (!atomic_load(&sub.finished) || polled < atomic_load(&sub.n_submitted)) {
        vh_action a;
        vh_action_init(&a);
        if (vh_poll_action(s, &a, 100) != VH_OK) continue;
        polled++;
        if (a.status != VH_OK) {
            failures++;
            fprintf(stderr, "vh-run: %s: %s: %s\n", o.images[a.tag], vh_status_string(a.status),
                    vh_session_last_error(s));
        }
        if (o.json) print_json(&o, &a, prompt, n_prompt);
        else print_text(&o, &a);
        fflush(stdout);
    }
    pthread_join(thread, NULL);
    failures += o.n_images - polled; /* images that could not be read or submitted */
    vh_session_destroy(s);
    if (owned_paths) {
        for (int i = 0; i < o.n_images; i++) free(owned_paths[i]);
        free(owned_paths);
    }
    return failures ? 1 : 0;
}
