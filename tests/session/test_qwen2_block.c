/*
 * Backend ABI 2.2 against a float64 reference written here: a tiny Qwen2 decoder (MindDrive's LLM)
 * described in memory (hidden 64, 4 query heads and 2 KV heads of 16, intermediate 96, RoPE theta
 * 1e6, RMSNorm eps 1e-6, 2 layers) with q/k/v biases and two LoRA sets of rank 4 on q, k, v and o
 * (distinct random weights), run by a backend plugin loaded through the library's loader, its
 * executor called directly:
 *
 *   A  a prefill of three sequences in one batch, LoRA sets 0, 1, 0 (VH_BATCH_SEGMENT_ADAPTERS)
 *   B  a decode step of the three, the segments in another order (sets 1, 0, 0: runs of one set)
 *   C  a chunk of three rows packed with two decode rows
 *   D  three one-row decode steps without batch options (set 0; on cuda: eager, captured, replayed
 *      as a CUDA graph), the embedding and LLM blocks only, read back with read_hidden
 *   E  a decode step with the planner on two of the three segments (VH_BATCH_SEGMENT_PLANS): the
 *      third one's noise is NaN and its plan row a sentinel, neither may be touched; the planned
 *      segments' plans equal an unmasked run of the same step
 *
 * Each run's hidden rows (VH_BATCH_HIDDEN_ROWS: the head's normed rows) are compared with the
 * reference: RMSNorm, q/k/v = W x + b + scale B_s (A_s x) for the segment's set s, rotate-half RoPE,
 * GQA causal attention over the sequence's cache, o with its LoRA, SwiGLU MLP, all in float64 from
 * the same (fp32 or bf16-rounded) weights. Models: fp32 weights; bf16 weights; fp32 with biases and
 * no LoRA (the path cpu_amx fuses q|k|v in, biases in the GEMM's epilogue). Then refusals: a set a
 * block lacks, a set past the two the backends run, the options without their arrays.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/plugin_loader.h"
#include "test_support.h"

#ifndef QWEN2_BACKEND
#define QWEN2_BACKEND "cpu_generic"
#endif
/* The largest |got - want| / max(|want|, 1) over the hidden rows (the normed rows are O(1): the
 * floor keeps near-zero elements from dominating). fp32 backends: 1e-5 (fp32 sums of 64..96 terms
 * over two layers). Backends that round to bf16 set QWEN2_TOL (meson.build says how it is bound). */
#ifndef QWEN2_TOL
#define QWEN2_TOL 1e-5
#endif

enum { D = 64, HQ = 4, HKV = 2, HD = 16, FF = 96, LAYERS = 2, V = 40, RANK = 4, SEQS = 3, CTX = 32, ROWS = 32 };
enum { QD = HQ * HD, KVD = HKV * HD };
enum { PF = D, PL = 8, PM = 3, PT = 4, PG = 32, PLAYERS = 2, NOISE_STRIDE = PL, PLAN_STRIDE = 2 * PM * PT + 2 * PL };
#define THETA 1e6f
#define EPS 1e-6f
#define LORA_SCALE 2.0f /* alpha 8 / r 4 */

typedef enum model_variant { MODEL_F32, MODEL_BF16, MODEL_BIAS_ONLY, N_VARIANTS } model_variant;
static const char *const variant_names[N_VARIANTS] = {"fp32 weights", "bf16 weights", "biases, no LoRA"};

/* ------------------------------------------------------------------------------------------------
 * The model in memory: every tensor's values as the backend sees them (fp32, or bf16 bits) and as
 * the reference reads them (the same values in float).
 */
typedef struct tensor {
    float *values;                     /* what the reference reads */
    void *data;                        /* what the backend reads: values, or their bf16 bits */
    int64_t shape[2];
    uint32_t ndim;
} tensor;

typedef struct layer_weights {
    tensor attn_norm, q, k, v, o, mlp_norm, gate, up, down, q_bias, k_bias, v_bias;
    tensor lora_a[2][4], lora_b[2][4]; /* [set][q, k, v, o] */
} layer_weights;

typedef struct model {
    model_variant variant;
    tensor embed, head_norm;
    layer_weights layers[LAYERS];
    tensor plan[VH_PLAN_N_TENSORS];
    /* descriptors */
    vh_tensor_view views[LAYERS + 3][VH_PLAN_N_TENSORS + VH_TF_N_ROLES];
    vh_block_desc blocks[LAYERS + 3];
    vh_block_params plain_params;
    vh_transformer_params llm_params[LAYERS];
    vh_slot_desc slots[3];             /* embeds, rows, outputs */
    vh_state_desc states[LAYERS];
    vh_planner_params planner_params;
    vh_model_desc desc;
} model;

enum { BLOCK_EMBED = 0, BLOCK_HEAD = LAYERS + 1, BLOCK_PLANNER = LAYERS + 2, N_BLOCKS = LAYERS + 3 };

