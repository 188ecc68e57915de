/*
 * vh-run: run a VLA model on a stream of image files and print one action per frame.
 *
 *   vh-run --model DIR --image FILE [--image FILE ...] --instruction TEXT [--unnorm-key KEY]
 *          [--backend NAME[,NAME...]] [--threads N] [--plugin-path P] [--json] [--verbose]
 *          [--decode-positions contiguous|openvla-hf440]
 *          [--frames N] [--rate HZ] [--policy latest|reject|block] [--queue N] [--deadline-ms MS] [--warmup N]
 *          [--cpu-affinity LIST]
 *          [--split N] [--mode serial|pipeline|packed] [--gpu-mem-budget BYTES] [--zone N] [--trace PATH]
 *   vh-run --model ORION_DIR --vision-tokens FILE [--vision-tokens FILE ...] [--command N] [--noise FILE]
 *          [--seed S] [the options above but --image, --instruction, --unnorm-key, --decode-positions]
 *   vh-run [--model DIR] --frame-file FRAMES.jsonl [the options above]
 *
 * --frame-file: the frames as JSON lines, each with its own image (or vision tokens), instruction,
 * command, noise, timestamp_ns, sequence, tag, unnorm_key and cameras (tools/frame_file.h,
 * doc/api.md "Frame files"); the options stand for what a line leaves out, frames cycle over the
 * lines as over images, and --check finds each line's record by its image, instruction and dataset
 * (a driving model's frame k: record k, driving_reference_check.h). Every line is checked before the
 * model loads.
 *
 * vh-run says on stderr which backends the session chose and their numerics (backend_numerics.c);
 * --check judges a bf16 run by the bf16 criterion (doc/check-format.md), or as --numerics says.
 *
 * An Orion model (config.json model_type "orion", as tools/orion/convert_orion.py writes it) starts
 * from precomputed vision tokens: each --vision-tokens FILE is a .npy file (float32 or float16, C
 * order, shape (n, width), tools/npy_file.h) or raw little-endian float32 holding exactly n x width
 * values, row-major, with n = the config's vision_tokens (529) and width = its
 * text_config.hidden_size (4096 for the released model); frames cycle over the files as they do over
 * images. --command N (0..5, CARLA RoadOption - 1; default 3, lane follow) goes with every frame;
 * --noise FILE (.npy or raw float32, planner.latent_dim = 32 values) is the planner's epsilon for every frame,
 * else the library draws it from --seed S (default 0) and the frame's sequence (0, 1, ...). Each
 * frame's answer is its trajectory (n_points (x, y) waypoints, metres); with --json also the extras
 * (mode_trajectories, mu, log_sigma). --check REFERENCE takes a driving model's --json lines as the
 * reference, frame k against line k (tools/driving_reference_check.c, doc/check-format.md).
 *
 * With no --model and no --image it runs the bundled tiny OpenVLA model on the bundled frames.
 * The images (or N frames cycling over them, --frames) are submitted in order as one stream: as
 * fast as the queue takes them (policy "block": none is dropped), or with --rate by the clock, as
 * a camera would (policy "latest"); --policy overrides either default. Each frame gets one line:
 * its action, or why it has none (dropped, expired, cancelled), in submission order; a frame that
 * --policy reject refused gets "queue full" and no frame id, when it is refused. With --json each
 * frame is one JSON object on its own line of stdout. The session's statistics follow at the end
 * (on stderr with --json, so that stdout stays one object a line). Errors go to stderr; the exit
 * status is 0 when every frame was answered and none failed (dropped, expired and refused frames
 * are the policy's and the deadline's doing, not failures), 1 when a frame failed or an accepted
 * frame was never answered, 2 when the session could not start or the arguments are wrong.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend_numerics.h"
#include "bundled_data.h"
#include "driving_reference_check.h"
#include "frame_file.h"
#include "image_file.h"
#include "json_line.h"
#include "npy_file.h"
#include "orion_inputs.h"
#include "reference_check.h"
#include "stage_options.h"
#include "tool_cli.h"
#include "vlahybrid/vlahybrid.h"

#define MAX_IMAGES 4096
#define MAX_FRAMES 10000000


#define MAX_PROMPT_IDS 4096

/* Decoded images kept from the check before the load to their submission, up to this many bytes in
 * all (beyond, they are decoded again when submitted). */
#define PRELOAD_BYTES_LIMIT ((size_t)256 << 20)

#define DEFAULT_INSTRUCTION "pick up the red block"
#define DEFAULT_CHECK_TOLERANCE 1e-6
/* --check, bf16: the reference logit gap below which a bf16 run may pick another token
 * (doc/check-format.md, "The criterion", derives it for the fixtures' model) */
#define DEFAULT_CHECK_MARGIN 0.25

/* --numerics not given: judged by the backends' own (tools/backend_numerics.c) */
#define NUMERICS_AUTO (-1)

/* --policy not given: "block" without --rate (every image computed), the library's default with. */
#define POLICY_UNSET (-1)

typedef struct options {
    const char *model;
    const char *images[MAX_IMAGES]; /* Orion: the --vision-tokens files */
    int n_images;
    const char *token_files[MAX_IMAGES]; /* --vision-tokens */
    int n_token_files;
    int command;             /* --command; -1: not given */
    const char *noise_file;  /* --noise */
    int orion;               /* the model is an Orion model */
    const char *instruction;
    const char *instructions[MAX_IMAGES]; /* --check: each frame's own (its reference record's); NULL: instruction */
    const char *unnorm_key;
    const char *backends;
    const char *plugin_path;
    int threads;
    vh_session_params stage; /* --split, --mode, --gpu-mem-budget, --zone, --trace, --queue, --deadline-ms */
    int n_frames;            /* --frames; 0: one per image */
    double rate_hz;          /* --rate; 0: submit as fast as the queue takes frames */
    int policy;              /* --policy as a vh_queue_policy, or POLICY_UNSET */
    int hf440_positions;
    int json;
    int verbose;
    int warmup_given;        /* --warmup was given (else a one-frame run sets 0) */
    const char *check_path;  /* --check REFERENCE */
    double check_tolerance;  /* --check-tolerance */
    double check_margin;     /* --check-margin */
    int check_tolerance_given, check_margin_given; /* (a driving model's defaults are its own) */
    int numerics;            /* --numerics: a vh_compute_precision, or NUMERICS_AUTO */
    const char *frame_file_path;      /* --frame-file */
    const char *dump_vision_tokens;   /* --dump-vision-tokens DIR */
    const vh_frame_file *frame_file;  /* its frames, one an input (images[i] is entry i's) */
} options;

