/*
 * vh-serve: a VLA policy server speaking openpi's websocket protocol (scripts/serve_policy.py), so
 * openpi's clients (LIBERO, DROID, ALOHA runners; openpi_client.WebsocketClientPolicy) drive a
 * vlahybrid session unchanged. doc/serving.md has the protocol, the key mapping and the limits.
 *
 *   vh-serve [--model DIR] [--backend NAME[,NAME]] [--unnorm-key KEY] [--threads N] [--plugin-path P]
 *            [--mode serial|pipeline|packed] [--frames-in-flight K] [--split N] ...
 *            [--host ADDR] [--port N] [--image-key K[,K...]] [--prompt-key K] [--default-prompt TEXT]
 *            [--max-message-mb N] [--max-clients N] [--write-timeout S] [--socket-send-buffer BYTES]
 *            [--actions-dtype float64|float32] [--verbose]
 *
 * Without --model it serves the bundled tiny OpenVLA model. Once listening it prints one line on
 * stdout, "vh-serve: listening on ws://HOST:PORT ...", with the port the kernel gave for --port 0.
 * While the model loads it prints its progress on stderr ("vh-serve: loading: PHASE N%", a line per
 * phase and per 10%). SIGINT or SIGTERM stop it: connections are closed, frames in flight finish,
 * exit status 0; during the load they cancel it (everything freed), exit status 128 + the signal.
 * Exit status 2: bad arguments, or the session or the port could not be opened; 1: the event loop
 * failed.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundled_data.h"
#include "openpi_message.h"
#include "policy_server.h"
#include "stage_options.h"
#include "tool_cli.h"
#include "vlahybrid/vlahybrid.h"

#include <libwebsockets.h> /* LWS_PRE, the metadata's headroom */

typedef struct options {
    vh_session_params session;
    vh_serve_config serve;
    const char *model;
    int verbose;
} options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vh-serve [--model DIR] [--backend NAME[,NAME]] [--unnorm-key KEY] [--threads N]\n"
            "                [--plugin-path PATH] [--cpu-affinity LIST] [--host ADDR] [--port N]\n"
            "                [--image-key K[,K...]] [--prompt-key K] [--default-prompt TEXT]\n"
            "                [--max-message-mb N] [--max-clients N] [--write-timeout S]\n"
            "                [--socket-send-buffer BYTES] [--actions-dtype float64|float32] [--verbose]\n"
            "                [--split N] [--mode serial|pipeline|packed] [--frames-in-flight K] ...\n"
            "Serves a VLA model over openpi's websocket protocol: on connect a msgpack metadata dict, then\n"
            "one msgpack observation per message, answered with {\"actions\": [1, action_dim] array, ...}.\n"
            "  --host ADDR           address to listen on (default 0.0.0.0, every interface)\n"
            "  --port N              TCP port (default 8000, as openpi; 0: any free port, printed)\n"
            "  --image-key K[,K...]  the observation's image: the first of these keys present\n"
            "                        (default observation/image,image); uint8 HxWx3 RGB or 3xHxW\n"
            "  --prompt-key K        the task text (default prompt)\n"
            "  --default-prompt T    used when an observation has no prompt (default: it is required)\n"
            "  --max-message-mb N    larger observations are refused (default 64)\n"
            "  --max-clients N       connections served at once (default 64); each has one frame in\n"
            "                        the session at a time\n"
            "  --write-timeout S     a client that does not read its answer for S seconds is dropped\n"
            "                        (default 30)\n"
            "  --socket-send-buffer B  kernel send buffer per connection (default: the system's)\n"
            "  --actions-dtype D     float64 (default: the library's values as computed) or float32\n"
            "  --unnorm-key KEY      the norm_stats dataset actions are un-normalised with\n"
            "  --threads N           CPU threads of each CPU backend (default: all)\n"
            VH_STAGE_OPTIONS_USAGE
            "  --verbose             log each connection; --version, --help\n"
            "Without --model: the bundled tiny OpenVLA model (%s).\n",
            VH_BUNDLED_MODEL_DIR);
}