static uint64_t rng_state;
static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
}

/* Values uniform in [center - spread, center + spread], rounded to bf16 where the model is. */
static void make_tensor(tensor *t, const model *m, int64_t rows, int64_t cols, double center, double spread)
{
    const int64_t n = rows * (cols ? cols : 1);
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->values = malloc(sizeof(float) * (size_t)n);
    const int bf16 = m->variant == MODEL_BF16;
    uint16_t *bits = bf16 ? malloc(sizeof(uint16_t) * (size_t)n) : NULL;
    for (int64_t i = 0; i < n; i++) {
        float x = (float)(center + spread * uniform());
        if (bf16) {
            bits[i] = vh_f32_to_bf16(x);
            x = vh_bf16_to_f32(bits[i]);
        }
        t->values[i] = x;
    }
    t->data = bf16 ? (void *)bits : (void *)t->values;
}

static void free_tensor(tensor *t)
{
    if (t->data != t->values) free(t->data);
    free(t->values);
}

static void add_view(model *m, uint32_t block, const tensor *t, uint32_t role, const char *name)
{
    vh_block_desc *d = &m->blocks[block];
    vh_tensor_view *v = &m->views[block][d->n_tensors++];
    *v = (vh_tensor_view){.data = t->data, .dtype = t->data == t->values ? VH_DTYPE_F32 : VH_DTYPE_BF16,
                          .ndim = t->ndim, .shape = {t->shape[0], t->ndim == 2 ? t->shape[1] : 0}, .name = name,
                          .role = role};
}