/* The options that take a value (the others: --json, --verbose, --help, --version). */
static const char *const value_flags[] = {
    "--model", "--image", "--instruction", "--unnorm-key", "--backend", "--threads", "--plugin-path",
    "--decode-positions", "--frames", "--rate", "--policy", "--queue", "--deadline-ms", "--warmup",
    "--cpu-affinity", "--seed", "--vision-tokens", "--command", "--noise", "--check", "--check-tolerance",
    "--check-margin", "--numerics", "--frame-file", "--dump-vision-tokens",
    VH_STAGE_OPTION_FLAGS, NULL};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vh-run [--model DIR] [--image FILE ... | --frame-file FILE.jsonl] [--instruction TEXT]\n"
            "              [--unnorm-key KEY]\n"
            "              [--backend NAME[,NAME...]] [--threads N] [--plugin-path PATH] [--json] [--verbose]\n"
            "              [--decode-positions contiguous|openvla-hf440] [--frames N] [--rate HZ]\n"
            "              [--policy latest|reject|block] [--queue N] [--deadline-ms MS] [--warmup N]\n"
            "              [--cpu-affinity LIST] [--check REFERENCE [--check-tolerance T] [--check-margin M]\n"
            "              [--numerics auto|fp32|bf16]]\n"
            "              [--split N] [--mode serial|pipeline|packed] [--gpu-mem-budget BYTES] [--zone N] [--trace PATH]\n"
            "       vh-run --help | --version\n"
            "Runs a Vision-Language-Action model on the images, in order, prints one line per frame (its action,\n"
            "or why it has none), then the session's statistics (on stderr with --json). Every option and image\n"
            "is checked (images decoded) before the model loads; on a terminal the load shows its progress.\n"
            "  --model DIR           Hugging Face checkpoint folder (default: the bundled tiny OpenVLA, %s)\n"
            "  --image FILE          a PNG or JPEG frame; repeat for several (default: the bundled frames, %s)\n"
            "  --frame-file FILE     the frames as JSON lines, each with its own image or vision tokens,\n"
            "                        instruction, command, noise, timestamp_ns, sequence, tag, unnorm_key and\n"
            "                        cameras (doc/api.md, \"Frame files\"; paths from the file's folder); the\n"
            "                        options give what a line leaves out; instead of --image, --vision-tokens\n"
            "  --dump-vision-tokens DIR  write the vision tokens a camera front end made for each frame as\n"
            "                        DIR/frame_<id>.npy (float32 [rows, width]; Orion: 529 rows, det 0..272, map\n"
            "                        273..528), to compare the front end with the released agent's; DIR must exist\n"
            "  --instruction TEXT    the task of every frame (default: \"" DEFAULT_INSTRUCTION "\")\n"
            "  --unnorm-key KEY      norm_stats dataset of the actions (default: the checkpoint's only one)\n"
            "  --backend NAMES       one backend, or two comma-separated stages such as cuda,cpu_amx\n"
            "                        (default: the best-scoring plugin found)\n"
            "  --threads N           CPU threads for each CPU backend (default 0: all CPUs the session may use)\n"
            "  --plugin-path PATH    a plugin file, or a folder searched before VH_BACKEND_PATH (default: none)\n"
            "  --decode-positions P  contiguous (default) | openvla-hf440: as OpenVLA's transformers 4.40 stack\n"
            "  --json                one JSON object a frame on stdout (image, instruction, prompt_ids,\n"
            "                        prompt_rounds (every round's ids and image position; driving models too),\n"
            "                        action_ids, action, timings), statistics on stderr (default: text)\n"
            "  --verbose             the library's log on stderr, debug level (default: off)\n"
            "  --frames N            submit N frames, cycling over the images (default: one per image)\n"
            "  --rate HZ             submit a frame every 1/HZ s, as a camera would, whatever the results\n"
            "                        (default: as fast as the queue takes them)\n"
            "  --policy P            when the queue is full: latest (the oldest waiting frame is dropped),\n"
            "                        reject (the new frame is refused and counted), block (submit waits);\n"
            "                        default: block without --rate, latest with\n"
            "  --queue N             frames waiting to start (default 2)\n"
            "  --deadline-ms MS      a frame not started within MS ms of its submission expires (default 0: none)\n"
            "  --warmup N            frames the session runs inside its creation, 0..64 (default -1: its own\n"
            "                        choice, 1 on CPUs, 3+ with a GPU; but 0 for a run of one frame, which\n"
            "                        would otherwise pay the first-use costs in the warm-up and then its frame)\n"
            "  --cpu-affinity LIST   CPUs the session's threads run on, e.g. 4-15 (default: this thread's)\n"
            "  --seed S              seed of the noise a sampling model (Orion) draws per frame (default 0)\n"
            "  --check REFERENCE     compare each frame's prompt ids, action token ids and action with its\n"
            "                        record in REFERENCE (the fixtures' JSON or vh-run --json lines; records\n"
            "                        found by image file name, instruction and dataset; doc/check-format.md)\n"
            "                        and print a parity report instead of the actions; without --image or\n"
            "                        --frame-file the frames are the reference's records. Exit status 0 only\n"
            "                        when every frame passes. Orion, MindDrive: REFERENCE is a driving model's\n"
            "                        vh-run --json lines, record k the reference of frame k (without --frames,\n"
            "                        one frame per record, cycling over the inputs); the trajectory, the extras\n"
            "                        and MindDrive's speed decision are compared\n"
            "  --check-tolerance T   the largest |action - reference| that passes (default %g); driving models:\n"
            "                        the largest |output - reference| over the output's largest |reference|\n"
            "                        (default %g under fp32; bf16: %g Orion, %g MindDrive, for each stage of\n"
            "                        the run and of the reference that computes in bf16)\n"
            "  --check-margin M      bf16 criterion: the ids may part from the reference's at a step where the\n"
            "                        run's token is among the reference's best with a logit within M of the\n"
            "                        best's (default %g, derived in doc/check-format.md); MindDrive: the speed\n"
            "                        decision may differ where the reference's best two log-probabilities are\n"
            "                        within M (default %g for each bf16 stage)\n"
            "  --numerics N          how --check judges: auto (default: bf16 when a backend computes in bf16,\n"
            "                        as cpu_amx and cuda do, or for a driving model when the reference's did;\n"
            "                        else fp32) | fp32 (ids equal) | bf16\n"
            VH_STAGE_OPTIONS_USAGE
            "Orion and MindDrive models (config.json model_type \"orion\", \"minddrive\"), instead of --image and\n"
            "--instruction:\n"
            "  --vision-tokens FILE  a frame's vision tokens, n x width with n = config.json's vision_tokens (529),\n"
            "                        width = text_config.hidden_size: a .npy file (float32 or float16, C order,\n"
            "                        shape (n, width) or (1, n, width)) or raw little-endian float32, row-major;\n"
            "                        repeat it for several frames (frames cycle over the files)\n"
            "  --command N           the high-level command of every frame, 0..5 (default 3: lane follow)\n"
            "  --noise FILE          the planner's noise for every frame: .npy (float32/float16) or raw float32,\n"
            "                        planner.latent_dim (32) values; MindDrive: the speed planner's 32, then\n"
            "                        the path planner's 32\n"
            "                        (default: drawn from --seed and the frame's sequence)\n"
            "                        Each frame prints its trajectory (MindDrive: the path and the speed\n"
            "                        decision; with --json the extras).\n"
            "  --help, -h            this text; --version: the version of the vlahybrid library in use\n"
            "Exit status: 0 every frame answered (and with --check, every frame passed); 1 a frame failed, was\n"
            "not answered or did not pass the check; 2 bad arguments or inputs, or the session did not start.\n",
            VH_BUNDLED_MODEL_DIR, VH_BUNDLED_FRAMES_DIR, DEFAULT_CHECK_TOLERANCE, VH_DRIVING_FP32_TOLERANCE,
            VH_ORION_BF16_TOLERANCE, VH_MINDDRIVE_BF16_TOLERANCE, DEFAULT_CHECK_MARGIN, VH_DRIVING_BF16_MARGIN);
}