static int parse_number(const char *flag, const char *value, long lo, long hi, long *out)
{
    return vh_tool_parse_long("vh-serve", flag, value, lo, hi, out);
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    vh_session_params_init(&o->session);
    o->serve.host = "0.0.0.0";
    o->serve.port = 8000;
    o->serve.max_message_bytes = 64ull << 20;
    o->serve.max_clients = 64;
    o->serve.write_timeout_s = 30;
    o->serve.keys.image = "observation/image,image";
    o->serve.keys.prompt = "prompt";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long n;
        static const char *const valued[] = {"--model", "--backend", "--plugin-path", "--unnorm-key",
                                             "--cpu-affinity", "--threads", "--host", "--port", "--image-key",
                                             "--prompt-key", "--default-prompt", "--max-message-mb",
                                             "--max-clients", "--write-timeout", "--socket-send-buffer",
                                             "--actions-dtype", "--split", "--mode", "--gpu-mem-budget", "--zone",
                                             "--trace", "--frames-in-flight", NULL};
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--version")) {
            vh_tool_print_version(stdout, "vh-serve");
            exit(0);
        } else if (!strcmp(a, "--verbose")) {
            o->verbose = 1;
        } else if (vh_tool_check_option("vh-serve", argc, argv, i, valued)) {
            return -1; /* unknown, or no value after it */
        } else if (!strcmp(a, "--model")) {
            o->model = argv[++i];
        } else if (!strcmp(a, "--backend")) {
            o->session.backends = argv[++i];
        } else if (!strcmp(a, "--plugin-path")) {
            o->session.plugin_path = argv[++i];
        } else if (!strcmp(a, "--unnorm-key")) {
            o->session.unnorm_key = argv[++i];
        } else if (!strcmp(a, "--cpu-affinity")) {
            o->session.cpu_affinity = argv[++i];
        } else if (!strcmp(a, "--threads")) {
            if (parse_number(a, argv[++i], 0, 4096, &n)) return -1;
            o->session.n_threads = (int32_t)n;
        } else if (!strcmp(a, "--host")) {
            o->serve.host = argv[++i];
        } else if (!strcmp(a, "--port")) {
            if (parse_number(a, argv[++i], 0, 65535, &n)) return -1;
            o->serve.port = (int)n;
        } else if (!strcmp(a, "--image-key")) {
            o->serve.keys.image = argv[++i];
        } else if (!strcmp(a, "--prompt-key")) {
            o->serve.keys.prompt = argv[++i];
        } else if (!strcmp(a, "--default-prompt")) {
            o->serve.keys.default_prompt = argv[++i];
        } else if (!strcmp(a, "--max-message-mb")) {
            if (parse_number(a, argv[++i], 1, 4096, &n)) return -1;
            o->serve.max_message_bytes = (uint64_t)n << 20;
        } else if (!strcmp(a, "--max-clients")) {
            if (parse_number(a, argv[++i], 1, 100000, &n)) return -1;
            o->serve.max_clients = (uint32_t)n;
        } else if (!strcmp(a, "--write-timeout")) {
            if (parse_number(a, argv[++i], 1, 86400, &n)) return -1;
            o->serve.write_timeout_s = (uint32_t)n;
        } else if (!strcmp(a, "--socket-send-buffer")) {
            if (parse_number(a, argv[++i], 0, 1L << 30, &n)) return -1;
            o->serve.socket_send_buffer = (int)n;
        } else if (!strcmp(a, "--actions-dtype")) {
            const char *v = argv[++i];
            if (!strcmp(v, "float64")) o->serve.actions_float32 = 0;
            else if (!strcmp(v, "float32")) o->serve.actions_float32 = 1;
            else {
                fprintf(stderr, "vh-serve: --actions-dtype is 'float64' or 'float32'\n");
                return -1;
            }
        } else {
            int taken = vh_parse_stage_option("vh-serve", a, argv[++i], &o->session);
            if (taken < 0) return -1;
            if (!taken) {
                fprintf(stderr, "vh-serve: unknown option %s\n", a);
                return -1;
            }
        }
    }
    if (!*o->serve.keys.image || !*o->serve.keys.prompt) {
        fprintf(stderr, "vh-serve: --image-key and --prompt-key must not be empty\n");
        return -1;
    }
    return 0;
}

static void log_to_stderr(void *user, vh_log_level level, const char *message)
{
    (void)user;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "vh-serve [%s] %s\n", names[level <= VH_LOG_DEBUG ? level : VH_LOG_DEBUG], message);
}

static const char *mode_name(vh_execution_mode m)
{
    switch (m) {
    case VH_EXECUTION_SERIAL: return "serial";
    case VH_EXECUTION_PIPELINE: return "pipeline";
    case VH_EXECUTION_PACKED: return "packed";
    }
    return "unknown";
}

/* "models/openvla-tiny/" -> "openvla-tiny" */
static void folder_name(const char *path, char *out, size_t size)
{
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/') end--;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/') start--;
    snprintf(out, size, "%.*s", (int)(end - start), path + start);
}

/* SIGINT / SIGTERM are blocked in every thread and taken here, so the library's threads never see
 * them and the loop is stopped through the one call that is safe from another thread. */
typedef struct signal_waiter {
    sigset_t set;
    vh_policy_server *server;
    atomic_int signalled;              /* the signal taken (0: none yet); the load's progress reads it */
} signal_waiter;

static void *wait_for_signal(void *arg)
{
    signal_waiter *w = arg;
    int sig = 0;
    sigwait(&w->set, &sig);
    atomic_store(&w->signalled, sig);
    vh_policy_server_stop(w->server); /* before the loop runs, it then never starts */
    return NULL;
}

/* The load's progress on stderr: a line when the phase changes or another 10% is done, never a
 * flood; a nonzero return (a signal was taken) cancels the create. */
typedef struct load_progress {
    signal_waiter *waiter;
    char phase[64];
    int tenths;                        /* the last 10% step printed */
} load_progress;