static void build_model(model *m, model_variant variant)
{
    memset(m, 0, sizeof *m);
    m->variant = variant;
    rng_state = 0x5eed0000ull + (uint64_t)variant;
    const double w_in = 1.0 / sqrt(D), w_q = 1.0 / sqrt(QD), w_f = 1.0 / sqrt(FF);
    make_tensor(&m->embed, m, V, D, 0, 1.0);
    make_tensor(&m->head_norm, m, D, 0, 1.0, 0.2);
    m->plain_params.struct_size = sizeof m->plain_params;
    enum { SLOT_EMBEDS, SLOT_ROWS, SLOT_OUTPUTS };
    m->slots[SLOT_EMBEDS] = (vh_slot_desc){"vision.embeds", VH_SLOT_KIND_EMBEDS, 0};
    m->slots[SLOT_ROWS] = (vh_slot_desc){"rows", VH_SLOT_KIND_ROWS, 0};
    m->slots[SLOT_OUTPUTS] = (vh_slot_desc){"outputs", VH_SLOT_KIND_OUTPUTS, 0};
    m->blocks[BLOCK_EMBED] = (vh_block_desc){.kind = VH_BLOCK_EMBED_LOOKUP, .params = &m->plain_params,
                                             .n_inputs = 1, .inputs = {SLOT_EMBEDS}, .output = SLOT_ROWS,
                                             .state = VH_NO_STATE};
    add_view(m, BLOCK_EMBED, &m->embed, VH_EMBED_LOOKUP_TABLE, "model.embed_tokens.weight");
    for (uint32_t l = 0; l < LAYERS; l++) {
        layer_weights *w = &m->layers[l];
        const uint32_t b = 1 + l;
        make_tensor(&w->attn_norm, m, D, 0, 1.0, 0.2);
        make_tensor(&w->q, m, QD, D, 0, 2 * w_in);
        make_tensor(&w->k, m, KVD, D, 0, 2 * w_in);
        make_tensor(&w->v, m, KVD, D, 0, w_in);
        make_tensor(&w->o, m, D, QD, 0, w_q);
        make_tensor(&w->mlp_norm, m, D, 0, 1.0, 0.2);
        make_tensor(&w->gate, m, FF, D, 0, w_in);
        make_tensor(&w->up, m, FF, D, 0, w_in);
        make_tensor(&w->down, m, D, FF, 0, w_f);
        make_tensor(&w->q_bias, m, QD, 0, 0, 0.5); /* Qwen2's biases are large next to W x */
        make_tensor(&w->k_bias, m, KVD, 0, 0, 0.5);
        make_tensor(&w->v_bias, m, KVD, 0, 0, 0.2);
        /* Qwen2's decoder layer: Llama's features with q/k/v biases, two LoRA sets */
        m->llm_params[l] = (vh_transformer_params){
            .struct_size = sizeof(vh_transformer_params), .layer = l, .norm = VH_NORM_RMS, .norm_eps = EPS,
            .placement = VH_NORM_PRE, .attention = VH_ATTN_CAUSAL_KV, .rope = VH_ROPE_HALF, .rope_theta = THETA,
            .mlp = VH_MLP_SILU_GATED, .flags = VH_TF_QKV_BIAS, .lora_sets = variant == MODEL_BIAS_ONLY ? 0 : 2,
            .lora_scale = variant == MODEL_BIAS_ONLY ? 0.0f : LORA_SCALE};
        m->states[l] = (vh_state_desc){"kv", VH_STATE_KV_CACHE};
        m->blocks[b] = (vh_block_desc){.kind = VH_BLOCK_TRANSFORMER,
                                       .params = (const vh_block_params *)&m->llm_params[l], .n_inputs = 1,
                                       .inputs = {SLOT_ROWS}, .output = SLOT_ROWS, .state = l};
        const tensor *base[] = {&w->attn_norm, &w->q, &w->k, &w->v, &w->o, &w->mlp_norm, &w->gate, &w->up,
                                &w->down};
        const uint32_t base_roles[] = {VH_TF_ATTN_NORM_W, VH_TF_Q_W, VH_TF_K_W, VH_TF_V_W, VH_TF_O_W,
                                       VH_TF_MLP_NORM_W, VH_TF_GATE_W, VH_TF_UP_W, VH_TF_DOWN_W};
        for (uint32_t r = 0; r < 9; r++) add_view(m, b, base[r], base_roles[r], "base");
        add_view(m, b, &w->q_bias, VH_TF_Q_B, "q_proj.bias");
        add_view(m, b, &w->k_bias, VH_TF_K_B, "k_proj.bias");
        add_view(m, b, &w->v_bias, VH_TF_V_B, "v_proj.bias");
        if (variant == MODEL_BIAS_ONLY) continue;
        const int64_t in[4] = {D, D, D, QD}, out[4] = {QD, KVD, KVD, D};
        for (uint32_t set = 0; set < 2; set++)
            for (uint32_t p = 0; p < 4; p++) {
                make_tensor(&w->lora_a[set][p], m, RANK, in[p], 0, 1.0 / sqrt((double)in[p]));
                make_tensor(&w->lora_b[set][p], m, out[p], RANK, 0, 0.15);
                add_view(m, b, &w->lora_a[set][p], vh_tf_lora_role(set, p), "lora_A");
                add_view(m, b, &w->lora_b[set][p], vh_tf_lora_role(set, p) + 1, "lora_B");
            }
    }
    m->blocks[BLOCK_HEAD] = (vh_block_desc){.kind = VH_BLOCK_READOUT, .params = &m->plain_params,
                                            .n_inputs = 1, .inputs = {SLOT_ROWS}, .output = SLOT_OUTPUTS,
                                            .state = VH_NO_STATE};
    add_view(m, BLOCK_HEAD, &m->head_norm, VH_READOUT_NORM, "model.norm.weight");

    /* the planner (its math is tested against Orion's in orion_fixtures; here: which segments run) */
    m->planner_params = (vh_planner_params){.struct_size = sizeof(vh_planner_params), .feature_dim = PF,
                                            .latent_dim = PL, .gru_layers = PLAYERS, .gru_hidden = PG,
                                            .n_modes = PM, .n_steps = PT, .min_log_sigma = -5, .max_log_sigma = 5};
    m->blocks[BLOCK_PLANNER] = (vh_block_desc){.kind = VH_BLOCK_VAE_GRU_PLANNER,
                                               .params = (const vh_block_params *)&m->planner_params,
                                               .n_inputs = 1, .inputs = {SLOT_OUTPUTS}, .output = SLOT_OUTPUTS,
                                               .state = VH_NO_STATE};
    const int64_t shapes[VH_PLAN_N_TENSORS][2] = {
        [VH_PLAN_ENC1_W] = {2 * PF, PF}, [VH_PLAN_ENC1_B] = {2 * PF, 0}, [VH_PLAN_ENC2_W] = {2 * PF, 2 * PF},
        [VH_PLAN_ENC2_B] = {2 * PF, 0}, [VH_PLAN_ENC3_W] = {PF / 2, 2 * PF}, [VH_PLAN_ENC3_B] = {PF / 2, 0},
        [VH_PLAN_DIST_W] = {2 * PL, PF / 2}, [VH_PLAN_DIST_B] = {2 * PL, 0},
        [VH_PLAN_GRU0 + 0] = {3 * PG, PL}, [VH_PLAN_GRU0 + 1] = {3 * PG, PG}, [VH_PLAN_GRU0 + 2] = {3 * PG, 0},
        [VH_PLAN_GRU0 + 3] = {3 * PG, 0}, [VH_PLAN_GRU0 + 4] = {3 * PG, PG}, [VH_PLAN_GRU0 + 5] = {3 * PG, PG},
        [VH_PLAN_GRU0 + 6] = {3 * PG, 0}, [VH_PLAN_GRU0 + 7] = {3 * PG, 0},
        [VH_PLAN_MLP1_W] = {2 * PG, PG}, [VH_PLAN_MLP1_B] = {2 * PG, 0}, [VH_PLAN_MLP2_W] = {4 * PG, 2 * PG},
        [VH_PLAN_MLP2_B] = {4 * PG, 0}, [VH_PLAN_MLP3_W] = {PF, 4 * PG}, [VH_PLAN_MLP3_B] = {PF, 0},
        [VH_PLAN_DEC1_W] = {2 * PF, 2 * PF}, [VH_PLAN_DEC1_B] = {2 * PF, 0}, [VH_PLAN_DEC2_W] = {2 * PF, 2 * PF},
        [VH_PLAN_DEC2_B] = {2 * PF, 0}, [VH_PLAN_DEC3_W] = {2 * PM, 2 * PF}, [VH_PLAN_DEC3_B] = {2 * PM, 0},
    };
    for (uint32_t r = 0; r < VH_PLAN_N_TENSORS; r++) {
        if (!shapes[r][0]) continue; /* GRU layers past PLAYERS */
        make_tensor(&m->plan[r], m, shapes[r][0], shapes[r][1], 0,
                    shapes[r][1] ? 1.0 / sqrt((double)shapes[r][1]) : 0.1);
        add_view(m, BLOCK_PLANNER, &m->plan[r], r, "planner");
    }

    for (uint32_t b = 0; b < N_BLOCKS; b++) {
        m->blocks[b].struct_size = sizeof(vh_block_desc);
        m->blocks[b].tensors = m->views[b];
    }
    m->desc = (vh_model_desc){.struct_size = sizeof(vh_model_desc), .n_image_tokens = 1,
                              .llm = {.hidden = D, .intermediate = FF, .n_layers = LAYERS, .n_heads = HQ,
                                      .n_kv_heads = HKV, .head_dim = HD, .vocab = V, .rms_eps = EPS},
                              .n_slots = 3, .slots = m->slots, .n_states = LAYERS, .states = m->states,
                              .n_blocks = N_BLOCKS, .blocks = m->blocks};
}