static int parse_count(const char *flag, const char *value, long lo, long hi, long *out)
{
    return vh_tool_parse_long("vh-run", flag, value, lo, hi, out);
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    vh_session_params_init(&o->stage);
    o->policy = POLICY_UNSET;
    o->command = -1;
    o->check_tolerance = DEFAULT_CHECK_TOLERANCE;
    o->check_margin = DEFAULT_CHECK_MARGIN;
    o->numerics = NUMERICS_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long n;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--version")) {
            vh_tool_print_version(stdout, "vh-run");
            exit(0);
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--verbose")) {
            o->verbose = 1;
        } else if (vh_tool_check_option("vh-run", argc, argv, i, value_flags)) {
            return -1;
        } else if (!strcmp(a, "--check")) {
            o->check_path = argv[++i];
        } else if (!strcmp(a, "--check-tolerance")) {
            char *end;
            const char *v = argv[++i];
            o->check_tolerance = strtod(v, &end);
            o->check_tolerance_given = 1;
            if (*end || end == v || !(o->check_tolerance >= 0 && o->check_tolerance < INFINITY)) {
                fprintf(stderr, "vh-run: --check-tolerance needs a number >= 0\n");
                return -1;
            }
        } else if (!strcmp(a, "--check-margin")) {
            char *end;
            const char *v = argv[++i];
            o->check_margin = strtod(v, &end);
            o->check_margin_given = 1;
            if (*end || end == v || !(o->check_margin >= 0 && o->check_margin < INFINITY)) {
                fprintf(stderr, "vh-run: --check-margin needs a number of logits >= 0\n");
                return -1;
            }
        } else if (!strcmp(a, "--numerics")) {
            const char *v = argv[++i];
            if (!strcmp(v, "auto")) o->numerics = NUMERICS_AUTO;
            else if (!strcmp(v, "fp32")) o->numerics = VH_COMPUTE_FP32;
            else if (!strcmp(v, "bf16")) o->numerics = VH_COMPUTE_BF16;
            else {
                fprintf(stderr, "vh-run: --numerics is 'auto', 'fp32' or 'bf16'\n");
                return -1;
            }
        } else if (!strcmp(a, "--frame-file")) {
            o->frame_file_path = argv[++i];
        } else if (!strcmp(a, "--dump-vision-tokens")) {
            o->dump_vision_tokens = argv[++i];
            struct stat st;
            if (stat(o->dump_vision_tokens, &st) || !S_ISDIR(st.st_mode)) {
                fprintf(stderr, "vh-run: --dump-vision-tokens %s: not a folder\n", o->dump_vision_tokens);
                return -1;
            }
        } else if (!strcmp(a, "--model")) {
            o->model = argv[++i];
        } else if (!strcmp(a, "--image")) {
            if (o->n_images == MAX_IMAGES) {
                fprintf(stderr, "vh-run: at most %d images\n", MAX_IMAGES);
                return -1;
            }
            o->images[o->n_images++] = argv[++i];
        } else if (!strcmp(a, "--vision-tokens")) {
            if (o->n_token_files == MAX_IMAGES) {
                fprintf(stderr, "vh-run: at most %d vision token files\n", MAX_IMAGES);
                return -1;
            }
            o->token_files[o->n_token_files++] = argv[++i];
        } else if (!strcmp(a, "--command")) {
            if (parse_count(a, argv[++i], 0, 63, &n)) return -1;
            o->command = (int)n;
        } else if (!strcmp(a, "--noise")) {
            o->noise_file = argv[++i];
        } else if (!strcmp(a, "--seed")) {
            char *end;
            const char *v = argv[++i];
            errno = 0;
            unsigned long long seed = strtoull(v, &end, 10);
            if (*end || end == v || *v == '-' || errno) {
                fprintf(stderr, "vh-run: --seed needs a number in [0, 2^64)\n");
                return -1;
            }
            o->stage.seed = (uint64_t)seed;
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
            if (parse_count(a, argv[++i], 0, 4096, &n)) return -1;
            o->threads = (int)n;
        } else if (!strcmp(a, "--frames")) {
            if (parse_count(a, argv[++i], 1, MAX_FRAMES, &n)) return -1;
            o->n_frames = (int)n;
        } else if (!strcmp(a, "--queue")) {
            if (parse_count(a, argv[++i], 1, 1 << 20, &n)) return -1;
            o->stage.queue_capacity = (uint32_t)n;
        } else if (!strcmp(a, "--cpu-affinity")) {
            o->stage.cpu_affinity = argv[++i];
        } else if (!strcmp(a, "--warmup")) {
            if (parse_count(a, argv[++i], -1, 64, &n)) return -1;
            o->stage.warmup_frames = (int32_t)n;
            o->warmup_given = 1;
        } else if (!strcmp(a, "--deadline-ms")) {
            if (parse_count(a, argv[++i], 0, 3600000, &n)) return -1;
            o->stage.deadline_ms = (uint32_t)n;
        } else if (!strcmp(a, "--rate")) {
            char *end;
            const char *v = argv[++i];
            o->rate_hz = strtod(v, &end);
            if (*end || end == v || !(o->rate_hz > 0 && o->rate_hz <= 1e6)) {
                fprintf(stderr, "vh-run: --rate needs frames per second in (0, 1000000]\n");
                return -1;
            }
        } else if (!strcmp(a, "--policy")) {
            const char *v = argv[++i];
            if (!strcmp(v, "latest")) o->policy = VH_QUEUE_LATEST;
            else if (!strcmp(v, "reject")) o->policy = VH_QUEUE_REJECT;
            else if (!strcmp(v, "block")) o->policy = VH_QUEUE_BLOCK;
            else {
                fprintf(stderr, "vh-run: --policy is 'latest', 'reject' or 'block'\n");
                return -1;
            }
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

/* --dump-vision-tokens DIR: each frame's front-end tokens as DIR/frame_<id>.npy (float32 [rows, width]). */
static void dump_vision_tokens(void *user, uint64_t frame_id, const float *tokens, uint32_t rows, uint32_t width)
{
    const char *dir = user;
    char path[4096], why[512];
    snprintf(path, sizeof path, "%s/frame_%06llu.npy", dir, (unsigned long long)frame_id);
    if (vh_npy_write_f32(path, tokens, rows, width, why, sizeof why)) fprintf(stderr, "vh-run: %s\n", why);
}

static void log_to_stderr(void *user, vh_log_level level, const char *message)
{
    (void)user;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "vh-run [%s] %s\n", names[level <= VH_LOG_DEBUG ? level : VH_LOG_DEBUG], message);
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Absolute sleeps: a late wake-up delays one frame and does not push back every later one. */
static void sleep_until(int64_t when_ns)
{
    struct timespec t = {.tv_sec = (time_t)(when_ns / 1000000000), .tv_nsec = (long)(when_ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {
    }
}

typedef struct decoded_image {
    uint8_t *rgb; /* NULL: the file could not be read */
    uint32_t width, height;
} decoded_image;

static int decode_image(const char *path, decoded_image *img)
{
    char why[512];
    *img = (decoded_image){0};
    if (vh_image_load(path, &img->rgb, &img->width, &img->height, why, sizeof why) != VH_OK) {
        fprintf(stderr, "vh-run: %s\n", why);
        img->rgb = NULL;
        return -1;
    }
    return 0;
}

/* What the submitting and the polling threads share. Per frame (indexed by sequence) the id
 * vh_submit_frame gave it and the id of the answer polled for it, compared once both threads are
 * done: every accepted frame must be answered exactly once. */
typedef struct run_state {
    vh_session *session;
    const options *opt;
    decoded_image *preloaded;  /* images decoded before the load (rgb NULL: decoded again at submit) */
    float **tokens;            /* Orion: each --vision-tokens file's floats, read before the start */
    vh_orion_shape shape;      /* Orion: the tokens' and the noise's sizes */
    const float *noise;        /* Orion: --noise, or NULL */
    float **noises;            /* Orion, --frame-file: each line's own noise (NULL: --noise's) */
    decoded_image **cameras;   /* --frame-file: each line's camera images, decoded before the load */
    uint64_t *accepted_id;     /* written by the submitting thread; 0: not accepted */
    uint64_t *answered_id;     /* written by the polling thread; 0: no answer */
    atomic_int n_accepted;
    atomic_int n_rejected;     /* VH_ERR_BUSY under --policy reject */
    atomic_int n_not_submitted;/* unreadable image or a failed submit */
    atomic_int finished;       /* every frame has been tried */
    const vh_reference *reference;          /* --check */
    const vh_reference_case **frame_record; /* --check: each image's record */
    vh_check_criterion criterion;           /* --check: how a frame is judged */
    const vh_driving_reference *driving;    /* --check, a driving model: record k is frame k's */
    vh_driving_criterion driving_criterion;
    atomic_int n_checked, n_passed, n_near_ties;
    char backends[128];                     /* the session's backends */
    vh_compute_precision compute;           /* ... their coarsest compute */
} run_state;

static const char *frame_instruction(const options *o, uint64_t image_index)
{
    return o->instructions[image_index] ? o->instructions[image_index] : o->instruction;
}

/* vh-run keeps its own bookkeeping in a frame's tag: the frame's place k in the stream (a frame
 * file's "tag" is printed with the answer, not passed); its input (image, tokens, frame file line)
 * is k mod the inputs, as frames cycle over them. */
static int input_of(const options *o, const vh_action *a)
{
    return (int)(a->tag % (uint64_t)o->n_images);
}

/* The frame file's line for an input, or NULL without one. */
static const vh_frame_file_entry *frame_entry(const options *o, int input)
{
    return o->frame_file ? &o->frame_file->entries[input] : NULL;
}

static int frame_command(const options *o, int input)
{
    const vh_frame_file_entry *e = frame_entry(o, input);
    return e && e->command >= 0 ? e->command : o->command;
}

static const char *frame_unnorm_key(const options *o, int input)
{
    const vh_frame_file_entry *e = frame_entry(o, input);
    return e && e->unnorm_key ? e->unnorm_key : o->unnorm_key;
}

/* What a frame file's line gave (sequence, tag, stream, timestamp_ns, unnorm_key), back in its JSON. */
static void add_frame_file_members(const options *o, json_t *obj, const vh_action *a)
{
    const vh_frame_file_entry *e = frame_entry(o, input_of(o, a));
    if (!e) return;
    json_object_set_new(obj, "line", json_integer(e->line));
    if (e->has_sequence) json_object_set_new(obj, "sequence", json_integer((json_int_t)a->sequence));
    if (e->has_tag) json_object_set_new(obj, "tag", json_integer((json_int_t)e->tag));
    if (e->has_stream) json_object_set_new(obj, "stream", json_integer((json_int_t)e->stream));
    if (e->has_timestamp) json_object_set_new(obj, "timestamp_ns", json_integer((json_int_t)a->timestamp_ns));
    if (e->unnorm_key) json_object_set_new(obj, "unnorm_key", json_string(e->unnorm_key));
    if (e->n_cameras) json_object_set_new(obj, "cameras", json_integer(e->n_cameras));
}

static void print_text(const options *o, const vh_action *a)
{
    if (a->frame_id) printf("frame %llu %s: ", (unsigned long long)a->frame_id, o->images[input_of(o, a)]);
    else printf("frame - %s: ", o->images[input_of(o, a)]); /* refused: it never got an id */
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

/* A number as a JSON real; null for a NaN or an infinity (JSON has neither; json_real refuses
 * them, which would shorten the array). */
static json_t *finite_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* The session's backends and their numerics, as the stderr line says them (report_backends). */
static json_t *numerics_json(const run_state *run)
{
    json_t *stages = json_array();
    const char *p = run->backends;
    while (*p) {
        const size_t n = strcspn(p, ",");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
        const vh_backend_numerics *b = vh_backend_numerics_of(name);
        json_array_append_new(stages, json_pack("{s:s, s:s, s:s, s:s}", "backend", name, "weights", b->weights,
                                                "compute", vh_compute_precision_name(b->compute), "description",
                                                b->description));
        p += n + (p[n] == ',');
    }
    return json_pack("{s:s, s:s, s:o}", "compute", vh_compute_precision_name(run->compute), "chosen",
                     run->opt->backends ? "--backend" : "default: best available", "stages", stages);
}

/* The frame's timings, backends and numerics added to its JSON object, then the object as one
 * line (numbers in their shortest round-trip form), and freed. */
static void print_json_line(const run_state *run, json_t *obj, const vh_action *a)
{
    json_object_set_new(obj, "vision_ms", json_real(a->vision_ns / 1e6));
    json_object_set_new(obj, "prefill_ms", json_real(a->prefill_ns / 1e6));
    json_object_set_new(obj, "decode_ms", json_real(a->decode_ns / 1e6));
    json_object_set_new(obj, "latency_ms", json_real((a->finished_ns - a->submitted_ns) / 1e6));
    add_frame_file_members(run->opt, obj, a);
    json_object_set_new(obj, "backends", json_string(run->backends));
    json_object_set_new(obj, "numerics", numerics_json(run));
    vh_json_print_line(stdout, obj);
    json_decref(obj);
}

/* --check: the frame against its record, one line (or the "check" member of its JSON object). */
static json_t *check_frame(run_state *run, const vh_action *a, const int32_t *prompt, size_t n_prompt)
{
    const options *o = run->opt;
    const vh_reference_case *c = run->frame_record[input_of(o, a)];
    vh_check_result r;
    vh_reference_compare(c, prompt, n_prompt, a, &run->criterion, &r);
    atomic_fetch_add(&run->n_checked, 1);
    if (r.pass) atomic_fetch_add(&run->n_passed, 1);
    if (r.pass && r.near_tie_step >= 0) atomic_fetch_add(&run->n_near_ties, 1);
    if (o->json) {
        json_t *check = json_object();
        json_object_set_new(check, "prompt_ids_equal", json_boolean(r.prompt_equal));
        json_object_set_new(check, "action_ids_equal", json_boolean(r.action_ids_equal));
        json_object_set_new(check, "max_action_delta",
                            isfinite(r.max_action_delta) ? json_real(r.max_action_delta) : json_null());
        json_object_set_new(check, "tolerance", json_real(o->check_tolerance));
        json_object_set_new(check, "criterion", json_string(run->criterion.bf16 ? "bf16" : "fp32"));
        if (run->criterion.bf16) {
            json_object_set_new(check, "margin", json_real(run->criterion.bf16_margin));
            json_object_set_new(check, "near_tie_step", r.near_tie_step >= 0 ? json_integer(r.near_tie_step) : json_null());
            if (r.near_tie_step >= 0) json_object_set_new(check, "near_tie_gap", json_real(r.near_tie_gap));
        }
        json_object_set_new(check, "pass", json_boolean(r.pass));
        return check;
    }
    printf("check frame %llu %s / \"%s\": ", (unsigned long long)a->tag, o->images[input_of(o, a)],
           frame_instruction(o, (uint64_t)input_of(o, a)));
    if (a->status != VH_OK) printf("no action (%s)", vh_status_string(a->status));
    else if (r.near_tie_step >= 0)
        printf("prompt ids %s, action ids equal up to step %d (then token %d, the reference's %d: a near-tie, "
               "reference logit gap %.3g < %g; later steps not compared), max |d action| %.3g before it",
               r.prompt_equal ? "equal" : "DIFFER", r.near_tie_step, a->token_ids[r.near_tie_step],
               c->action_ids[r.near_tie_step], r.near_tie_gap, run->criterion.bf16_margin, r.max_action_delta);
    else printf("prompt ids %s, action ids %s, max |d action| %.3g", r.prompt_equal ? "equal" : "DIFFER",
                r.action_ids_equal ? "equal" : "DIFFER", r.max_action_delta);
    printf(" (tolerance %g): %s\n", o->check_tolerance, r.pass ? "pass" : "FAIL");
    return NULL;
}

/* --check, a driving model: frame k (its tag) against record k; one line, or the "check" member of
 * its JSON object. */
static json_t *check_driving_frame(run_state *run, const vh_action *a)
{
    const options *o = run->opt;
    const vh_driving_record *r = &run->driving->records[a->tag];
    vh_driving_result res;
    vh_driving_compare(r, a, &run->driving_criterion, &res);
    atomic_fetch_add(&run->n_checked, 1);
    if (res.pass) atomic_fetch_add(&run->n_passed, 1);
    if (res.pass && res.near_tie) atomic_fetch_add(&run->n_near_ties, 1);
    if (o->json) return vh_driving_result_json(r, &res, &run->driving_criterion);
    const int input = input_of(o, a);
    printf("check frame %llu %s (command %d; reference line %ld): ", (unsigned long long)a->tag, o->images[input],
           frame_command(o, input), r->line);
    vh_driving_result_print(stdout, r, a, &res, &run->driving_criterion);
    return NULL;
}

static void print_json(const run_state *run, const vh_action *a, const int32_t *prompt, size_t n_prompt,
                       json_t *check, json_t *rounds)
{
    const options *o = run->opt;
    json_t *obj = json_object();
    json_object_set_new(obj, "frame", a->frame_id ? json_integer((json_int_t)a->frame_id) : json_null());
    json_object_set_new(obj, "image", json_string(o->images[input_of(o, a)]));
    json_object_set_new(obj, "instruction", json_string(frame_instruction(o, (uint64_t)input_of(o, a))));
    json_object_set_new(obj, "status", json_string(a->status == VH_OK ? "ok" : vh_status_string(a->status)));
    json_t *ids = json_array();
    for (size_t i = 0; i < n_prompt; i++) json_array_append_new(ids, json_integer(prompt[i]));
    json_object_set_new(obj, "prompt_ids", ids);
    json_object_set_new(obj, "prompt_rounds", rounds);
    json_t *tokens = json_array(), *values = json_array();
    if (a->status == VH_OK) {
        for (uint32_t i = 0; i < a->action_dim; i++) {
            json_array_append_new(tokens, json_integer(a->token_ids[i]));
            json_array_append_new(values, finite_or_null(a->values[i]));
        }
    }
    json_object_set_new(obj, "action_ids", tokens);
    json_object_set_new(obj, "action", values);
    if (check) json_object_set_new(obj, "check", check);
    print_json_line(run, obj, a);
}

/* Orion, MindDrive: the trajectory, (x, y) in metres (MindDrive: the path, and the speed decision). */
static void print_orion_text(const options *o, const vh_action *a)
{
    if (a->frame_id) printf("frame %llu %s: ", (unsigned long long)a->frame_id, o->images[input_of(o, a)]);
    else printf("frame - %s: ", o->images[input_of(o, a)]);
    if (a->status != VH_OK) {
        printf("%s\n", vh_status_string(a->status));
        return;
    }
    printf("trajectory [");
    for (uint32_t i = 0; i < a->n_points && i < VH_MAX_TRAJECTORY_POINTS; i++)
        printf("%s(%.6f, %.6f)", i ? ", " : "", a->trajectory[2 * i], a->trajectory[2 * i + 1]);
    printf("] command %d", frame_command(o, input_of(o, a)));
    if (a->action_dim == 1) printf(" speed decision %.0f (token %d)", a->values[0], a->token_ids[0]); /* MindDrive */
    printf("  vision %.1f ms, prefill %.1f ms, decode %.1f ms\n", a->vision_ns / 1e6, a->prefill_ns / 1e6,
           a->decode_ns / 1e6);
}

static json_t *json_floats(const float *v, uint32_t n)
{
    json_t *arr = json_array();
    for (uint32_t i = 0; i < n; i++) json_array_append_new(arr, finite_or_null(v[i]));
    return arr;
}

/* Orion, --json: the trajectory flat (x0, y0, x1, y1, ...) and the extras by name. */
static void print_orion_json(const run_state *run, const vh_action *a, json_t *rounds, json_t *check)
{
    const options *o = run->opt;
    json_t *obj = json_object();
    json_object_set_new(obj, "frame", a->frame_id ? json_integer((json_int_t)a->frame_id) : json_null());
    const int input = input_of(o, a);
    const vh_frame_file_entry *e = frame_entry(o, input);
    json_object_set_new(obj, "vision_tokens", json_string(o->images[input]));
    json_object_set_new(obj, "command", json_integer(frame_command(o, input)));
    const char *noise = e && e->noise_file ? e->noise_file : e && e->noise ? "inline" : o->noise_file;
    json_object_set_new(obj, "noise", noise ? json_string(noise) : json_null());
    json_object_set_new(obj, "seed", json_integer((json_int_t)o->stage.seed));
    json_object_set_new(obj, "sequence", json_integer((json_int_t)a->sequence));
    json_object_set_new(obj, "status", json_string(a->status == VH_OK ? "ok" : vh_status_string(a->status)));
    const int ok = a->status == VH_OK && a->kind == VH_ACTION_TRAJECTORY;
    const uint32_t n = ok && a->n_points <= VH_MAX_TRAJECTORY_POINTS ? a->n_points : 0;
    json_object_set_new(obj, "n_points", json_integer(n));
    json_object_set_new(obj, "trajectory", json_floats(a->trajectory, 2 * n));
    if (ok && a->action_dim == 1) { /* MindDrive: the speed decision and its meta-action token */
        json_object_set_new(obj, "speed_decision", json_integer((json_int_t)a->values[0]));
        json_object_set_new(obj, "speed_token", json_integer(a->token_ids[0]));
    }
    json_t *extras = json_object();
    for (uint32_t i = 0; ok && i < a->n_extras && i < VH_MAX_ACTION_EXTRAS; i++) {
        char name[sizeof a->extra_info[i].name + 1];
        memcpy(name, a->extra_info[i].name, sizeof a->extra_info[i].name);
        name[sizeof name - 1] = '\0';
        uint32_t count = 0;
        const float *v = vh_action_extra(a, name, &count);
        if (v) json_object_set_new(extras, name, json_floats(v, count));
    }
    json_object_set_new(obj, "extras", extras);
    json_object_set_new(obj, "prompt_rounds", rounds);
    if (check) json_object_set_new(obj, "check", check);
    print_json_line(run, obj, a);
}

/* --json: every round of the prompt the frame is fed (vh_session_prompt_rounds), as
 * [{"name", "ids", "image_position", "n_image_rows"}, ...] (the vision rows go before
 * ids[image_position]); null when the library cannot say. Thread-safe. */
static json_t *prompt_rounds_json(vh_session *s, const char *instruction, int32_t command)
{
    enum { MAX_ROUNDS = 4 };
    vh_prompt_request req;
    vh_prompt_request_init(&req);
    req.instruction = instruction;
    req.command = command;
    int32_t *ids = malloc(sizeof *ids * MAX_ROUNDS * MAX_PROMPT_IDS);
    vh_prompt_round r[MAX_ROUNDS];
    for (uint32_t i = 0; i < MAX_ROUNDS; i++) {
        vh_prompt_round_init(&r[i]);
        r[i].ids = ids ? ids + (size_t)i * MAX_PROMPT_IDS : NULL;
        r[i].ids_capacity = ids ? MAX_PROMPT_IDS : 0;
    }
    uint32_t n = 0;
    json_t *rounds = ids && vh_session_prompt_rounds(s, &req, r, MAX_ROUNDS, &n) == VH_OK ? json_array() : json_null();
    for (uint32_t i = 0; json_is_array(rounds) && i < n; i++) {
        json_t *round = json_object(), *list = json_array();
        for (size_t k = 0; k < r[i].n_ids; k++) json_array_append_new(list, json_integer(r[i].ids[k]));
        json_object_set_new(round, "name", json_string(r[i].name));
        json_object_set_new(round, "ids", list);
        json_object_set_new(round, "image_position", json_integer(r[i].image_position));
        json_object_set_new(round, "n_image_rows", json_integer(r[i].n_image_rows));
        json_array_append_new(rounds, round);
    }
    free(ids);
    return rounds;
}

/* One line per frame; both threads print (refusals from the submitting one), a line at a time. */
static void print_frame(run_state *run, const vh_action *a)
{
    int32_t prompt[MAX_PROMPT_IDS];
    size_t n_prompt = 0;
    if (!run->opt->orion && /* the frame's prompt ids (its instruction's), thread-safe */
        vh_session_prompt_ids(run->session, frame_instruction(run->opt, (uint64_t)input_of(run->opt, a)), prompt,
                              MAX_PROMPT_IDS, &n_prompt))
        n_prompt = 0;
    const int input = input_of(run->opt, a);
    json_t *rounds = run->opt->json ? prompt_rounds_json(run->session, frame_instruction(run->opt, (uint64_t)input),
                                                         run->opt->orion ? frame_command(run->opt, input)
                                                                         : VH_COMMAND_NONE)
                                    : NULL;
    flockfile(stdout);
    json_t *check = run->driving     ? check_driving_frame(run, a)
                    : run->reference ? check_frame(run, a, prompt, n_prompt)
                                     : NULL;
    if (run->opt->orion && run->opt->json) print_orion_json(run, a, rounds, check);
    else if (run->opt->orion) {
        if (!run->driving) print_orion_text(run->opt, a); /* else its check line */
    }
    else if (run->opt->json) print_json(run, a, prompt, n_prompt, check, rounds);
    else if (!run->reference) print_text(run->opt, a);
    fflush(stdout);
    funlockfile(stdout);
}

static void *submit_frames(void *arg)
{
    run_state *run = arg;
    const options *o = run->opt;
    const int64_t start_ns = now_ns();
    for (int k = 0; k < o->n_frames; k++) {
        const int image_index = k % o->n_images;
        /* With --rate the capture time is the frame's slot on the clock, else when it is read. */
        int64_t capture_ns = 0;
        if (o->rate_hz > 0) {
            capture_ns = start_ns + (int64_t)((double)k * 1e9 / o->rate_hz);
            sleep_until(capture_ns);
        }
        decoded_image loaded = {0};
        const decoded_image *img = run->preloaded && run->preloaded[image_index].rgb ? &run->preloaded[image_index]
                                                                                     : &loaded;
        if (!o->orion && img == &loaded) decode_image(o->images[image_index], &loaded);
        if (!o->orion && !img->rgb) {
            atomic_fetch_add(&run->n_not_submitted, 1);
            continue;
        }
        if (o->rate_hz <= 0) capture_ns = now_ns();
        vh_frame f;
        vh_frame_init(&f);
        if (o->orion) { /* the tokens, the command and the noise, read before the start */
            const float *noise = run->noises && run->noises[image_index] ? run->noises[image_index] : run->noise;
            f.vision_tokens = run->tokens[image_index];
            f.n_vision_tokens = f.vision_tokens ? run->shape.n_tokens : 0;
            f.vision_token_width = f.vision_tokens ? run->shape.width : 0;
            f.command = frame_command(o, image_index);
            f.noise = noise;
            f.n_noise = noise ? run->shape.latent : 0;
        } else {
            f.rgb = img->rgb;
            f.width = img->width;
            f.height = img->height;
            f.instruction = frame_instruction(o, (uint64_t)image_index);
            f.unnorm_key = frame_entry(o, image_index) ? frame_entry(o, image_index)->unnorm_key : NULL;
        }
        f.tag = (uint64_t)k;
        f.sequence = (uint64_t)k;
        f.timestamp_ns = capture_ns;
        const vh_frame_file_entry *entry = frame_entry(o, image_index);
        vh_camera_image cams[VH_FRAME_FILE_MAX_CAMERAS];
        float calib[3][VH_FRAME_FILE_MAX_CAMERAS * 16];
        if (entry) { /* the line's own sequence, capture time, cameras with their calibration, ego state */
            int all[3] = {entry->n_cameras > 0, entry->n_cameras > 0, entry->n_cameras > 0};
            for (uint32_t c = 0; c < entry->n_cameras; c++) {
                const vh_frame_file_camera *fc = &entry->cameras[c];
                all[0] &= fc->has_lidar2img, all[1] &= fc->has_intrinsics, all[2] &= fc->has_extrinsics;
                memcpy(calib[0] + c * 16, fc->lidar2img, sizeof fc->lidar2img);
                memcpy(calib[1] + c * 16, fc->intrinsics, sizeof fc->intrinsics);
                memcpy(calib[2] + c * 16, fc->extrinsics, sizeof fc->extrinsics);
            }
            f.lidar2img = all[0] ? calib[0] : NULL;
            f.intrinsics = all[1] ? calib[1] : NULL;
            f.extrinsics = all[2] ? calib[2] : NULL;
            f.ego_pose = entry->has_ego_pose ? entry->ego_pose : NULL;
            f.can_bus = entry->has_can_bus ? entry->can_bus : NULL;
            if (entry->has_sequence) f.sequence = entry->sequence;
            if (entry->has_timestamp) f.timestamp_ns = entry->timestamp_ns;
            if (entry->has_stream) f.stream = entry->stream;
            for (uint32_t c = 0; c < entry->n_cameras; c++)
                cams[c] = (vh_camera_image){.rgb = run->cameras[image_index][c].rgb,
                                            .width = run->cameras[image_index][c].width,
                                            .height = run->cameras[image_index][c].height,
                                            .name = entry->cameras[c].name};
            f.n_cameras = entry->n_cameras;
            f.cameras = entry->n_cameras ? cams : NULL;
        }
        uint64_t id = 0;
        vh_status st = vh_submit_frame(run->session, &f, &id);
        free(loaded.rgb);
        if (st == VH_OK) {
            run->accepted_id[k] = id;
            atomic_fetch_add(&run->n_accepted, 1);
        } else if (st == VH_ERR_BUSY) {
            atomic_fetch_add(&run->n_rejected, 1);
            vh_action refused;
            vh_action_init(&refused);
            refused.status = VH_ERR_BUSY;
            refused.tag = f.tag;
            refused.sequence = f.sequence;
            refused.timestamp_ns = f.timestamp_ns;
            print_frame(run, &refused);
        } else {
            fprintf(stderr, "vh-run: %s: %s\n", o->images[image_index], vh_last_error());
            atomic_fetch_add(&run->n_not_submitted, 1);
        }
    }
    atomic_store(&run->finished, 1);
    return NULL;
}

/* Nothing accepted is still waiting, running or unpolled: polling longer would wait forever. */
static int nothing_outstanding(vh_session *s)
{
    vh_session_stats st;
    vh_session_stats_init(&st);
    if (vh_session_get_stats(s, &st) != VH_OK) return 0;
    return st.pending == 0 && st.running == 0 && st.unpolled == 0;
}

static void print_latency(FILE *out, const char *name, const char *note, const vh_latency *l)
{
    fprintf(out, "  %-14s %8llu %9.3f %9.3f %9.3f%s%s\n", name, (unsigned long long)l->count, l->p50_ns / 1e6,
            l->p95_ns / 1e6, l->max_ns / 1e6, note ? "  " : "", note ? note : "");
}

static void print_stats(FILE *out, vh_session *s, const vh_session_stats *st, int unanswered)
{
    vh_session_info info;
    vh_session_info_init(&info);
    if (vh_session_get_info(s, &info) != VH_OK) info.n_stages = 0;
    fprintf(out, "statistics:\n");
    fprintf(out,
            "  frames  submitted %llu  rejected %llu  completed %llu  dropped %llu  expired %llu"
            "  cancelled %llu  failed %llu  unanswered %d\n",
            (unsigned long long)st->submitted, (unsigned long long)st->rejected,
            (unsigned long long)st->completed, (unsigned long long)st->dropped, (unsigned long long)st->expired,
            (unsigned long long)st->cancelled, (unsigned long long)st->failed, unanswered);
    fprintf(out, "  %-14s %8s %9s %9s %9s\n", "latency ms", "count", "p50", "p95", "max");
    print_latency(out, "end_to_end", NULL, &st->end_to_end);
    print_latency(out, "queue_wait", NULL, &st->queue_wait);
    print_latency(out, "compute", NULL, &st->compute);
    print_latency(out, "vision", NULL, &st->vision);
    print_latency(out, "prefill", NULL, &st->prefill);
    print_latency(out, "decode", NULL, &st->decode);
    const uint32_t n_stages = st->n_stages < 4 ? st->n_stages : 4;
    for (uint32_t i = 0; i < n_stages; i++) {
        char name[32];
        snprintf(name, sizeof name, "stage%u_pass", i);
        print_latency(out, name, i < info.n_stages ? info.stages[i].backend : NULL, &st->stage_pass[i]);
    }
    fflush(out);
}

/* The backends the session chose and their numerics (tools/backend_numerics.c: the API names the
 * backends, not their arithmetic), one line on stderr before the frames; --check's criterion
 * follows from them unless --numerics says otherwise. */
static void report_backends(run_state *run)
{
    const options *o = run->opt;
    vh_session_info info;
    vh_session_info_init(&info);
    if (vh_session_get_info(run->session, &info) != VH_OK) snprintf(info.backends, sizeof info.backends, "?");
    snprintf(run->backends, sizeof run->backends, "%s", info.backends);
    run->compute = vh_backends_compute(run->backends);
    const int several = strchr(run->backends, ',') != NULL;
    fprintf(stderr, "vh-run: backend%s ", several ? "s" : "");
    for (const char *p = run->backends; *p;) {
        const size_t n = strcspn(p, ",");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
        fprintf(stderr, "%s%s (%s%s", p == run->backends ? "" : ", ", name, vh_backend_numerics_of(name)->description,
                several ? ")" : "; ");
        p += n + (p[n] == ',');
    }
    fprintf(stderr, "%schosen %s%s\n", several ? "; " : "", o->backends ? "by --backend" : "by default: best available",
            several ? "" : ")");
    if (run->driving) { /* the run's numerics and the reference's (doc/check-format.md, "Driving models") */
        const int numerics = o->numerics == NUMERICS_AUTO ? -1 : o->numerics == VH_COMPUTE_BF16;
        vh_driving_criterion_choose(run->driving, vh_backends_bf16_stages(run->backends), numerics,
                                    o->check_tolerance_given ? o->check_tolerance : -1,
                                    o->check_margin_given ? o->check_margin : -1, &run->driving_criterion);
        vh_driving_criterion_print(stderr, &run->driving_criterion, run->backends, numerics, run->driving);
        fflush(stderr);
        return;
    }
    const int bf16 = o->numerics == NUMERICS_AUTO ? run->compute == VH_COMPUTE_BF16 : o->numerics == VH_COMPUTE_BF16;
    run->criterion = (vh_check_criterion){.tolerance = o->check_tolerance, .bf16 = bf16,
                                          .bf16_margin = o->check_margin};
    if (o->check_path)
        fprintf(stderr, "vh-run: --check judges by the %s criterion (%s%s); %s\n", bf16 ? "bf16" : "fp32",
                o->numerics == NUMERICS_AUTO ? "the backends' compute" : "--numerics",
                bf16 ? ": ids may part at a reference near-tie" : ": ids equal",
                bf16 ? "for fp32 parity run with --backend cpu_generic" : "doc/check-format.md");
    fflush(stderr);
}

/* vh_session_create's progress as one line on a terminal, rewritten in place and erased at the end. */
static int draw_progress(void *user, const char *stage, double fraction)
{
    (void)user;
    if (fraction >= 1.0) fprintf(stderr, "\r\033[K");
    else fprintf(stderr, "\r\033[Kvh-run: loading: %-28.28s %3.0f%%", stage, fraction * 100);
    fflush(stderr);
    return 0;
}

/* --check: the frames' records. Without --image the frames are the reference's records (their
 * images found from the reference's folder, their own instructions), else each image with the
 * instruction must have a record. The norm_stats dataset: --unnorm-key, else the records'. */
static int set_up_check(options *o, vh_reference *ref, const vh_reference_case ***frame_record, char ***owned)
{
    char why[1024];
    if (vh_reference_load(o->check_path, o->hf440_positions, ref, why, sizeof why)) {
        fprintf(stderr, "vh-run: --check: %s\n", why);
        return -1;
    }
    const char *dataset = o->unnorm_key;
    for (size_t i = 0; i < ref->n_cases && !o->unnorm_key; i++) {
        const char *d = ref->cases[i].dataset;
        if (d && dataset && strcmp(d, dataset) && o->frame_file) { /* the lines say theirs */
            dataset = NULL;
            break;
        }
        if (d && dataset && strcmp(d, dataset)) {
            fprintf(stderr, "vh-run: --check: %s has records of datasets '%s' and '%s': choose one with --unnorm-key\n",
                    ref->path, dataset, d);
            return -1;
        }
        if (d) dataset = d;
    }
    if (!o->unnorm_key) o->unnorm_key = dataset;
    const vh_reference_case **records = calloc(MAX_IMAGES, sizeof *records);
    if (!records) return fprintf(stderr, "vh-run: out of memory\n"), -1;
    *frame_record = records;
    if (o->n_images == 0) {
        char **paths = calloc(MAX_IMAGES, sizeof *paths);
        if (!paths) return fprintf(stderr, "vh-run: out of memory\n"), -1;
        *owned = paths;
        for (size_t i = 0; i < ref->n_cases && o->n_images < MAX_IMAGES; i++) {
            const vh_reference_case *c = &ref->cases[i];
            if (o->unnorm_key && c->dataset && strcmp(c->dataset, o->unnorm_key)) continue; /* another dataset's */
            char *path = vh_reference_image_file(ref, c);
            if (!path) {
                fprintf(stderr, "vh-run: --check: the image %s of record %zu is not found from %s's folder or the "
                        "current one; give the images with --image\n", c->image_path, i + 1, ref->path);
                return -1;
            }
            paths[o->n_images] = path;
            o->images[o->n_images] = path;
            o->instructions[o->n_images] = c->instruction;
            records[o->n_images++] = c;
        }
        if (o->n_images == 0) {
            fprintf(stderr, "vh-run: --check: %s has no records of dataset '%s'\n", ref->path, o->unnorm_key);
            return -1;
        }
        return 0;
    }
    if (!o->instruction) o->instruction = DEFAULT_INSTRUCTION;
    for (int i = 0; i < o->n_images; i++) { /* --image, or the frame file's lines */
        const char *key = frame_unnorm_key(o, i);
        records[i] = vh_reference_find(ref, o->images[i], frame_instruction(o, (uint64_t)i), key);
        if (!records[i]) {
            const vh_frame_file_entry *e = frame_entry(o, i);
            char where[64] = "";
            if (e) snprintf(where, sizeof where, " (line %ld of the frame file)", e->line);
            fprintf(stderr, "vh-run: --check: %s has no record of image %s with instruction \"%s\"%s%s%s\n", ref->path,
                    o->images[i], frame_instruction(o, (uint64_t)i), key ? " of dataset " : "", key ? key : "", where);
            return -1;
        }
    }
    return 0;
}

/* --check, a driving model: the reference's records, record k for the run's frame k (without
 * --frames, as many frames as records, cycling over the inputs); each record of the model's kind
 * and of its frame's inputs as far as it says them (the file's name, the command, the noise's
 * source), or the run stops before the model loads. */
static int set_up_driving_check(options *o, const vh_orion_shape *shape, vh_driving_reference *ref)
{
    char why[1024];
    if (vh_driving_reference_load(o->check_path, ref, why, sizeof why) ||
        vh_driving_reference_fits(ref, shape->family, shape->label, shape->n_points, why, sizeof why)) {
        fprintf(stderr, "vh-run: --check: %s\n", why);
        return -1;
    }
    if (!o->n_frames) o->n_frames = ref->n_records <= MAX_FRAMES ? (int)ref->n_records : MAX_FRAMES;
    if ((size_t)o->n_frames > ref->n_records) {
        fprintf(stderr, "vh-run: --check: the run has %d frames and %s only %zu records (record k is the reference of "
                "frame k)\n", o->n_frames, ref->path, ref->n_records);
        return -1;
    }
    for (int k = 0; k < o->n_frames; k++) {
        const int input = k % o->n_images;
        const vh_frame_file_entry *e = frame_entry(o, input);
        const vh_driving_frame_inputs in = {
            .input = o->images[input],
            .command = frame_command(o, input),
            .noise_given = (e && (e->noise_file || e->noise)) || o->noise_file,
            .seed = o->stage.seed,
            .sequence = e && e->has_sequence ? e->sequence : (uint64_t)k,
        };
        const vh_driving_record *r = &ref->records[k];
        if (vh_driving_record_matches(r, &in, why, sizeof why)) {
            char where[64] = "";
            if (e) snprintf(where, sizeof where, " (line %ld of the frame file)", e->line);
            fprintf(stderr, "vh-run: --check: %s line %ld is the reference of frame %d, %s%s: %s\n", ref->path,
                    r->line, k, o->images[input], where, why);
            return -1;
        }
    }
    if ((size_t)o->n_frames < ref->n_records)
        fprintf(stderr, "vh-run: --check: %d frames: the first %d of %s's %zu records\n", o->n_frames, o->n_frames,
                ref->path, ref->n_records);
    return 0;
}

/* Every image decoded before the model loads, so that a bad file is reported at once, not after
 * the load. The pixels are kept for the submission (always with --rate: a camera has them at
 * capture time), up to PRELOAD_BYTES_LIMIT in all. */
static int check_images(const options *o, decoded_image *images)
{
    size_t kept = 0;
    for (int i = 0; i < o->n_images; i++) {
        if (decode_image(o->images[i], &images[i])) return -1;
        const size_t bytes = (size_t)images[i].width * images[i].height * 3;
        if (o->rate_hz <= 0 && kept + bytes > PRELOAD_BYTES_LIMIT) {
            free(images[i].rgb);
            images[i].rgb = NULL;
        } else {
            kept += bytes;
        }
    }
    return 0;
}

/* --frame-file: each line an input, checked against what the model takes (before the load); the
 * inputs' names and instructions into o like --image's and --vision-tokens'. 0, or -1 said. */
static int apply_frame_file(options *o, const vh_frame_file *ff, const vh_orion_shape *shape)
{
    if (o->n_images || o->n_token_files) {
        fprintf(stderr, "vh-run: --frame-file gives the frames: not with --image or --vision-tokens\n");
        return -1;
    }
    for (size_t i = 0; i < ff->n_entries; i++) {
        const vh_frame_file_entry *e = &ff->entries[i];
        const char *bad = NULL;
        if (o->orion && !e->vision_tokens && !e->n_cameras)
            bad = "a driving model's frame needs \"vision_tokens\" (or, with a camera front end, \"cameras\")";
        else if (o->orion && (e->image || e->instruction || e->unnorm_key))
            bad = "a driving model takes \"vision_tokens\", not \"image\", \"instruction\" or \"unnorm_key\"";
        else if (!o->orion && !e->image) bad = "an OpenVLA frame needs \"image\"";
        else if (!o->orion && (e->vision_tokens || e->command >= 0 || e->noise || e->noise_file))
            bad = "\"vision_tokens\", \"command\" and \"noise\" are for driving models (Orion, MindDrive)";
        if (!bad && o->orion && e->command >= 0 && (uint32_t)e->command >= shape->n_commands) {
            fprintf(stderr, "vh-run: %s: line %ld: \"command\" %d: the model's commands are 0..%u\n", ff->path, e->line,
                    e->command, shape->n_commands - 1);
            return -1;
        }
        if (!bad && o->orion && e->noise && e->n_noise != shape->latent) {
            fprintf(stderr, "vh-run: %s: line %ld: \"noise\" has %u values; the planner's noise is %u\n", ff->path,
                    e->line, e->n_noise, shape->latent);
            return -1;
        }
        if (bad) {
            fprintf(stderr, "vh-run: %s: line %ld: %s (%s)\n", ff->path, e->line, bad, o->model);
            return -1;
        }
        if (o->orion) o->token_files[o->n_token_files++] = e->vision_tokens;
        else {
            o->images[o->n_images] = e->image;
            o->instructions[o->n_images++] = e->instruction;
        }
    }
    return 0;
}

/* --frame-file, driving models: each line's own noise (a file, or the inline array, copied), NULL
 * where the line has none. 0, or -1 said. */
static int load_frame_noise(const options *o, const vh_orion_shape *shape, float ***out)
{
    const vh_frame_file *ff = o->frame_file;
    float **noises = calloc(ff->n_entries, sizeof *noises);
    if (!(*out = noises)) return fprintf(stderr, "vh-run: out of memory\n"), -1;
    char why[1024];
    for (size_t i = 0; i < ff->n_entries; i++) {
        const vh_frame_file_entry *e = &ff->entries[i];
        if (e->noise_file) {
            if (!(noises[i] = vh_read_float_array(e->noise_file, "planner's noise", &shape->latent, 1, why, sizeof why)))
                return fprintf(stderr, "vh-run: %s: line %ld: %s\n", ff->path, e->line, why), -1;
        } else if (e->noise) {
            if (!(noises[i] = malloc(sizeof **noises * e->n_noise))) return fprintf(stderr, "vh-run: out of memory\n"), -1;
            memcpy(noises[i], e->noise, sizeof **noises * e->n_noise);
        }
    }
    return 0;
}

/* --frame-file: every line's camera images decoded before the load, kept for the submissions. */
static int load_frame_cameras(const options *o, decoded_image ***out)
{
    const vh_frame_file *ff = o->frame_file;
    decoded_image **cameras = calloc(ff->n_entries, sizeof *cameras);
    if (!(*out = cameras)) return fprintf(stderr, "vh-run: out of memory\n"), -1;
    for (size_t i = 0; i < ff->n_entries; i++) {
        const vh_frame_file_entry *e = &ff->entries[i];
        if (!e->n_cameras) continue;
        if (!(cameras[i] = calloc(e->n_cameras, sizeof **cameras))) return fprintf(stderr, "vh-run: out of memory\n"), -1;
        for (uint32_t c = 0; c < e->n_cameras; c++)
            if (decode_image(e->cameras[c].image, &cameras[i][c])) return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o)) return 2;
    char **owned_paths = NULL;
    if (!o.model) o.model = VH_BUNDLED_MODEL_DIR;
    /* An Orion model takes vision tokens, a command and maybe noise; the others, images and text. */
    char why[1024];
    vh_orion_shape shape = {0};
    const int orion = vh_orion_model_shape(o.model, &shape, why, sizeof why);
    if (orion < 0) {
        fprintf(stderr, "vh-run: %s\n", why);
        return 2;
    }
    o.orion = orion;
    vh_frame_file frame_file = {0};
    if (o.frame_file_path) {
        if (vh_frame_file_load(o.frame_file_path, MAX_IMAGES, &frame_file, why, sizeof why)) {
            fprintf(stderr, "vh-run: %s\n", why);
            return 2;
        }
        o.frame_file = &frame_file;
        if (apply_frame_file(&o, &frame_file, &shape)) {
            vh_frame_file_free(&frame_file);
            return 2;
        }
        /* the session's dataset: --unnorm-key, else the first line's (a line without one takes it) */
        for (size_t i = 0; !o.unnorm_key && i < frame_file.n_entries; i++) o.unnorm_key = frame_file.entries[i].unnorm_key;
    }
    float **tokens = NULL, *noise = NULL, **frame_noise = NULL;
    vh_session *s = NULL;
    int32_t prompt[MAX_PROMPT_IDS];
    size_t n_prompt = 0;
    int rc = 2;
    run_state run = {0};
    vh_reference reference = {0};
    vh_driving_reference driving = {0};
    const vh_reference_case **frame_record = NULL;
    if (orion) {
        if (o.n_token_files == 0) {
            fprintf(stderr, "vh-run: %s is an Orion model: give each frame's vision tokens with --vision-tokens FILE "
                    "(.npy or raw little-endian float32, %u x %u)\n", o.model, shape.n_tokens, shape.width);
            goto done;
        }
        if (o.n_images || o.instruction || o.unnorm_key) {
            fprintf(stderr, "vh-run: %s is an Orion model: it takes --vision-tokens, not --image, --instruction or "
                    "--unnorm-key\n", o.model);
            goto done;
        }
        if (o.command < 0) o.command = 3; /* lane follow */
        if ((uint32_t)o.command >= shape.n_commands) {
            fprintf(stderr, "vh-run: --command %d: the model's commands are 0..%u\n", o.command, shape.n_commands - 1);
            goto done;
        }
        tokens = calloc((size_t)o.n_token_files, sizeof *tokens);
        if (!tokens) {
            fprintf(stderr, "vh-run: out of memory\n");
            goto done;
        }
        const uint32_t token_dims[2] = {shape.n_tokens, shape.width};
        for (int i = 0; i < o.n_token_files; i++) {
            if (!o.token_files[i]) { /* a frame file's camera frame: the front end makes its tokens */
                o.images[i] = o.frame_file->entries[i].cameras[0].image;
                continue;
            }
            o.images[i] = o.token_files[i]; /* frames cycle over the files as over images */
            tokens[i] = vh_read_float_array(o.token_files[i], "vision tokens", token_dims, 2, why, sizeof why);
            if (!tokens[i]) {
                fprintf(stderr, "vh-run: %s\n", why);
                goto done;
            }
        }
        o.n_images = o.n_token_files;
        if (o.noise_file && !(noise = vh_read_float_array(o.noise_file, "planner's noise", &shape.latent, 1, why,
                                                          sizeof why))) {
            fprintf(stderr, "vh-run: %s\n", why);
            goto done;
        }
        if (o.frame_file && load_frame_noise(&o, &shape, &frame_noise)) goto done;
    } else if (o.n_token_files || o.command >= 0 || o.noise_file) {
        fprintf(stderr, "vh-run: --vision-tokens, --command and --noise are for Orion models; %s is not one\n",
                o.model);
        goto done;
    }
    if (o.check_path && o.orion && set_up_driving_check(&o, &shape, &driving)) goto done;
    if (o.check_path && !o.orion && set_up_check(&o, &reference, &frame_record, &owned_paths)) goto done;
    if (o.n_images == 0 && add_default_frames(&o, &owned_paths)) goto done;
    if (!o.instruction) o.instruction = DEFAULT_INSTRUCTION;
    if (!o.n_frames) o.n_frames = o.n_images;

    vh_session_params p = o.stage;
    p.model_path = o.model;
    p.backends = o.backends;
    p.plugin_path = o.plugin_path;
    p.unnorm_key = o.unnorm_key;
    p.n_threads = o.threads;
    if (o.policy != POLICY_UNSET) p.queue_policy = (vh_queue_policy)o.policy;
    else if (o.rate_hz <= 0) p.queue_policy = VH_QUEUE_BLOCK;
    p.decode_positions = o.hf440_positions ? VH_DECODE_POSITIONS_OPENVLA_HF440 : VH_DECODE_POSITIONS_CONTIGUOUS;
    if (o.verbose) {
        p.log_fn = log_to_stderr;
        p.log_level = VH_LOG_DEBUG;
    } else if (isatty(STDERR_FILENO)) {
        p.progress_fn = draw_progress;
    }
    /* One frame: a warm-up frame would pay the first-use costs and then the frame itself would run
     * again; the frame pays them once instead (the session's default warm-up is for streams). */
    if (o.n_frames == 1 && !o.warmup_given) p.warmup_frames = 0;
    if (o.dump_vision_tokens) {
        p.vision_tokens_fn = dump_vision_tokens;
        p.vision_tokens_user = (void *)o.dump_vision_tokens;
    }

    run = (run_state){.opt = &o, .tokens = tokens, .shape = shape, .noise = noise, .noises = frame_noise,
                      .reference = o.check_path && !o.orion ? &reference : NULL, .frame_record = frame_record,
                      .driving = o.check_path && o.orion ? &driving : NULL};
    run.accepted_id = calloc((size_t)o.n_frames, sizeof *run.accepted_id);
    run.answered_id = calloc((size_t)o.n_frames, sizeof *run.answered_id);
    if (!run.accepted_id || !run.answered_id) {
        fprintf(stderr, "vh-run: out of memory for %d frames\n", o.n_frames);
        goto done;
    }
    if (!o.orion) {
        run.preloaded = calloc((size_t)o.n_images, sizeof *run.preloaded);
        if (!run.preloaded) {
            fprintf(stderr, "vh-run: out of memory for %d images\n", o.n_images);
            goto done;
        }
        if (check_images(&o, run.preloaded)) goto done;
    }
    if (o.frame_file && load_frame_cameras(&o, &run.cameras)) goto done;

    if (vh_session_create(&p, &s) != VH_OK) {
        if (p.progress_fn) fprintf(stderr, "\r\033[K");
        fprintf(stderr, "vh-run: %s\n", vh_last_error());
        goto done;
    }
    run.session = s;
    report_backends(&run);

    /* the instructions' prompts, before any frame: a bad instruction fails here, once */
    for (int i = 0; !o.orion && i < o.n_images; i++) {
        if (i && frame_instruction(&o, (uint64_t)i) == frame_instruction(&o, (uint64_t)i - 1)) continue;
        if (vh_session_prompt_ids(s, frame_instruction(&o, (uint64_t)i), prompt, MAX_PROMPT_IDS, &n_prompt) != VH_OK) {
            fprintf(stderr, "vh-run: %s\n", vh_last_error());
            goto done;
        }
    }

    /* Decode and submit on one thread, print results here as they come. */
    pthread_t thread;
    if (pthread_create(&thread, NULL, submit_frames, &run) != 0) {
        fprintf(stderr, "vh-run: cannot start the submitting thread\n");
        goto done;
    }
    int answered = 0, failures = 0, duplicates = 0, strays = 0;
    for (;;) {
        /* Read before polling: once it is set, n_accepted is final. */
        const int submitting_done = atomic_load(&run.finished);
        if (submitting_done && answered >= atomic_load(&run.n_accepted)) break;
        vh_action a;
        vh_action_init(&a);
        vh_status st = vh_poll_action(s, &a, 100);
        if (st == VH_ERR_TIMEOUT) {
            if (submitting_done && nothing_outstanding(s)) break; /* the rest will never come */
            continue;
        }
        if (st != VH_OK) {
            fprintf(stderr, "vh-run: polling failed: %s\n", vh_last_error());
            failures++;
            break;
        }
        if (a.tag >= (uint64_t)o.n_frames) { /* vh-run's tag: the frame's place in the stream */
            fprintf(stderr, "vh-run: an answer for frame %llu that vh-run never submitted (tag %llu)\n",
                    (unsigned long long)a.frame_id, (unsigned long long)a.tag);
            strays++;
            continue;
        }
        if (run.answered_id[a.tag]) {
            fprintf(stderr, "vh-run: frame %llu answered twice\n", (unsigned long long)a.frame_id);
            duplicates++;
            continue;
        }
        run.answered_id[a.tag] = a.frame_id;
        answered++;
        const int expected_outcome = a.status == VH_OK || a.status == VH_ERR_DROPPED ||
                                     a.status == VH_ERR_EXPIRED || a.status == VH_ERR_CANCELLED;
        if (!expected_outcome) {
            failures++;
            fprintf(stderr, "vh-run: %s: %s: %s\n", o.images[input_of(&o, &a)], vh_status_string(a.status),
                    vh_session_last_error(s));
        }
        print_frame(&run, &a);
    }
    pthread_join(thread, NULL);

    /* Every accepted frame answered exactly once, by its own id. */
    int unanswered = 0;
    for (int k = 0; k < o.n_frames; k++) {
        if (run.accepted_id[k] && run.answered_id[k] != run.accepted_id[k]) unanswered++;
        else if (!run.accepted_id[k] && run.answered_id[k]) strays++;
    }
    if (unanswered) fprintf(stderr, "vh-run: %d accepted frames were not answered\n", unanswered);
    if (strays) fprintf(stderr, "vh-run: %d answers for frames vh-run never had accepted\n", strays);

    vh_session_stats stats;
    vh_session_stats_init(&stats);
    if (vh_session_get_stats(s, &stats) != VH_OK) {
        fprintf(stderr, "vh-run: %s\n", vh_last_error());
        failures++;
    } else {
        print_stats(o.json ? stderr : stdout, s, &stats, unanswered);
        /* The session's own counts must agree with what vh-run saw. */
        const int n_accepted = atomic_load(&run.n_accepted), n_rejected = atomic_load(&run.n_rejected);
        if (stats.submitted != (uint64_t)n_accepted || stats.rejected != (uint64_t)n_rejected) {
            fprintf(stderr, "vh-run: the session counts %llu submitted and %llu rejected, vh-run %d and %d\n",
                    (unsigned long long)stats.submitted, (unsigned long long)stats.rejected, n_accepted,
                    n_rejected);
            failures++;
        }
    }
    failures += atomic_load(&run.n_not_submitted) + duplicates + strays + unanswered;
    if (o.check_path && o.orion) {
        const int passed = atomic_load(&run.n_passed);
        vh_driving_summary_print(stdout, passed, o.n_frames, atomic_load(&run.n_near_ties), &run.driving_criterion,
                                 &driving);
        fflush(stdout);
        if (passed != o.n_frames) failures++;
    } else if (o.check_path) {
        const int passed = atomic_load(&run.n_passed);
        if (run.criterion.bf16)
            printf("check: %d of %d frames pass (bf16 criterion: prompt ids equal, action ids equal or parted at a "
                   "reference near-tie, logit gap < %g, in %d frames; max |d action| <= %g before it) against %s; "
                   "for fp32 parity run with --backend cpu_generic\n", passed, o.n_frames, run.criterion.bf16_margin,
                   atomic_load(&run.n_near_ties), o.check_tolerance, reference.path);
        else
            printf("check: %d of %d frames pass (prompt ids and action ids equal, max |d action| <= %g) against %s\n",
                   passed, o.n_frames, o.check_tolerance, reference.path);
        fflush(stdout);
        if (passed != o.n_frames) failures++;
    }
    rc = failures ? 1 : 0;
done:
    vh_session_destroy(s);
    if (run.preloaded) {
        for (int i = 0; i < o.n_images; i++) free(run.preloaded[i].rgb);
        free(run.preloaded);
    }
    free(run.accepted_id);
    free(run.answered_id);
    for (int i = 0; tokens && i < o.n_token_files; i++) free(tokens[i]);
    free(tokens);
    free(noise);
    if (owned_paths) {
        for (int i = 0; i < MAX_IMAGES && owned_paths[i]; i++) free(owned_paths[i]);
        free(owned_paths);
    }
    free(frame_record);
    vh_reference_free(&reference);
    vh_driving_reference_free(&driving);
    for (size_t i = 0; o.frame_file && i < frame_file.n_entries; i++) {
        if (frame_noise) free(frame_noise[i]);
        for (uint32_t c = 0; run.cameras && run.cameras[i] && c < frame_file.entries[i].n_cameras; c++)
            free(run.cameras[i][c].rgb);
        if (run.cameras) free(run.cameras[i]);
    }
    free(frame_noise);
    free(run.cameras);
    vh_frame_file_free(&frame_file);
    return rc;
}
