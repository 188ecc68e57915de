/* The files a session opens besides the model folder (tests/session/test_bad_models.c has those):
 * the trace output, backend plugins and the split-cost cache, through vh_session_create on the
 * bundled tiny model with cpu_generic:
 *   - a FIFO, a folder or a device in a file's place is refused at once (a hang fails the test by
 *     its timeout), and is left as it was;
 *   - a create that fails leaves the user's trace file as it was, and no temporary file behind; a
 *     session that ends writes the trace as one complete JSON document;
 *   - cached split costs that are not finite, in range, four numbers on their line are ignored with
 *     a warning, and the first valid line for the setup is the one used (the log's "measured per
 *     frame" line shows which). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#define MODEL_DIR "models/openvla-tiny"
#define CACHE_FILE "split-costs-v1.tsv"

static char *model_dir;

/* ---------------------------------------------------------------------------------------------
 * Helpers
 */
static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f, "%s: %s", path, strerror(errno));
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

static char *read_text(const char *path)
{
    size_t size;
    char *text = (char *)vh_test_read_file(path, &size);
    ck_assert_msg(text, "%s: unreadable", path);
    return text;
}

/* How many entries a folder holds (a temporary file left behind shows here). */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int is_fifo(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISFIFO(st.st_mode);
}

static char *make_fifo(const char *dir, const char *name)
{
    char *path = join(dir, name);
    ck_assert_msg(mkfifo(path, 0644) == 0, "%s: %s", path, strerror(errno));
    return path;
}

typedef struct log_capture {
    pthread_mutex_t lock;
    char text[65536];
    size_t used;
} log_capture;

static void capture_log(void *user, vh_log_level level, const char *message)
{
    log_capture *c = user;
    pthread_mutex_lock(&c->lock);
    int n = snprintf(c->text + c->used, sizeof c->text - c->used, "[%d] %s\n", (int)level, message);
    if (n > 0) c->used = c->used + (size_t)n < sizeof c->text ? c->used + (size_t)n : sizeof c->text - 1;
    pthread_mutex_unlock(&c->lock);
}

/* Occurrences of `needle` in the log at `level`. */
static int count_logged(log_capture *c, vh_log_level level, const char *needle)
{
    char prefix[8];
    snprintf(prefix, sizeof prefix, "[%d] ", (int)level);
    int n = 0;
    pthread_mutex_lock(&c->lock);
    for (const char *line = c->text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[2048];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        n += !strncmp(buf, prefix, strlen(prefix)) && strstr(buf, needle);
        line = end ? end + 1 : NULL;
    }
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* cpu_generic, one thread, no warm-up (these tests are about files, not frames). */
static void base_params(vh_session_params *p, log_capture *log)
{
    vh_session_params_init(p);
    p->model_path = model_dir;
    p->backends = "cpu_generic";
    p->n_threads = 1;
    p->warmup_frames = 0;
    if (log) {
        memset(log, 0, sizeof *log);
        pthread_mutex_init(&log->lock, NULL);
        p->log_fn = capture_log;
        p->log_user = log;
        p->log_level = VH_LOG_DEBUG;
    }
}

static vh_status try_create(const vh_session_params *p)
{
    vh_session *s = (vh_session *)&s;
    vh_status st = vh_session_create(p, &s);
    if (st == VH_OK) vh_session_destroy(s);
    else ck_assert_ptr_null(s);
    return st;
}

static void expect_create(const vh_session_params *p, vh_status want, const char *message_part)
{
    vh_status st = try_create(p);
    ck_assert_msg(st == want, "status %d (%s), expected %d (%s): %s", st, vh_status_string(st), want,
                  vh_status_string(want), vh_last_error());
    if (message_part) ck_assert_msg(strstr(vh_last_error(), message_part), "'%s' lacks '%s'", vh_last_error(), message_part);
}

/* ---------------------------------------------------------------------------------------------
 * The trace
 */
START_TEST(test_trace_not_a_regular_file)
{
    char *dir = vh_test_make_temp_dir();
    vh_session_params p;
    base_params(&p, NULL);

    char *fifo = make_fifo(dir, "trace.json"); /* used to block create in fopen */
    p.trace_path = fifo;
    expect_create(&p, VH_ERR_IO, "not a regular file");
    ck_assert(is_fifo(fifo));

    char *folder = join(dir, "folder");
    ck_assert_int_eq(mkdir(folder, 0755), 0);
    p.trace_path = folder;
    expect_create(&p, VH_ERR_IO, "is a directory");

    char *device = join(dir, "null.json"); /* renaming over /dev/null would replace the device */
    ck_assert_int_eq(symlink("/dev/null", device), 0);
    p.trace_path = device;
    expect_create(&p, VH_ERR_IO, "not a regular file");
    struct stat st;
    ck_assert_int_eq(stat("/dev/null", &st), 0);
    ck_assert(S_ISCHR(st.st_mode));

    ck_assert_int_eq(count_entries(dir), 3); /* the three, no temporary file */
    vh_test_remove_tree(dir);
    free(dir);
    free(fifo);
    free(folder);
    free(device);
}
END_TEST

START_TEST(test_failed_create_keeps_the_trace_file)
{
    char *dir = vh_test_make_temp_dir();
    char *trace = join(dir, "trace.json");
    const char *precious = "the user's own trace, from yesterday\n";
    write_text(trace, precious);
    vh_session_params p;
    base_params(&p, NULL);
    p.trace_path = trace;
    /* each fails after the trace was opened (the model and tokenizer load first) */
    p.backends = "nosuchbackend";
    expect_create(&p, VH_ERR_BACKEND_NOT_FOUND, "nosuchbackend");
    p.backends = "cpu_generic,cpu_generic";
    p.llm_split = 99;
    expect_create(&p, VH_ERR_INVALID_ARGUMENT, "llm_split");
    char *text = read_text(trace);
    ck_assert_str_eq(text, precious);
    free(text);
    ck_assert_int_eq(count_entries(dir), 1);

    /* a session that was made and destroyed replaces it with its trace, one JSON document */
    p.backends = "cpu_generic";
    p.llm_split = -1;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    uint8_t rgb[24 * 16 * 3];
    for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)(i * 29);
    vh_frame f;
    vh_frame_init(&f);
    f.rgb = rgb;
    f.width = 24;
    f.height = 16;
    f.instruction = "pick up the red block";
    ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_OK);
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, 60000), VH_OK);
    ck_assert_int_eq(a.status, VH_OK);
    text = read_text(trace);
    ck_assert_str_eq(text, precious); /* written at destroy, not before */
    free(text);
    vh_session_destroy(s);

    json_error_t jerr;
    json_t *root = json_load_file(trace, 0, &jerr);
    ck_assert_msg(root, "%s: %s", trace, jerr.text);
    json_t *events = json_object_get(root, "traceEvents");
    ck_assert(json_is_array(events));
    int spans = 0;
    for (size_t i = 0; i < json_array_size(events); i++)
        spans += !strcmp(json_string_value(json_object_get(json_array_get(events, i), "ph")), "X");
    ck_assert_int_gt(spans, 0);
    json_decref(root);
    ck_assert_int_eq(count_entries(dir), 1);

    vh_test_remove_tree(dir);
    free(dir);
    free(trace);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Plugins
 */