static void free_model(model *m)
{
    free_tensor(&m->embed);
    free_tensor(&m->head_norm);
    for (uint32_t l = 0; l < LAYERS; l++) {
        layer_weights *w = &m->layers[l];
        tensor *all[] = {&w->attn_norm, &w->q, &w->k, &w->v, &w->o, &w->mlp_norm, &w->gate, &w->up, &w->down,
                         &w->q_bias, &w->k_bias, &w->v_bias};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free_tensor(all[i]);
        for (uint32_t s = 0; s < 2 && m->variant != MODEL_BIAS_ONLY; s++)
            for (uint32_t p = 0; p < 4; p++) {
                free_tensor(&w->lora_a[s][p]);
                free_tensor(&w->lora_b[s][p]);
            }
    }
    for (uint32_t r = 0; r < VH_PLAN_N_TENSORS; r++)
        if (m->plan[r].values) free_tensor(&m->plan[r]);
}

/* ------------------------------------------------------------------------------------------------
 * The float64 reference: one row at a time, in order, each sequence's K/V cache in float64.
 */
typedef struct reference {
    const model *m;
    double k[LAYERS][SEQS][CTX][KVD], v[LAYERS][SEQS][CTX][KVD];
} reference;

static void matvec(const tensor *w, const double *x, double *y, int add)
{
    for (int64_t r = 0; r < w->shape[0]; r++) {
        double s = 0;
        for (int64_t c = 0; c < w->shape[1]; c++) s += (double)w->values[r * w->shape[1] + c] * x[c];
        y[r] = add ? y[r] + s : s;
    }
}

static void rmsnorm(const double *x, const tensor *w, double *out)
{
    double ss = 0;
    for (int i = 0; i < D; i++) ss += x[i] * x[i];
    const double scale = 1.0 / sqrt(ss / D + (double)EPS);
    for (int i = 0; i < D; i++) out[i] = (double)w->values[i] * (x[i] * scale);
}

/* y += scale * B (A x): projection p's adapter of `set` (none in the bias-only model) */
static void lora_delta(const model *m, const layer_weights *w, uint32_t set, int p, const double *x, double *y)
{
    if (m->variant == MODEL_BIAS_ONLY) return;
    double t[RANK], d[QD + D]; /* (the widest output: QD or D) */
    matvec(&w->lora_a[set][p], x, t, 0);
    matvec(&w->lora_b[set][p], t, d, 0);
    for (int64_t i = 0; i < w->lora_b[set][p].shape[0]; i++) y[i] += (double)LORA_SCALE * d[i];
}

/* HF rotate-half RoPE on n_heads heads of vec at position pos. */
static void rope(double *vec, int n_heads, int pos)
{
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < HD / 2; i++) {
            const double inv_freq = pow((double)THETA, -2.0 * i / HD), a = pos * inv_freq;
            double *x = vec + h * HD;
            const double x0 = x[i], x1 = x[i + HD / 2];
            x[i] = x0 * cos(a) - x1 * sin(a);
            x[i + HD / 2] = x1 * cos(a) + x0 * sin(a);
        }
}