static int report_load(void *user, const char *stage, double fraction)
{
    load_progress *p = user;
    const int tenths = (int)(fraction * 10);
    if (strncmp(p->phase, stage, sizeof p->phase - 1) || tenths > p->tenths) {
        snprintf(p->phase, sizeof p->phase, "%s", stage);
        p->tenths = tenths;
        fprintf(stderr, "vh-serve: loading: %s %.0f%%\n", stage, fraction * 100);
    }
    return atomic_load(&p->waiter->signalled) != 0;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o)) {
        usage(stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    signal_waiter waiter;
    sigemptyset(&waiter.set);
    sigaddset(&waiter.set, SIGINT);
    sigaddset(&waiter.set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &waiter.set, NULL); /* before any thread exists: all inherit it */

    o.serve.verbose = o.verbose;
    vh_policy_server *server = vh_policy_server_create(&o.serve); /* the port first: fail fast */
    if (!server) return 2;

    const char *model = o.model ? o.model : VH_BUNDLED_MODEL_DIR;
    o.session.model_path = model;
    /* each client has at most one frame in the session, so a queue as deep as the clients are many
     * never refuses one */
    o.session.queue_capacity = o.serve.max_clients;
    o.session.queue_policy = VH_QUEUE_REJECT;
    if (o.verbose) {
        o.session.log_fn = log_to_stderr;
        o.session.log_level = VH_LOG_INFO;
    }
    /* the signals are taken from here on: during the load they cancel it */
    waiter.server = server;
    atomic_init(&waiter.signalled, 0);
    pthread_t signal_thread;
    int have_signal_thread = !pthread_create(&signal_thread, NULL, wait_for_signal, &waiter);
    if (!have_signal_thread) fprintf(stderr, "vh-serve: no signal thread: SIGINT/SIGTERM will not stop it\n");
    load_progress progress = {.waiter = &waiter, .tenths = -1};
    o.session.progress_fn = report_load;
    o.session.progress_user = &progress;
    vh_session *session = NULL;
    const vh_status created = vh_session_create(&o.session, &session);
    const int signalled = atomic_load(&waiter.signalled);
    if (created != VH_OK || signalled) {
        if (created == VH_OK || created == VH_ERR_CANCELLED)
            fprintf(stderr, "vh-serve: %s during the load: stopped before serving%s%s%s\n", strsignal(signalled),
                    created ? " (" : "", created ? vh_last_error() : "", created ? ")" : "");
        else
            fprintf(stderr, "vh-serve: %s\n", vh_last_error());
        if (have_signal_thread) {
            pthread_kill(signal_thread, SIGTERM); /* wakes its sigwait if no signal did */
            pthread_join(signal_thread, NULL);
        }
        vh_session_destroy(session);
        vh_policy_server_destroy(server);
        return signalled && (created == VH_OK || created == VH_ERR_CANCELLED) ? 128 + signalled : 2;
    }
    vh_session_info info;
    vh_session_info_init(&info);
    vh_session_get_info(session, &info);

    char model_name[256];
    folder_name(model, model_name, sizeof model_name);
    vh_openpi_metadata meta = {
        .server_version = vh_version(),
        .model = model_name,
        .model_path = model,
        .action_dim = info.action_dim,
        .actions_dtype = o.serve.actions_float32 ? "float32" : "float64",
        .backends = info.backends,
        .execution_mode = mode_name(info.execution_mode),
        .frames_in_flight = info.frames_in_flight,
        .unnorm_key = info.unnorm_key,
        .keys = &o.serve.keys,
        .max_message_bytes = o.serve.max_message_bytes,
    };
    vh_openpi_buffer metadata = {.headroom = LWS_PRE};
    if (vh_openpi_encode_metadata(&meta, &metadata)) {
        fprintf(stderr, "vh-serve: out of memory\n");
        if (have_signal_thread) {
            pthread_kill(signal_thread, SIGTERM);
            pthread_join(signal_thread, NULL);
        }
        vh_policy_server_destroy(server);
        vh_session_destroy(session);
        return 2;
    }
    const vh_serve_policy policy = {.session = session, .unnorm_key = info.unnorm_key, .metadata = &metadata};
    printf("vh-serve: listening on ws://%s:%d (model %s, backends %s, %s, %u frames in flight, "
           "unnorm_key %s)\n", o.serve.host, vh_policy_server_port(server), model_name, info.backends,
           mode_name(info.execution_mode), info.frames_in_flight, info.unnorm_key);
    fflush(stdout);

    int rc = vh_policy_server_run(server, &policy);
    if (rc) fprintf(stderr, "vh-serve: the event loop failed\n");
    if (have_signal_thread) {
        pthread_kill(signal_thread, SIGTERM); /* wakes its sigwait if no signal did */
        pthread_join(signal_thread, NULL);
    }
    vh_policy_server_destroy(server);
    vh_openpi_buffer_free(&metadata);
    vh_session_destroy(session);
    return rc ? 1 : 0;
}