START_TEST(test_plugin_not_a_regular_file)
{
    char *dir = vh_test_make_temp_dir();
    vh_session_params p;
    base_params(&p, NULL);

    char *fifo = make_fifo(dir, "plugin.so"); /* dlopen used to block on it */
    p.plugin_path = fifo;
    expect_create(&p, VH_ERR_BACKEND_FAILED, "not a regular file");
    ck_assert(is_fifo(fifo));

    p.plugin_path = "/dev/zero";
    expect_create(&p, VH_ERR_BACKEND_FAILED, "not a regular file");

    /* found by name in a folder searched first */
    char *folder = join(dir, "plugins");
    ck_assert_int_eq(mkdir(folder, 0755), 0);
    char *named = make_fifo(folder, "vh_backend_cpu_generic.so");
    p.plugin_path = folder;
    expect_create(&p, VH_ERR_BACKEND_FAILED, "not a regular file");

    /* the best-plugin scan skips it with a warning and finds the real one on VH_BACKEND_PATH */
    log_capture log;
    base_params(&p, &log);
    p.backends = NULL;
    p.plugin_path = folder;
    expect_create(&p, VH_OK, NULL);
    ck_assert_msg(count_logged(&log, VH_LOG_WARN, "not a regular file") == 1, "log: %s", log.text);
    ck_assert(is_fifo(named));

    vh_test_remove_tree(dir);
    free(dir);
    free(fifo);
    free(folder);
    free(named);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * The split-cost cache: two cpu_generic stages without llm_split measure, or read the cache.
 */
static void split_params(vh_session_params *p, log_capture *log)
{
    base_params(p, log);
    p->backends = "cpu_generic,cpu_generic";
    p->execution_mode = VH_EXECUTION_SERIAL;
}

START_TEST(test_cache_not_a_regular_file)
{
    char *dir = vh_test_make_temp_dir();
    ck_assert_int_eq(setenv("VH_CACHE_DIR", dir, 1), 0);
    char *fifo = make_fifo(dir, CACHE_FILE);
    log_capture log;
    vh_session_params p;
    split_params(&p, &log);
    expect_create(&p, VH_OK, NULL); /* measured without the cache; used to block in fopen */
    ck_assert_msg(count_logged(&log, VH_LOG_WARN, "not a regular file") == 1, "log: %s", log.text); /* read */
    ck_assert_msg(count_logged(&log, VH_LOG_WARN, "cannot open") == 1, "log: %s", log.text);        /* write */
    ck_assert_msg(count_logged(&log, VH_LOG_INFO, "balanced by measured costs") == 1, "log: %s", log.text);
    ck_assert(is_fifo(fifo));
    unlink(fifo);

    ck_assert_int_eq(mkdir(fifo, 0755), 0); /* a folder of that name */
    split_params(&p, &log);
    expect_create(&p, VH_OK, NULL);
    ck_assert_msg(count_logged(&log, VH_LOG_WARN, CACHE_FILE) == 2, "log: %s", log.text);

    vh_test_remove_tree(dir);
    free(dir);
    free(fifo);
}
END_TEST

/* The setup's key, as the library wrote it into a fresh cache. */
static char *measure_key(const char *cache)
{
    log_capture log;
    vh_session_params p;
    split_params(&p, &log);
    expect_create(&p, VH_OK, NULL);
    char *text = read_text(cache);
    char *tab = strchr(text, '\t');
    ck_assert_msg(tab && !strchr(tab + 1, '\t') && strchr(tab, '\n'), "cache: %s", text);
    *tab = '\0';
    return text;
}

START_TEST(test_cache_values_checked)
{
    char *dir = vh_test_make_temp_dir();
    ck_assert_int_eq(setenv("VH_CACHE_DIR", dir, 1), 0);
    char *cache = join(dir, CACHE_FILE);
    char *key = measure_key(cache);

    /* every line for this key but the last is unusable; the last one must be the costs used */
    static const char *const bad[] = {
        "nan 2000000 3000000 4000000", "5000000 inf 3000000 4000000", "5000000 2000000 -nan 4000000",
        "-1 2000000 3000000 4000000",  "5000000 2000000 3000000 -4000000", "1e300 2000000 3000000 4000000",
        "5000000 2000000 3000000 1e19", "5000000 0 3000000 4000000", "5000000 2000000 3000000",
        "5000000 2000000 3000000 4000000 6", "5000000 2000000 3000000 4000000x", "garbage",
        "",
    };
    const int n_bad = (int)(sizeof bad / sizeof bad[0]);
    size_t size = 65536, used = 0;
    char *text = malloc(size);
    ck_assert_ptr_nonnull(text);
    used += (size_t)snprintf(text + used, size - used, "no tab on this line\nother-setup\tnan nan nan nan\n");
    for (int i = 0; i < n_bad; i++) used += (size_t)snprintf(text + used, size - used, "%s\t%s\n", key, bad[i]);
    used += (size_t)snprintf(text + used, size - used, "%s\t", key); /* longer than any line the cache holds */
    for (int i = 0; i < 300; i++) used += (size_t)snprintf(text + used, size - used, "1 ");
    used += (size_t)snprintf(text + used, size - used, "\n%s\t5000000 2000000 3000000 4000000\n", key);
    write_text(cache, text);

    log_capture log;
    vh_session_params p;
    split_params(&p, &log);
    expect_create(&p, VH_OK, NULL);
    ck_assert_msg(count_logged(&log, VH_LOG_WARN, "ignored") == n_bad + 1, "log: %s", log.text);
    ck_assert_msg(count_logged(&log, VH_LOG_INFO, "stage 0 fixed 5.00 ms + 2.000 ms a block, stage 1 fixed 3.00 ms + "
                                                  "4.000 ms a block") == 1,
                  "log: %s", log.text);
    char *after = read_text(cache);
    ck_assert_str_eq(after, text); /* read, not measured: nothing appended */
    free(after);

    /* only bad lines: measured again, and the new measurement appended */
    used = 0;
    for (int i = 0; i < n_bad; i++) used += (size_t)snprintf(text + used, size - used, "%s\t%s\n", key, bad[i]);
    write_text(cache, text);
    split_params(&p, &log);
    expect_create(&p, VH_OK, NULL);
    ck_assert_msg(count_logged(&log, VH_LOG_WARN, "ignored") == n_bad, "log: %s", log.text);
    after = read_text(cache);
    ck_assert_uint_gt(strlen(after), used);
    ck_assert(!strncmp(after, text, used) && !strncmp(after + used, key, strlen(key)));
    free(after);

    free(text);
    free(key);
    free(cache);
    vh_test_remove_tree(dir);
    free(dir);
}
END_TEST

int main(void)
{
    model_dir = vh_test_source_path(MODEL_DIR);
    Suite *suite = suite_create("session_files");
    TCase *tc = tcase_create("files");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_trace_not_a_regular_file);
    tcase_add_test(tc, test_failed_create_keeps_the_trace_file);
    tcase_add_test(tc, test_plugin_not_a_regular_file);
    tcase_add_test(tc, test_cache_not_a_regular_file);
    tcase_add_test(tc, test_cache_values_checked);
    suite_add_tcase(suite, tc);
    int rc = vh_test_run_suite(suite);
    free(model_dir);
    return rc;
}