/* One token at `pos` of sequence `seq` with LoRA set `set`: the last layer's output (raw) and the
 * head's normed row. */
static void reference_row(reference *ref, int32_t token, uint32_t seq, uint32_t pos, uint32_t set, double *raw,
                          double *normed)
{
    const model *m = ref->m;
    double x[D], xn[D], q[QD], k[KVD], v[KVD], attn[QD], o[D], g[FF], u[FF];
    for (int i = 0; i < D; i++) x[i] = m->embed.values[(size_t)token * D + i];
    for (uint32_t l = 0; l < LAYERS; l++) {
        const layer_weights *w = &m->layers[l];
        rmsnorm(x, &w->attn_norm, xn);
        matvec(&w->q, xn, q, 0);
        matvec(&w->k, xn, k, 0);
        matvec(&w->v, xn, v, 0);
        lora_delta(m, w, set, 0, xn, q);
        lora_delta(m, w, set, 1, xn, k);
        lora_delta(m, w, set, 2, xn, v);
        for (int i = 0; i < QD; i++) q[i] += w->q_bias.values[i];
        for (int i = 0; i < KVD; i++) k[i] += w->k_bias.values[i], v[i] += w->v_bias.values[i];
        rope(q, HQ, (int)pos);
        rope(k, HKV, (int)pos);
        memcpy(ref->k[l][seq][pos], k, sizeof k);
        memcpy(ref->v[l][seq][pos], v, sizeof v);
        for (int h = 0; h < HQ; h++) {
            const int kvh = h / (HQ / HKV);
            double scores[CTX], top = -INFINITY, sum = 0;
            for (uint32_t j = 0; j <= pos; j++) {
                double s = 0;
                for (int i = 0; i < HD; i++) s += q[h * HD + i] * ref->k[l][seq][j][kvh * HD + i];
                scores[j] = s / sqrt((double)HD);
                if (scores[j] > top) top = scores[j];
            }
            for (uint32_t j = 0; j <= pos; j++) sum += scores[j] = exp(scores[j] - top);
            for (int i = 0; i < HD; i++) {
                double a = 0;
                for (uint32_t j = 0; j <= pos; j++) a += scores[j] * ref->v[l][seq][j][kvh * HD + i];
                attn[h * HD + i] = a / sum;
            }
        }
        matvec(&w->o, attn, o, 0);
        lora_delta(m, w, set, 3, attn, o);
        for (int i = 0; i < D; i++) x[i] += o[i];
        rmsnorm(x, &w->mlp_norm, xn);
        matvec(&w->gate, xn, g, 0);
        matvec(&w->up, xn, u, 0);
        for (int i = 0; i < FF; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
        matvec(&w->down, g, o, 0);
        for (int i = 0; i < D; i++) x[i] += o[i];
    }
    if (raw) memcpy(raw, x, sizeof x);
    if (normed) rmsnorm(x, &m->head_norm, normed);
}

/* ------------------------------------------------------------------------------------------------
 * Running batches on the plugin and on the reference.
 */
typedef struct fixture {
    vh_plugin *plugin;
    const vh_backend_iface *be;
    vh_executor *ex;
    model m;
    reference *ref;
    char why[512];
} fixture;

static void setup(fixture *f, model_variant variant)
{
    memset(f, 0, sizeof *f);
    vh_error err;
    ck_assert_msg(vh_plugin_load(QWEN2_BACKEND, NULL, NULL, &f->plugin, &err) == VH_OK, "%s", err.message);
    f->be = f->plugin->iface;
    build_model(&f->m, variant);
    f->ref = calloc(1, sizeof *f->ref);
    f->ref->m = &f->m;
    vh_executor_params p = {.struct_size = sizeof p, .model = &f->m.desc, .first_block = 0, .n_blocks = N_BLOCKS,
                            .max_sequences = SEQS, .max_context = CTX, .max_rows = ROWS, .max_images = 1,
                            .n_threads = 2};
    ck_assert_msg(f->be->executor_create(&p, &f->ex, f->why, sizeof f->why) == VH_OK, "%s: %s",
                  variant_names[variant], f->why);
}

static void teardown(fixture *f)
{
    f->be->executor_destroy(f->ex);
    vh_plugin_unload(f->plugin);
    free_model(&f->m);
    free(f->ref);
}

/* A segment of a test batch: its sequence, rows at its position, LoRA set. */
typedef struct seg_spec {
    uint32_t seq, n_rows, position;
    uint8_t set;
} seg_spec;

static int32_t token_at(uint32_t seq, uint32_t pos) { return (int32_t)((seq * 13 + pos * 7 + 3) % V); }

typedef struct batch_buffers {
    vh_segment segs[SEQS];
    uint8_t sets[SEQS];
    int32_t tokens[ROWS];
    uint32_t hidden_rows[ROWS];
    float out_hidden[ROWS * D];
    double want[ROWS * D];             /* the reference's normed rows, as hidden_rows */
} batch_buffers;

/* A batch of these segments asking (VH_BATCH_HIDDEN_ROWS) for up to `per_segment` rows of each
 * (its first and last ones first, then from its start; at most 4 a segment, what cuda returns),
 * and the reference's rows for them. */
static void make_batch(fixture *f, batch_buffers *bb, vh_batch *b, const seg_spec *spec, uint32_t n,
                       uint32_t per_segment, uint32_t options)
{
    memset(bb, 0, sizeof *bb);
    uint32_t row = 0, n_hidden = 0;
    for (uint32_t s = 0; s < n; s++) {
        bb->segs[s] = (vh_segment){.sequence = spec[s].seq, .n_rows = spec[s].n_rows,
                                   .position = spec[s].position, .image = -1};
        bb->sets[s] = spec[s].set;
        uint32_t picked = 0;
        for (uint32_t pass = 0; pass < 2; pass++)
            for (uint32_t i = 0; i < spec[s].n_rows && picked < per_segment; i++) {
                const int edge = i == 0 || i + 1 == spec[s].n_rows;
                if ((pass == 0) != edge) continue;
                bb->hidden_rows[n_hidden + picked++] = row + i;
            }
        for (uint32_t i = 0; i < spec[s].n_rows; i++) {
            bb->tokens[row + i] = token_at(spec[s].seq, spec[s].position + i);
            double normed[D];
            /* the set reaches the reference only where the batch names it */
            const uint32_t set = (options & VH_BATCH_SEGMENT_ADAPTERS) ? spec[s].set : 0;
            reference_row(f->ref, bb->tokens[row + i], spec[s].seq, spec[s].position + i, set, NULL, normed);
            for (uint32_t k = 0; k < picked; k++)
                if (bb->hidden_rows[n_hidden + k] == row + i) memcpy(bb->want + (size_t)(n_hidden + k) * D, normed,
                                                                     sizeof normed);
        }
        /* the planner reads each segment's rows in segment order: keep them that way */
        for (uint32_t a = 0; a < picked; a++)
            for (uint32_t c = a + 1; c < picked; c++)
                if (bb->hidden_rows[n_hidden + c] < bb->hidden_rows[n_hidden + a]) {
                    uint32_t t = bb->hidden_rows[n_hidden + a];
                    bb->hidden_rows[n_hidden + a] = bb->hidden_rows[n_hidden + c];
                    bb->hidden_rows[n_hidden + c] = t;
                    double tmp[D];
                    memcpy(tmp, bb->want + (size_t)(n_hidden + a) * D, sizeof tmp);
                    memcpy(bb->want + (size_t)(n_hidden + a) * D, bb->want + (size_t)(n_hidden + c) * D, sizeof tmp);
                    memcpy(bb->want + (size_t)(n_hidden + c) * D, tmp, sizeof tmp);
                }
        n_hidden += picked;
        row += spec[s].n_rows;
    }
    *b = (vh_batch){.struct_size = sizeof *b, .options = VH_BATCH_HIDDEN_ROWS | options, .n_segments = n,
                    .segments = bb->segs, .n_rows = row, .tokens = bb->tokens, .n_hidden_rows = n_hidden,
                    .hidden_rows = bb->hidden_rows, .out_hidden = bb->out_hidden, .segment_adapters = bb->sets};
    if (!(options & VH_BATCH_SEGMENT_ADAPTERS)) b->segment_adapters = NULL;
}

static void run_and_compare(fixture *f, const seg_spec *spec, uint32_t n, uint32_t options, const char *what)
{
    batch_buffers *bb = malloc(sizeof *bb);
    vh_batch b;
    make_batch(f, bb, &b, spec, n, 4, options);
    ck_assert_msg(f->be->executor_run(f->ex, &b, 0, BLOCK_HEAD + 1, f->why, sizeof f->why) == VH_OK, "%s: %s: %s",
                  variant_names[f->m.variant], what, f->why);
    const double e = vh_test_max_rel_error(bb->out_hidden, bb->want, (size_t)b.n_hidden_rows * D, 1.0);
    printf("%s, %s, %s: %u hidden rows, max error %.3g (bound %.3g)\n", QWEN2_BACKEND, variant_names[f->m.variant],
           what, b.n_hidden_rows, e, (double)QWEN2_TOL);
    ck_assert_msg(e <= QWEN2_TOL, "%s: %s: hidden rows differ from the float64 reference by %g (bound %g)",
                  variant_names[f->m.variant], what, e, (double)QWEN2_TOL);
    free(bb);
}

/* D: one-row decode steps of sequence 0 without options (set 0), the head left out; read_hidden. */
static void decode_without_options(fixture *f, uint32_t position, const char *what)
{
    int32_t token = token_at(0, position);
    vh_segment seg = {.sequence = 0, .n_rows = 1, .position = position, .image = -1};
    vh_batch b = {.struct_size = sizeof b, .n_segments = 1, .segments = &seg, .n_rows = 1, .tokens = &token};
    ck_assert_msg(f->be->executor_run(f->ex, &b, 0, 1 + LAYERS, f->why, sizeof f->why) == VH_OK, "%s: %s",
                  what, f->why);
    float got[D];
    double want[D];
    ck_assert_msg(f->be->read_hidden(f->ex, got, 1, f->why, sizeof f->why) == VH_OK, "%s", f->why);
    reference_row(f->ref, token, 0, position, 0, want, NULL);
    /* a maximum by comparison, not fmax: Debian 12's aarch64 GCC 12 crashes vectorising an fmax
     * reduction over a constant-length array (internal compiler error in vect_transform_reduction) */
    double scale = 0;
    for (int i = 0; i < D; i++)
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    /* raw rows (not normed): relative to the row's largest element */
    const double e = vh_test_max_rel_error(got, want, D, scale);
    printf("%s, %s, %s: max error %.3g\n", QWEN2_BACKEND, variant_names[f->m.variant], what, e);
    ck_assert_msg(e <= QWEN2_TOL, "%s: %s: the row differs from the float64 reference by %g (bound %g)",
                  variant_names[f->m.variant], what, e, (double)QWEN2_TOL);
}

/* E: the planner on segments 0 and 2 only; then the same step on all three. */
static void planner_on_some_segments(fixture *f, uint32_t position, uint8_t set_one)
{
    const seg_spec spec[SEQS] = {{0, 1, position, 0}, {1, 1, position, set_one}, {2, 1, position, 0}};
    batch_buffers *bb = malloc(sizeof *bb);
    vh_batch b;
    make_batch(f, bb, &b, spec, SEQS, 1, VH_BATCH_SEGMENT_ADAPTERS);
    float noise[SEQS * NOISE_STRIDE], plan[SEQS * PLAN_STRIDE], plan_all[SEQS * PLAN_STRIDE];
    for (int i = 0; i < SEQS * NOISE_STRIDE; i++) noise[i] = (float)(0.5 * uniform());
    for (int i = 0; i < NOISE_STRIDE; i++) noise[NOISE_STRIDE + i] = NAN; /* segment 1's: never read */
    for (int i = 0; i < SEQS * PLAN_STRIDE; i++) plan[i] = 12345.0f;
    const uint8_t planned[SEQS] = {1, 0, 1};
    b.options |= VH_BATCH_PLAN | VH_BATCH_SEGMENT_PLANS;
    b.plan_noise = noise;
    b.plan_noise_stride = NOISE_STRIDE;
    b.out_plan = plan;
    b.plan_out_stride = PLAN_STRIDE;
    b.segment_plans = planned;
    ck_assert_msg(f->be->executor_run(f->ex, &b, 0, N_BLOCKS, f->why, sizeof f->why) == VH_OK, "planner: %s", f->why);
    const double e = vh_test_max_rel_error(bb->out_hidden, bb->want, (size_t)b.n_hidden_rows * D, 1.0);
    ck_assert_msg(e <= QWEN2_TOL, "planner step: hidden rows differ from the float64 reference by %g", e);
    for (int i = 0; i < PLAN_STRIDE; i++) {
        ck_assert_msg(plan[PLAN_STRIDE + i] == 12345.0f, "segment 1's plan row was written (element %d: %g)", i,
                      plan[PLAN_STRIDE + i]);
        ck_assert_msg(isfinite(plan[i]) && isfinite(plan[2 * PLAN_STRIDE + i]) && plan[i] != 12345.0f,
                      "a planned segment's plan element %d is %g / %g", i, plan[i], plan[2 * PLAN_STRIDE + i]);
    }
    /* the same step again (the same K/V rewritten), every segment planned, segment 1 with noise */
    for (int i = 0; i < NOISE_STRIDE; i++) noise[NOISE_STRIDE + i] = 0.25f;
    b.options &= ~VH_BATCH_SEGMENT_PLANS;
    b.segment_plans = NULL;
    b.out_plan = plan_all;
    ck_assert_msg(f->be->executor_run(f->ex, &b, 0, N_BLOCKS, f->why, sizeof f->why) == VH_OK, "planner: %s", f->why);
    /* a GEMM over 2 rows and one over 3 may sum in another order: the fp32 bound, or the backend's */
    double worst = 0;
    for (int s = 0; s < SEQS; s += 2)
        for (int i = 0; i < PLAN_STRIDE; i++) {
            const double want = plan_all[s * PLAN_STRIDE + i], got = plan[s * PLAN_STRIDE + i];
            const double e = fabs(got - want) / (fabs(want) > 1.0 ? fabs(want) : 1.0);
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e; /* by comparison, as above; NaN fails */
        }
    ck_assert_msg(worst <= QWEN2_TOL, "planned segments' plans differ from the unmasked run's by %g", worst);
    ck_assert_msg(isfinite(plan_all[PLAN_STRIDE]), "segment 1 unplanned in the unmasked run");
    free(bb);
}

START_TEST(test_qwen2_against_float64)
{
    fixture f;
    setup(&f, (model_variant)_i);
    const uint32_t adapters = VH_BATCH_SEGMENT_ADAPTERS;
    const uint8_t one = f.m.variant == MODEL_BIAS_ONLY ? 0 : 1; /* the bias-only model holds set 0 alone */
    /* A: three prefills, sets 0, 1, 0 */
    const seg_spec a[] = {{0, 7, 0, 0}, {1, 5, 0, one}, {2, 6, 0, 0}};
    run_and_compare(&f, a, 3, adapters, "A prefill");
    /* B: a decode step of each, another order: runs of sets [1] [0 0] */
    const seg_spec b[] = {{1, 1, 5, one}, {0, 1, 7, 0}, {2, 1, 6, 0}};
    run_and_compare(&f, b, 3, adapters, "B decode");
    /* C: a chunk of three rows of sequence 2 packed with decode rows */
    const seg_spec c[] = {{2, 3, 7, 0}, {1, 1, 6, one}, {0, 1, 8, 0}};
    run_and_compare(&f, c, 3, adapters, "C chunk + decode");
    /* D: sequence 0's decode steps without options (set 0): on cuda eager, captured, replayed */
    decode_without_options(&f, 9, "D decode 1");
    decode_without_options(&f, 10, "D decode 2");
    decode_without_options(&f, 11, "D decode 3");
    /* the other sequences catch up to position 12, batched without adapters (set 0 for all) */
    const seg_spec catch_up[] = {{1, 5, 7, 0}, {2, 2, 10, 0}};
    run_and_compare(&f, catch_up, 2, 0, "catch-up without VH_BATCH_SEGMENT_ADAPTERS");
    /* E: the planner on two of three segments */
    planner_on_some_segments(&f, 12, one);
    teardown(&f);
}
END_TEST

/* What a batch may not ask: a set the blocks lack, a set past the last, options without arrays. */
START_TEST(test_adapter_refusals)
{
    fixture f;
    setup(&f, MODEL_BIAS_ONLY);
    batch_buffers *bb = malloc(sizeof *bb);
    vh_batch b;
    const seg_spec spec[] = {{0, 2, 0, 0}, {1, 2, 0, 1}};
    make_batch(&f, bb, &b, spec, 2, 1, VH_BATCH_SEGMENT_ADAPTERS);
    ck_assert_int_eq(f.be->executor_run(f.ex, &b, 0, BLOCK_HEAD + 1, f.why, sizeof f.why), VH_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(f.why, QWEN2_BACKEND) && strstr(f.why, "segment 1") && strstr(f.why, "LoRA set 1"), "%s",
                  f.why);
    bb->sets[1] = 2; /* past the two sets the backends run */
    ck_assert_int_eq(f.be->executor_run(f.ex, &b, 0, BLOCK_HEAD + 1, f.why, sizeof f.why), VH_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(f.why, "LoRA set 2"), "%s", f.why);
    b.segment_adapters = NULL;
    ck_assert_int_eq(f.be->executor_run(f.ex, &b, 0, BLOCK_HEAD + 1, f.why, sizeof f.why), VH_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(f.why, "segment_adapters"), "%s", f.why);
    b.options = VH_BATCH_HIDDEN_ROWS | VH_BATCH_SEGMENT_PLANS; /* without VH_BATCH_PLAN, without the array */
    ck_assert_int_eq(f.be->executor_run(f.ex, &b, 0, BLOCK_HEAD + 1, f.why, sizeof f.why), VH_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(f.why, "segment_plans"), "%s", f.why);
    /* set 0 named outright is what a batch without the option runs: accepted */
    bb->sets[1] = 0;
    b.options = VH_BATCH_HIDDEN_ROWS | VH_BATCH_SEGMENT_ADAPTERS;
    b.segment_adapters = bb->sets;
    ck_assert_msg(f.be->executor_run(f.ex, &b, 0, BLOCK_HEAD + 1, f.why, sizeof f.why) == VH_OK, "%s", f.why);
    free(bb);
    teardown(&f);
}
END_TEST

int main(void)
{
#ifdef QWEN2_SKIP_WITHOUT_DEVICE
    if (!vh_test_backend_usable(QWEN2_BACKEND)) return 77;
#endif
    Suite *s = suite_create("qwen2_block");
    TCase *tc = tcase_create("qwen2");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_qwen2_against_float64, 0, N_VARIANTS);
    tcase_add_test(tc, test_adapter_refusals);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
