/*
 * vlahybrid backend plugin ABI: what a backend (cuda, cpu_amx, cpu_generic, ...) implements.
 *
 * A backend is a shared module that exports one function, VH_BACKEND_ENTRY_SYMBOL, returning a
 * table of function pointers (vh_backend_iface). The core negotiates the table by version and size:
 * `abi_major` must equal the core's; `abi_minor` may differ, since minor versions only append
 * fields and the core reads only what both sides know. A table that is too short for its own
 * version, or of another major version, is refused with a message naming both versions.
 *
 * ABI 3.0: the model is a block graph of a model-neutral vocabulary (kinds described by features,
 * named slots and states, see "The model" below); every argument struct carries its size; a plugin
 * lists the kinds and feature sets, roles, parameters, options and slot kinds it runs
 * (vh_kind_support) and the batch options it honours, and refuses anything else with a message
 * naming it (vh_block_check below): it never computes a block it does not fully understand. A
 * plugin of ABI 2 (whose kinds named model architectures) is refused with both versions named.
 * ABI 3.1 appends: query sets (VH_SLOT_KIND_QUERIES: a frame's rows of a fixed count and width,
 * vh_model_desc.query_sets), frames in a batch and slots the core fills (VH_BATCH_SLOT_INPUTS),
 * the MLP chain's activation and LayerNorms, VH_BLOCK_MODULATED_NORM, a transformer layer's heads
 * and mask prefix for layers on query sets.
 *
 * The table describes a *block executor*. The core owns the model description (which blocks,
 * which tensors), the scheduling, and the threads between stages; the backend owns its memory,
 * streams, kernels and thread pools. One executor holds a contiguous range of the model's blocks,
 * makes their weights resident when it is created (reading them from host views into the
 * memory-mapped checkpoint, which stay valid for the executor's life), and runs sub-ranges of
 * those blocks on packed batches.
 *
 * Threading: calls on one executor never overlap, though they may come from different threads,
 * except memory(), which the application's thread may call while a stage thread runs the executor:
 * it must only read what executor_create fixed. Different executors (of the same or different
 * plugins) may run at the same time on different threads.
 * Errors: functions that can fail return a vh_status and write a one-line message into the
 * caller's buffer (err, err_size). A backend never aborts or exits the process.
 */
#ifndef VLAHYBRID_BACKEND_H
#define VLAHYBRID_BACKEND_H

#include <stdio.h>
#include <string.h>

#include "vlahybrid.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VH_BACKEND_ABI_MAJOR 3
#define VH_BACKEND_ABI_MINOR 1
#define VH_BACKEND_ENTRY_SYMBOL "vh_backend_entry"

#if defined(__GNUC__)
#define VH_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define VH_PLUGIN_EXPORT
#endif

/* ------------------------------------------------------------------------------------------------
 * Tensors: read-only views of checkpoint data, row-major, in the file's dtype.
 */
typedef enum vh_dtype {
    VH_DTYPE_F32 = 0,
    VH_DTYPE_F16 = 1,
    VH_DTYPE_BF16 = 2
} vh_dtype;

typedef struct vh_tensor_view {
    const void *data;          /* never NULL in a block's list (absent optional tensors are not listed) */
    vh_dtype dtype;
    uint32_t ndim;
    int64_t shape[4];
    const char *name;          /* the checkpoint's tensor name, for messages */
    uint32_t role;             /* what the tensor is in its block: the kind's role enum below */
} vh_tensor_view;

static inline float vh_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest even, as PyTorch does; NaN stays NaN. */
static inline uint16_t vh_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float vh_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0x1fu) {
        u = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        u = sign;
    } else { /* subnormal: renormalise */
        exp = 113;
        while (!(man & 0x400u)) { man <<= 1; exp--; }
        u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ------------------------------------------------------------------------------------------------
 * The model, as the core describes it to backends: a block graph. Named slots hold activations
 * (an image's pixels, a tower's tokens, the hidden rows of the batch, its outputs); named states
 * hold what a stream keeps between runs (a KV cache); each block reads its input slots, writes its
 * output slot and may own one state. Every block is an instance of a small vocabulary of kinds,
 * described by features (a transformer layer: its norm, attention, positions, MLP, biases, LoRA
 * sets), never by the model it comes from. Shapes and dtypes have been validated by the core before
 * a backend sees them.
 *
 * A plugin says what it runs per kind and feature set (vh_kind_support below); the core places a
 * block only on a plugin that supports it, and both refuse anything else with a message naming the
 * block, the feature and the backend (vh_block_check). Kinds, roles, features and flags are
 * numbered for good within a major version: never renumbered or reused; new ones are appended.
 */
typedef enum vh_block_kind {
    VH_BLOCK_PATCH_EMBED = 1,   /* pixels [3,S,S] -> tokens [prefix + patches, D]: a stride-P patch
                                   projection, prefix (class, register) tokens, added positions */
    VH_BLOCK_TRANSFORMER = 2,   /* one transformer layer, described by its features
                                   (vh_transformer_params): on a tower's tokens or on the rows */
    VH_BLOCK_MLP_CHAIN = 3,     /* linear layers with GELU between them, on the concatenated
                                   channels of its input slots (a projector) */
    VH_BLOCK_EMBED_LOOKUP = 4,  /* token ids (and image embeddings for VH_TOKEN_IMAGE rows) -> rows */
    VH_BLOCK_READOUT = 5,       /* final RMSNorm; greedy argmax over the vocabulary's logits; and/or
                                   the normed rows chosen by the batch (VH_BATCH_HIDDEN_ROWS) */
    VH_BLOCK_VAE_GRU_PLANNER = 6, /* a trajectory planner on each segment's feature (a row the
                                   read-out returned): a Gaussian latent (VAE encoder), a GRU over the
                                   future steps from it, a decoder to waypoints per mode */
    VH_BLOCK_MODULATED_NORM = 7 /* a LayerNorm without affine whose scale and shift come from a
                                   condition row: gamma(relu(reduce(c))) * ln(x) + beta(relu(reduce(c))) */
} vh_block_kind;

static inline const char *vh_block_kind_name(uint32_t kind)
{
    static const char *const names[] = {"?", "PATCH_EMBED", "TRANSFORMER", "MLP_CHAIN", "EMBED_LOOKUP", "READOUT",
                                        "VAE_GRU_PLANNER", "MODULATED_NORM"};
    return kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

/* Every role of every kind is below this (a block lists each at most once). */
#define VH_MAX_ROLES 64

/* Tensor roles, per kind. */
enum { /* VH_BLOCK_PATCH_EMBED roles */
    VH_PATCH_EMBED_W = 0,     /* [D, 3, P, P] */
    VH_PATCH_EMBED_B,         /* [D] */
    VH_PATCH_EMBED_POS,       /* [1, L, D]: L = patches, or prefix + patches (VH_PATCH_POS_PREFIX) */
    VH_PATCH_EMBED_CLS,       /* [1, 1, D], optional */
    VH_PATCH_EMBED_REG,       /* [1, R, D], optional */
    VH_PATCH_EMBED_N_ROLES
};

/* VH_BLOCK_TRANSFORMER roles. With width D, Hq query heads and Hkv key/value heads of hd, MLP
 * hidden F: pre-norm  x += ls1 * o(attn(norm1(x)));  x += ls2 * mlp(norm2(x))
 *           post-norm x = norm1(x + o(attn(x)));     x = norm2(x + mlp(x))
 * mlp: GELU   down(gelu(up(x)))          (up [F, D], down [D, F])
 *      SILU_GATED  down(silu(gate(x)) * up(x))   (gate, up [F, D], down [D, F])
 *      (each with its bias under VH_TF_MLP_BIAS; with VH_TF_MLP_SUB_NORM a LayerNorm of the hidden
 *      activations before down)
 * Projections are q, k, v (or one fused q|k|v [(Hq + 2 Hkv) hd, D]) and o [D, Hq hd]. */
enum {
    VH_TF_ATTN_NORM_W = 0, VH_TF_ATTN_NORM_B, /* [D]: norm1 (LayerNorm's bias only) */
    VH_TF_QKV_W, VH_TF_QKV_B,           /* fused: [(Hq + 2 Hkv) hd, D], [(Hq + 2 Hkv) hd] */
    VH_TF_Q_W, VH_TF_K_W, VH_TF_V_W,    /* [Hq hd, D], [Hkv hd, D], [Hkv hd, D] */
    VH_TF_Q_B, VH_TF_K_B, VH_TF_V_B,    /* [Hq hd], [Hkv hd], [Hkv hd]: added after q/k/v (and their
                                           LoRA deltas) */
    VH_TF_O_W, VH_TF_O_B,               /* [D, Hq hd], [D] */
    VH_TF_LS1,                          /* [D], VH_TF_LAYER_SCALE */
    VH_TF_MLP_NORM_W, VH_TF_MLP_NORM_B, /* [D]: norm2 */
    VH_TF_UP_W, VH_TF_UP_B,             /* [F, D], [F] */
    VH_TF_GATE_W,                       /* [F, D], SILU_GATED */
    VH_TF_DOWN_W, VH_TF_DOWN_B,         /* [D, F], [D] */
    VH_TF_LS2,                          /* [D], VH_TF_LAYER_SCALE */
    VH_TF_GATE_B,                       /* [F], SILU_GATED with VH_TF_MLP_BIAS */
    VH_TF_SUB_NORM_W, VH_TF_SUB_NORM_B, /* [F], VH_TF_MLP_SUB_NORM */
    VH_TF_BASE_ROLES,                   /* 24: the roles before the LoRA pairs */
    /* LoRA kept apart, in sets on the same base weights: y = W x + lora_scale * B (A x) with set s's
     * pair of projection p (0 q, 1 k, 2 v, 3 o) at vh_tf_lora_role(s, p) (A [r, in]) and the role
     * after it (B [out, r]); both or neither. A segment picks its set (VH_BATCH_SEGMENT_ADAPTERS). */
    VH_TF_LORA = 24,
    VH_TF_N_ROLES = VH_TF_LORA + 8 * 4
};
#define VH_TF_MAX_LORA_SETS 4
/* Set s's A of projection p (a constant expression where s and p are). */
#define VH_TF_LORA_ROLE(s, p) ((uint32_t)VH_TF_LORA + 8u * (s) + 2u * (p))

static inline uint32_t vh_tf_lora_role(uint32_t set, uint32_t proj) { return VH_TF_LORA_ROLE(set, proj); }

enum { /* VH_BLOCK_MLP_CHAIN roles: layer i's weight at 2 i, its bias at 2 i + 1; the LayerNorm
        * after layer i (vh_chain_params.norm_after) at VH_CHAIN_NORM1_W + 2 i, its bias after it */
    VH_CHAIN_FC1_W = 0, VH_CHAIN_FC1_B, /* [H1, sum of the inputs' widths], [H1] */
    VH_CHAIN_FC2_W, VH_CHAIN_FC2_B,     /* [Dl, H1], [Dl] */
    VH_CHAIN_FC3_W, VH_CHAIN_FC3_B,     /* [Dl, Dl], [Dl], absent in a chain of two */
    VH_CHAIN_NORM1_W, VH_CHAIN_NORM1_B, /* [H1] */
    VH_CHAIN_NORM2_W, VH_CHAIN_NORM2_B,
    VH_CHAIN_NORM3_W, VH_CHAIN_NORM3_B,
    VH_CHAIN_N_ROLES
};
enum { /* VH_BLOCK_MODULATED_NORM roles (inputs: x [rows, D], c [rows, C]) */
    VH_MLN_REDUCE_W = 0, VH_MLN_REDUCE_B, /* [D, C], [D] */
    VH_MLN_GAMMA_W, VH_MLN_GAMMA_B,       /* [D, D], [D] */
    VH_MLN_BETA_W, VH_MLN_BETA_B,         /* [D, D], [D] */
    VH_MLN_N_ROLES
};
enum { /* VH_BLOCK_EMBED_LOOKUP roles */
    VH_EMBED_LOOKUP_TABLE = 0,          /* [V, Dl] */
    VH_EMBED_LOOKUP_N_ROLES
};
enum { /* VH_BLOCK_READOUT roles */
    VH_READOUT_NORM = 0,                /* [Dl] */
    VH_READOUT_VOCAB,                   /* [V, Dl]; optional: without it the read-out gives rows only */
    VH_READOUT_N_ROLES
};

enum { /* VH_BLOCK_VAE_GRU_PLANNER roles (F: feature width, G: GRU hidden, L: latent, M: modes):
        * mu, log_sigma = split(dist(enc3(relu(enc2(relu(enc1(f)))))));  z = mu + exp(log_sigma) * eps
        * y_t = GRU(z, h0 = f split over the layers), t < steps;  g_t = mlp3(relu(mlp2(relu(mlp1(y_t)))))
        * preds[mode][t] = dec3(relu(dec2(relu(dec1([f, g_t])))))[2 mode .. 2 mode + 2) */
    VH_PLAN_ENC1_W = 0, VH_PLAN_ENC1_B,   /* [2F, F], [2F] */
    VH_PLAN_ENC2_W, VH_PLAN_ENC2_B,       /* [2F, 2F] */
    VH_PLAN_ENC3_W, VH_PLAN_ENC3_B,       /* [F/2, 2F] */
    VH_PLAN_DIST_W, VH_PLAN_DIST_B,       /* [2L, F/2]: mu, then log_sigma */
    VH_PLAN_GRU0 = 8,                     /* layer l: W_ih [3G, in], W_hh [3G, G], b_ih [3G], b_hh [3G]
                                             at VH_PLAN_GRU0 + 4 l + 0..3; gates in PyTorch's r, z, n order */
    VH_PLAN_MLP1_W = 24, VH_PLAN_MLP1_B,  /* [2G, G] */
    VH_PLAN_MLP2_W, VH_PLAN_MLP2_B,       /* [4G, 2G] */
    VH_PLAN_MLP3_W, VH_PLAN_MLP3_B,       /* [F, 4G] */
    VH_PLAN_DEC1_W, VH_PLAN_DEC1_B,       /* [2F, 2F] */
    VH_PLAN_DEC2_W, VH_PLAN_DEC2_B,       /* [2F, 2F] */
    VH_PLAN_DEC3_W, VH_PLAN_DEC3_B,       /* [2M, 2F] */
    VH_PLAN_N_TENSORS
};
#define VH_PLAN_MAX_GRU_LAYERS 4

/* The features of a transformer layer. Each enum's 0 is "not given" (a plugin refuses it). */
typedef enum vh_norm_kind {
    VH_NORM_LAYER = 1,         /* LayerNorm: weight and bias, eps */
    VH_NORM_RMS = 2            /* RMSNorm: weight, eps */
} vh_norm_kind;
typedef enum vh_norm_placement {
    VH_NORM_PRE = 1,           /* normalise each sub-layer's input, add its output to the residual */
    VH_NORM_POST = 2           /* add, then normalise the sum */
} vh_norm_placement;
typedef enum vh_attention_kind {
    VH_ATTN_FULL = 1,          /* every token of an image to every token of that image */
    VH_ATTN_CAUSAL_KV = 2,     /* rows to their sequence's KV cache (the block's state), causally */
    VH_ATTN_WINDOWED = 3,      /* full within windows of `window` x `window` tokens of the grid, the
                                  grid zero-padded to whole windows (padded keys take part) */
    VH_ATTN_CROSS = 4          /* queries from the input, keys and values from the second input slot */
} vh_attention_kind;
typedef enum vh_rope_kind {
    VH_ROPE_NONE = 1,
    VH_ROPE_HALF = 2,          /* rotate the two halves of each head by position * theta^(-2i/hd) */
    VH_ROPE_2D_INTERLEAVED = 3 /* per head of hd channels: pair (2j, 2j+1), j < hd/4, rotated by the
                                  token's row position times theta^(-4j/hd), pair hd/2 + (2j, 2j+1)
                                  by its column position likewise (q and k, not v) */
} vh_rope_kind;
typedef enum vh_mlp_kind {
    VH_MLP_GELU = 1,           /* erf GELU between up and down */
    VH_MLP_SILU_GATED = 2,     /* down(silu(gate) * up) */
    VH_MLP_RELU = 3,
    VH_MLP_NONE = 4            /* no MLP sub-layer: the layer is its attention sub-layer only */
} vh_mlp_kind;
/* Feature flags of a transformer layer (vh_transformer_params.flags). */
#define VH_TF_FUSED_QKV   (1u << 0) /* one q|k|v projection (VH_TF_QKV_W, its bias VH_TF_QKV_B) */
#define VH_TF_Q_BIAS      (1u << 1) /* a bias after q (VH_TF_Q_B; within VH_TF_QKV_B when fused) */
#define VH_TF_K_BIAS      (1u << 2) /* a bias after k */
#define VH_TF_V_BIAS      (1u << 3) /* a bias after v */
#define VH_TF_O_BIAS      (1u << 4) /* a bias after o */
#define VH_TF_MLP_BIAS    (1u << 5) /* biases after up (and gate) and down */
#define VH_TF_LAYER_SCALE (1u << 6) /* ls1, ls2 scale the sub-layers' outputs */
#define VH_TF_MLP_SUB_NORM (1u << 7) /* a LayerNorm on the MLP's hidden activations, before down */
#define VH_TF_QK_POS      (1u << 8) /* positional terms added to queries and keys, not values */
#define VH_TF_ATTN_MASK   (1u << 9) /* a structured mask on the attention scores */
#define VH_TF_EXTRA_KEYS  (1u << 10) /* self-attention over the layer's rows and extra key/value rows
                                        from an input slot (a query set: a memory of earlier frames) */
#define VH_TF_N_FLAGS 11
#define VH_TF_QKV_BIAS (VH_TF_Q_BIAS | VH_TF_K_BIAS | VH_TF_V_BIAS)

static inline const char *vh_tf_flag_name(uint32_t bit)
{
    static const char *const names[VH_TF_N_FLAGS] = {"fused q|k|v", "q bias", "k bias", "v bias", "output bias",
                                                     "MLP biases", "layer scale", "MLP sub-norm",
                                                     "positional q/k terms", "attention mask", "extra keys"};
    return bit < VH_TF_N_FLAGS ? names[bit] : "unknown flag";
}

/* The parameters of a block, by kind. Each struct starts with its size; a plugin refuses a struct
 * shorter than the one it knows, and a longer one whose extra bytes are not all zero (a field it
 * does not know is set). */
typedef struct vh_block_params {       /* EMBED_LOOKUP, READOUT: none beyond the size */
    uint32_t struct_size;
} vh_block_params;

#define VH_PATCH_POS_PREFIX (1u << 0)  /* positions cover the prefix tokens (concatenate, then add);
                                          without it they are added to the patches only */
typedef struct vh_patch_embed_params { /* PATCH_EMBED; sizes: its output slot's tower */
    uint32_t struct_size;
    uint32_t flags;                    /* VH_PATCH_* */
} vh_patch_embed_params;

typedef struct vh_transformer_params { /* TRANSFORMER; sizes: its input slot's (a tower's, or the rows') */
    uint32_t struct_size;
    uint32_t layer;                    /* its index in its chain (for messages and profiles) */
    uint32_t norm;                     /* vh_norm_kind */
    float norm_eps;
    uint32_t placement;                /* vh_norm_placement */
    uint32_t attention;                /* vh_attention_kind */
    uint32_t window;                   /* VH_ATTN_WINDOWED: tokens per window side */
    uint32_t rope;                     /* vh_rope_kind */
    float rope_theta;                  /* VH_ROPE_HALF, VH_ROPE_2D_INTERLEAVED */
    uint32_t rope_grid;                /* VH_ROPE_2D_INTERLEAVED: a token at row (column) i of its window,
                                          or of the grid without windows, of side n sits at position
                                          i * rope_grid / n (EVA: the pretraining grid, 16) */
    uint32_t mlp;                      /* vh_mlp_kind */
    uint32_t flags;                    /* VH_TF_* feature flags */
    uint32_t lora_sets;                /* LoRA sets it may hold, 0 .. VH_TF_MAX_LORA_SETS */
    float lora_scale;                  /* alpha / r of its adapters (0 without them) */
    /* ABI 3.1: layers on query sets (VH_SLOT_KIND_QUERIES), whose width is their slot's. Inputs in
     * order: the rows; with VH_TF_QK_POS their positional terms; then, with VH_TF_EXTRA_KEYS or
     * VH_ATTN_CROSS, the key rows (extra keys after the layer's own rows, or the cross-attention's
     * keys) and, with VH_TF_QK_POS, their positional terms. Queries and keys are x + pos, values x. */
    uint32_t n_heads;                  /* attention heads (width / n_heads each) */
    uint32_t mask_prefix;              /* VH_TF_ATTN_MASK: rows at or past mask_prefix do not see the
                                          first mask_prefix keys (the rows before it see every key) */
} vh_transformer_params;

typedef enum vh_chain_activation {
    VH_CHAIN_GELU = 0,                 /* erf GELU (a chain of ABI 3.0) */
    VH_CHAIN_RELU = 1
} vh_chain_activation;

typedef struct vh_chain_params {       /* MLP_CHAIN */
    uint32_t struct_size;
    uint32_t n_layers;                 /* 2 or 3 linear layers (1 .. 3 on query sets) */
    /* ABI 3.1. Layer i: y = W_i x + b_i; then, where bit i of norm_after is set, LayerNorm (eps
     * norm_eps); then, but after the last layer, the activation. */
    uint32_t activation;               /* vh_chain_activation */
    uint32_t norm_after;               /* bit i: a LayerNorm after layer i (roles VH_CHAIN_NORM1_W + 2 i) */
    float norm_eps;
} vh_chain_params;

typedef struct vh_mln_params {         /* MODULATED_NORM */
    uint32_t struct_size;
    float norm_eps;                    /* the LayerNorm's */
} vh_mln_params;

typedef struct vh_planner_params {     /* VAE_GRU_PLANNER */
    uint32_t struct_size;
    uint32_t feature_dim;              /* F: the read-out's row width */
    uint32_t latent_dim;               /* L */
    uint32_t gru_layers;               /* 1 .. VH_PLAN_MAX_GRU_LAYERS */
    uint32_t gru_hidden;               /* G = F / gru_layers: layer l starts from f[l G .. (l + 1) G) */
    uint32_t n_modes;                  /* M */
    uint32_t n_steps;                  /* future steps */
    float min_log_sigma, max_log_sigma;/* log_sigma is clamped to this range */
    uint32_t feature_row;              /* which of each segment's hidden rows is its feature */
    uint32_t noise_offset;             /* its L noise floats within each segment's plan_noise */
    uint32_t out_offset;               /* where it writes within each segment's out_plan: preds
                                          [M][steps][2] (per-step offsets), mu [L], log_sigma [L] */
} vh_planner_params;

/* Slots: the activations blocks pass each other, named by the model. A slot's kind says what it
 * holds and how it is laid out; a plugin runs each kind of block with the slot kinds it lists. */
typedef enum vh_slot_kind {
    VH_SLOT_KIND_PIXELS = 1,   /* each image's planes for a tower (batch pixels) */
    VH_SLOT_KIND_TOKENS = 2,   /* each image's tokens of a tower [T, D] */
    VH_SLOT_KIND_EMBEDS = 3,   /* each image's embeddings in the rows' width (the rows' image rows) */
    VH_SLOT_KIND_ROWS = 4,     /* the hidden rows of the batch [rows, Dl] (what crosses executors) */
    VH_SLOT_KIND_OUTPUTS = 5,  /* the batch's outputs: tokens, logits, chosen rows, plans */
    VH_SLOT_KIND_QUERIES = 6   /* each frame's rows of a query set [rows, width]
                                  (vh_model_desc.query_sets[tower]): a head's queries, their positional
                                  terms, a memory's entries, a frame's image features */
} vh_slot_kind;

static inline const char *vh_slot_kind_name(uint32_t kind)
{
    static const char *const names[] = {"?", "pixels", "tokens", "embeds", "rows", "outputs", "queries"};
    return kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

typedef struct vh_slot_desc {
    const char *name;          /* the model's name for it: "tower0.tokens", "rows" */
    uint32_t kind;             /* vh_slot_kind */
    uint32_t tower;            /* PIXELS, TOKENS: the tower whose sizes apply (vh_model_desc.towers);
                                  QUERIES: its query set (vh_model_desc.query_sets) */
} vh_slot_desc;

/* The sizes of a query set: what a QUERIES slot holds per frame. */
typedef struct vh_query_set_desc {
    uint32_t rows;
    uint32_t width;
} vh_query_set_desc;

/* States: what a stream (a sequence, vh_segment.sequence) keeps between runs, owned by one block.
 * A KV cache's positions are written by the segments that reach them: a segment at position 0
 * starts its sequence over (what it does not write is never read). */
typedef enum vh_state_kind {
    VH_STATE_KV_CACHE = 1      /* keys and values per position of each sequence */
} vh_state_kind;

typedef struct vh_state_desc {
    const char *name;          /* "layer3.kv" */
    uint32_t kind;             /* vh_state_kind */
} vh_state_desc;

#define VH_NO_STATE 0xffffffffu /* a block that keeps nothing between runs */
#define VH_BLOCK_MAX_INPUTS 4

typedef struct vh_block_desc {
    uint32_t struct_size;      /* sizeof(vh_block_desc) of the core */
    uint32_t kind;             /* vh_block_kind */
    const vh_block_params *params; /* the kind's parameter struct (vh_transformer_params, ...); never NULL */
    uint32_t n_tensors;
    const vh_tensor_view *tensors; /* [n_tensors], each role at most once; absent optional ones left out */
    uint32_t n_inputs;         /* 1 .. VH_BLOCK_MAX_INPUTS */
    uint32_t inputs[VH_BLOCK_MAX_INPUTS]; /* the slots it reads (vh_model_desc.slots), in order */
    uint32_t output;           /* the slot it writes */
    uint32_t state;            /* the state it owns (vh_model_desc.states), or VH_NO_STATE */
    uint32_t options;          /* behaviour bits of the kind (none defined yet); a plugin refuses bits
                                  it does not know */
} vh_block_desc;

/* The tensor of `role` in block d, or NULL. */
static inline const vh_tensor_view *vh_block_tensor(const vh_block_desc *d, uint32_t role)
{
    for (uint32_t i = 0; i < d->n_tensors; i++)
        if (d->tensors[i].role == role) return &d->tensors[i];
    return NULL;
}

/* The sizes of a vision tower: what its PIXELS and TOKENS slots hold. */
typedef struct vh_vit_desc {
    uint32_t image_size;       /* S: input is [3, S, S] */
    uint32_t patch_size;       /* P */
    uint32_t grid;             /* S / P */
    uint32_t n_patches;        /* grid * grid */
    uint32_t embed_dim;        /* D */
    uint32_t n_heads;
    uint32_t head_dim;         /* D / n_heads */
    uint32_t mlp_hidden;       /* H */
    uint32_t n_blocks;         /* transformer layers the model runs on it (may be fewer than the
                                  checkpoint has: a model may read an earlier layer's output) */
    uint32_t has_class_token;
    uint32_t n_registers;
    uint32_t n_prefix;         /* class + register tokens; dropped after the last block */
} vh_vit_desc;

/* The sizes of the rows: what the ROWS slot and its transformer layers hold. */
typedef struct vh_llm_desc {
    uint32_t hidden;           /* Dl */
    uint32_t intermediate;     /* F */
    uint32_t n_layers;
    uint32_t n_heads;          /* Hq */
    uint32_t n_kv_heads;       /* Hkv; Hq % Hkv == 0 */
    uint32_t head_dim;         /* hd */
    uint32_t vocab;            /* V: logits per row (the padded vocabulary) */
    float rms_eps;             /* the read-out's RMSNorm */
} vh_llm_desc;

#define VH_MAX_TOWERS 2

typedef struct vh_model_desc {
    uint32_t struct_size;      /* sizeof(vh_model_desc) of the core */
    uint32_t n_towers;
    vh_vit_desc towers[VH_MAX_TOWERS];
    uint32_t vision_dim;       /* Dv: sum of the towers' embed_dim */
    uint32_t projector_hidden; /* H1: the MLP chain's first layer */
    uint32_t n_image_tokens;   /* embeddings per image (every tower has this many patches) */
    vh_llm_desc llm;
    uint32_t n_slots;
    const vh_slot_desc *slots;
    uint32_t n_states;
    const vh_state_desc *states;
    uint32_t n_blocks;
    const vh_block_desc *blocks;
    /* ABI 3.1 */
    uint32_t n_query_sets;
    const vh_query_set_desc *query_sets;
} vh_model_desc;

/* The kind of block d's input i / output slot (0 when the index is out of range). */
static inline uint32_t vh_block_input_kind(const vh_model_desc *m, const vh_block_desc *d, uint32_t i)
{
    return i < d->n_inputs && d->inputs[i] < m->n_slots ? m->slots[d->inputs[i]].kind : 0;
}
static inline uint32_t vh_block_output_kind(const vh_model_desc *m, const vh_block_desc *d)
{
    return d->output < m->n_slots ? m->slots[d->output].kind : 0;
}
/* ------------------------------------------------------------------------------------------------
 * Batches: what one executor_run call computes.
 *
 * The LLM rows of a batch are grouped in segments. Segment s owns rows
 * [row_begin(s), row_begin(s) + n_rows) where row_begin is the sum of earlier segments' n_rows;
 * row i of the segment sits at position `position + i` of its sequence, attends causally to
 * positions [0, position + i] of that sequence's KV cache, and writes its own K/V at
 * `position + i`; its rotary embedding uses position `position + i + rope_delta` (rope_delta
 * is 0 except to reproduce a reference that numbers positions differently from the cache). A prefill is one segment of many rows at position 0; a decode step is a segment
 * of one row; a packed pass mixes both. A row's token is a vocabulary id, or VH_TOKEN_IMAGE: the
 * k-th such row of a segment takes the k-th patch embedding of the segment's image.
 */
#define VH_TOKEN_IMAGE (-1)

/* Batch options: a plugin refuses a batch with an option it does not list (batch_options). */
#define VH_BATCH_HIDDEN_ROWS (1u << 0) /* the head writes the final-normed hidden state of rows
                                          hidden_rows[] into out_hidden */
#define VH_BATCH_SEGMENT_EMBEDS (1u << 1) /* segments may carry their own VH_TOKEN_IMAGE rows
                                          (vh_segment.embeds: precomputed vision tokens) */
#define VH_BATCH_PLAN (1u << 2)   /* planner blocks read plan_noise and write out_plan */
#define VH_BATCH_SEGMENT_ADAPTERS (1u << 3) /* segment_adapters[] picks each segment's LoRA set;
                                          without it every segment uses set 0 */
#define VH_BATCH_SEGMENT_PLANS (1u << 4) /* with VH_BATCH_PLAN, the planners run only on the
                                          segments whose segment_plans[] is nonzero (the others' noise
                                          is not read and their out_plan rows are left as they are) */
#define VH_BATCH_SLOT_INPUTS (1u << 5) /* the core fills the QUERIES slots whose slot_inputs[] is not
                                          NULL before the run's first block */

typedef struct vh_segment {
    uint32_t sequence;         /* KV slot, < max_sequences */
    uint32_t n_rows;
    uint32_t position;         /* KV index of the segment's first row */
    int32_t image;             /* for VH_TOKEN_IMAGE rows: index of an image of the last vision batch
                                  this executor ran (its patch embeddings are kept between runs), or -1 */
    int32_t rope_delta;        /* RoPE position of row i = position + i + rope_delta (usually 0) */
    const float *embeds;       /* VH_BATCH_SEGMENT_EMBEDS: the k-th VH_TOKEN_IMAGE row of the segment
                                  is row k of this [.., hidden] fp32 array (image is then ignored);
                                  NULL: the image's patch embeddings */
} vh_segment;

typedef struct vh_batch {
    uint32_t struct_size;        /* sizeof(vh_batch) of the core */
    uint32_t options;            /* VH_BATCH_* */
    uint32_t n_images;
    const float *const *pixels;  /* [n_images * n_towers] planes [3, S, S], image-major,
                                    already resized and normalised for that tower */
    uint32_t n_segments;
    const vh_segment *segments;
    uint32_t n_rows;             /* sum of the segments' n_rows */
    const int32_t *tokens;       /* [n_rows] */
    int32_t *out_tokens;         /* [n_segments]: argmax over each segment's last row (READOUT), or
                                    NULL when the batch asks for hidden rows only */
    float *out_logits;           /* [n_segments, vocab] fp32, or NULL */
    /* VH_BATCH_HIDDEN_ROWS */
    uint32_t n_hidden_rows;
    const uint32_t *hidden_rows; /* [n_hidden_rows] batch row indices, each < n_rows */
    float *out_hidden;           /* [n_hidden_rows, hidden] fp32: rmsnorm(row) with the head's norm;
                                    with VH_BATCH_PLAN the rows come n_hidden_rows / n_segments per
                                    segment, in segment order */
    /* VH_BATCH_PLAN */
    const float *plan_noise;     /* [n_segments, plan_noise_stride] */
    uint32_t plan_noise_stride;
    float *out_plan;             /* [n_segments, plan_out_stride] */
    uint32_t plan_out_stride;
    /* VH_BATCH_SEGMENT_ADAPTERS */
    const uint8_t *segment_adapters; /* [n_segments]: 0 .. VH_TF_MAX_LORA_SETS - 1; a segment naming a set
                                    an LLM block of the run lacks is refused */
    /* VH_BATCH_SEGMENT_PLANS */
    const uint8_t *segment_plans; /* [n_segments]: nonzero where the planners run */
    /* ABI 3.1: blocks on query sets run once per frame. A block that gathers image tokens into a
     * frame's query set of R rows from a tower of T patches reads images [f R / T, (f + 1) R / T) of
     * the last run that wrote the tower's tokens. */
    uint32_t n_frames;           /* frames of the batch, <= max_frames */
    /* VH_BATCH_SLOT_INPUTS */
    uint32_t n_slot_inputs;      /* <= the model's n_slots */
    const float *const *slot_inputs; /* [n_slot_inputs]: NULL, or the QUERIES slot's [n_frames, rows,
                                    width] fp32 */
} vh_batch;

/* ------------------------------------------------------------------------------------------------
 * Devices and executors.
 */
typedef enum vh_device_kind {
    VH_DEVICE_CPU = 0,
    VH_DEVICE_GPU = 1
} vh_device_kind;

typedef struct vh_device_info {
    uint32_t struct_size;      /* set by the caller: sizeof(vh_device_info) of the core */
    vh_device_kind kind;
    char name[128];
    uint64_t total_memory;     /* bytes; 0 if unknown */
    uint64_t free_memory;      /* bytes; 0 if unknown */
} vh_device_info;

typedef struct vh_executor_params {
    uint32_t struct_size;      /* sizeof(vh_executor_params) of the core */
    const vh_model_desc *model;
    uint32_t device;           /* < device_count() */
    uint32_t first_block;      /* the executor holds blocks [first_block, first_block + n_blocks) */
    uint32_t n_blocks;
    uint32_t max_sequences;    /* KV slots */
    uint32_t max_context;      /* positions per sequence */
    uint32_t max_rows;         /* LLM rows in one batch */
    uint32_t max_images;       /* images in one batch */
    int32_t n_threads;         /* CPU threads; 0: all CPUs the creating thread may use */
    uint64_t memory_budget;    /* bytes the executor may allocate on its device; 0: no limit but the
                                  device's. Exceeding it is VH_ERR_DEVICE_OUT_OF_MEMORY at create. */
    vh_log_fn log_fn;          /* may be NULL */
    void *log_user;
    vh_log_level log_level;
    /* executor_create calls progress_fn (may be NULL) on its own thread as it
     * makes weights resident: `done` of `total` units (bytes of the blocks' tensors), non-decreasing,
     * the last call with done == total. A nonzero return asks it to stop: it frees everything it
     * made and returns VH_ERR_CANCELLED. */
    int (*progress_fn)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
    uint32_t max_frames;       /* ABI 3.1: frames in one batch (query sets); 0: 1 */
} vh_executor_params;

typedef struct vh_memory_report {
    uint32_t struct_size;      /* set by the caller: sizeof(vh_memory_report) of the core */
    uint64_t weight_bytes;     /* resident weights the executor allocated (0 if it reads the map) */
    uint64_t cache_bytes;      /* KV caches */
    uint64_t work_bytes;       /* activations, scratch */
} vh_memory_report;

typedef struct vh_executor vh_executor; /* defined by each plugin */

/* What a transformer layer must be for a plugin to run it: exact norm, placement, attention,
 * positions and MLP; the flags it must have (required) and those it may have (allowed, required
 * included); at most max_lora_sets LoRA sets. */
typedef struct vh_transformer_support {
    uint32_t norm, placement, attention, rope, mlp;
    uint32_t required, allowed;        /* VH_TF_* flags */
    uint32_t max_lora_sets;
} vh_transformer_support;

/* What a plugin can run of one block kind. A plugin may list a kind more than once, once per
 * feature set (a TRANSFORMER on a tower's tokens and one on the rows); the core and the plugin
 * take the first entry that matches the block. */
typedef struct vh_kind_support {
    uint32_t kind;             /* vh_block_kind */
    uint32_t n_roles;          /* tensor roles 0 .. n_roles - 1 it reads; any other role is refused */
    uint32_t params_size;      /* the size of the kind's parameter struct it was built with */
    uint32_t options;          /* the option bits it honours */
    uint32_t input_kind;       /* vh_slot_kind of each of its inputs */
    uint32_t output_kind;      /* vh_slot_kind of its output */
    const vh_transformer_support *transformer; /* TRANSFORMER: the features it runs; NULL otherwise */
} vh_kind_support;

typedef struct vh_backend_iface {
    uint32_t abi_major;        /* VH_BACKEND_ABI_MAJOR the plugin was built with */
    uint32_t abi_minor;        /* VH_BACKEND_ABI_MINOR the plugin was built with */
    uint32_t struct_size;      /* sizeof(vh_backend_iface) the plugin was built with */
    const char *name;          /* "cpu_generic": what users pass as the backend name */
    const char *description;   /* one line for logs */
    uint32_t n_kinds;          /* the block kinds it runs */
    const vh_kind_support *kinds;
    uint32_t batch_options;    /* the VH_BATCH_* options it honours */

    /* How well this backend suits this machine: <= 0 cannot run here (no GPU, missing CPU
     * features); otherwise higher wins when the user names no backend. */
    int32_t (*score)(void);
    uint32_t (*device_count)(void);
    vh_status (*device_info)(uint32_t device, vh_device_info *info);

    /* Create an executor for params->n_blocks blocks and make their weights resident. */
    vh_status (*executor_create)(const vh_executor_params *params, vh_executor **executor,
                                 char *err, size_t err_size);
    void (*executor_destroy)(vh_executor *executor);

    /* Run blocks [first_block, first_block + n_blocks) (absolute indices, inside the executor's
     * range) on the batch. Vision blocks and the projector work on the batch's images; LLM blocks
     * on its rows; the head writes out_tokens (and out_logits). Returns when outputs are ready. */
    vh_status (*executor_run)(vh_executor *executor, const vh_batch *batch, uint32_t first_block,
                              uint32_t n_blocks, char *err, size_t err_size);

    /* The LLM hidden state crossing to or from another executor: n_rows x hidden fp32, the rows of
     * the last batch (read) or of the next batch, whose run starts at an LLM block (write). */
    vh_status (*read_hidden)(vh_executor *executor, float *dst, uint32_t n_rows, char *err,
                             size_t err_size);
    vh_status (*write_hidden)(vh_executor *executor, const float *src, uint32_t n_rows, char *err,
                              size_t err_size);

    /* What the executor holds (fixed at create; may be called during a run, see Threading). */
    vh_status (*memory)(vh_executor *executor, vh_memory_report *report);

    /* Optional slots (NULL: the core falls back as noted). */

    /* What executor_create would allocate on the device for these params (weights, KV cache,
     * work space: what it checks against memory_budget), computed without creating anything; the
     * core uses it to choose how many blocks fit a budget. NULL: unknown (the core then takes the
     * blocks on trust and executor_create decides). */
    vh_status (*executor_plan_memory)(const vh_executor_params *params, vh_memory_report *need,
                                      char *err, size_t err_size);
    /* Host memory for the hidden states the core hands between executors: page-locked for a GPU
     * backend, so read_hidden / write_hidden copy by DMA. NULL: the core uses malloc / free. */
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *ptr);
    /* Instead of write_hidden before the next run and read_hidden after it: the next executor_run
     * works on its n_rows hidden rows in place in `rows` (host memory of at least n_rows x hidden
     * fp32, the core's), reading its input rows there when it starts at an LLM block and leaving its
     * output rows there. The core keeps `rows` valid and untouched until that run returns. For a
     * CPU backend this hands a prefill's megabytes over without a copy. NULL: the core copies. */
    vh_status (*bind_hidden)(vh_executor *executor, float *rows, uint32_t n_rows, char *err,
                             size_t err_size);
    /* Why score() is <= 0 on this machine, as one line written into why
     * (NUL-terminated): "no CUDA device (cudaGetDeviceCount: no CUDA-capable device is detected)",
     * "this CPU has neither AMX-BF16 nor AVX-512 BF16". The core puts it in the
     * refusal's message. NULL: the core says only that the backend cannot run here. */
    void (*unavailable_reason)(char *why, size_t why_size);
    /* What slot `slot` (vh_model_desc.slots) holds for image `image` after the last run that wrote
     * it: a tower's tokens [prefix + patches, D] fp32 (VH_SLOT_KIND_TOKENS, a tower of blocks this
     * executor holds), or frame `image`'s rows [rows, width] of a query set (VH_SLOT_KIND_QUERIES),
     * n_floats of them into dst. For tools and tests that compare a front end's intermediate outputs
     * with a reference, and for a family that reads a head's outputs. NULL: the backend offers none. */
    vh_status (*read_slot)(vh_executor *executor, uint32_t slot, uint32_t image, float *dst, size_t n_floats,
                           char *err, size_t err_size);
} vh_backend_iface;

/* ------------------------------------------------------------------------------------------------
 * Checks both sides make: the core before it asks a plugin for an executor (for a clear message),
 * and the plugin in executor_create (so a plugin never runs what it does not know). Each writes
 * why into `why` and returns 0 when the plugin (`backend`, its `kinds`) cannot run the thing.
 */

/* Bytes [known, size) of a struct are all zero: a newer caller's fields left unset. */
static inline int vh_struct_tail_zero(const void *s, uint32_t size, uint32_t known)
{
    const unsigned char *b = (const unsigned char *)s;
    for (uint32_t i = known; i < size; i++)
        if (b[i]) return 0;
    return 1;
}

/* A plugin's own copy of the core's executor parameters: the fields both know, the rest zero.
 * 0 when the size is one no version had, or a field this plugin does not know is set. */
static inline int vh_executor_params_read(const vh_executor_params *in, vh_executor_params *out)
{
    if (!in || in->struct_size < sizeof *in || in->struct_size > 65536 ||
        !vh_struct_tail_zero(in, in->struct_size, sizeof *in))
        return 0;
    memset(out, 0, sizeof *out);
    memcpy(out, in, in->struct_size < sizeof *out ? in->struct_size : sizeof *out);
    out->struct_size = sizeof *out;
    return 1;
}

/* report `done` of `total` to the core; nonzero when it asks the create to stop. */
static inline int vh_executor_progress(const vh_executor_params *p, uint64_t done, uint64_t total)
{
    return p->progress_fn ? p->progress_fn(p->progress_user, done, total) : 0;
}

/* the bytes of a block's tensors (the unit of executor_create's progress). */
static inline uint64_t vh_block_tensor_bytes(const vh_block_desc *d)
{
    uint64_t bytes = 0;
    for (uint32_t t = 0; t < d->n_tensors; t++) {
        const vh_tensor_view *v = &d->tensors[t];
        uint64_t n = v->dtype == VH_DTYPE_F32 ? 4 : 2;
        for (uint32_t k = 0; k < v->ndim && k < 4; k++) n *= v->shape[k] > 0 ? (uint64_t)v->shape[k] : 0;
        bytes += n;
    }
    return bytes;
}

static inline const char *vh_feature_value_name(const char *feature, uint32_t v)
{
    static const char *const norm[] = {"unset", "LayerNorm", "RMSNorm"};
    static const char *const place[] = {"unset", "pre-norm", "post-norm"};
    static const char *const attn[] = {"unset", "full", "causal over a KV cache", "windowed", "cross"};
    static const char *const rope[] = {"unset", "none", "half-rotation", "2-D interleaved"};
    static const char *const mlp[] = {"unset", "GELU", "SiLU-gated", "ReLU", "none"};
    const char *const *names = feature[0] == 'n' ? norm : feature[0] == 'p' ? place : feature[0] == 'a' ? attn
                               : feature[0] == 'r' ? rope : mlp;
    const uint32_t n = feature[0] == 'n' || feature[0] == 'p' ? 3 : feature[0] == 'a' || feature[0] == 'm' ? 5 : 4;
    return v < n ? names[v] : "unknown";
}

/* The first feature of transformer layer p that entry s does not run, described into why (after
 * `prefix`); 0 when s runs p. */
static inline int vh_transformer_mismatch(const vh_transformer_support *s, const vh_transformer_params *p,
                                          const char *prefix, char *why, size_t why_size)
{
    static const char *const feature[5] = {"norm", "placement", "attention", "rope", "mlp"};
    const uint32_t want[5] = {s->norm, s->placement, s->attention, s->rope, s->mlp};
    const uint32_t has[5] = {p->norm, p->placement, p->attention, p->rope, p->mlp};
    for (int f = 0; f < 5; f++)
        if (has[f] != want[f]) {
            if (why) snprintf(why, why_size, "%s%s '%s' (it runs %s)", prefix, feature[f],
                              vh_feature_value_name(feature[f], has[f]), vh_feature_value_name(feature[f], want[f]));
            return 1;
        }
    const uint32_t missing = s->required & ~p->flags, extra = p->flags & ~s->allowed;
    for (uint32_t bit = 0; bit < 32 && (missing | extra) >> bit; bit++)
        if ((missing | extra) >> bit & 1u) {
            if (why) snprintf(why, why_size, "%s%s %s (it runs it %s)", prefix, vh_tf_flag_name(bit),
                              extra >> bit & 1u ? "set" : "not set", extra >> bit & 1u ? "without" : "only with");
            return 1;
        }
    if (p->lora_sets > s->max_lora_sets) {
        if (why) snprintf(why, why_size, "%s%u LoRA sets (it runs at most %u)", prefix, p->lora_sets,
                          s->max_lora_sets);
        return 1;
    }
    return 0;
}

/* How many features of layer p entry s does not run (0: it runs p): the refusal names the first
 * of the entry that differs least. */
static inline uint32_t vh_transformer_mismatches(const vh_transformer_support *s, const vh_transformer_params *p)
{
    uint32_t n = (p->norm != s->norm) + (p->placement != s->placement) + (p->attention != s->attention) +
                 (p->rope != s->rope) + (p->mlp != s->mlp) + (p->lora_sets > s->max_lora_sets);
    for (uint32_t bits = (s->required & ~p->flags) | (p->flags & ~s->allowed); bits; bits &= bits - 1) n++;
    return n;
}

/* Whether plugin `backend` (its `kinds`) runs block `index` of model m; writes why into `why` and
 * returns 0 when it does not, naming the block, its kind and the feature, slot or role. */
static inline int vh_block_check(const char *backend, const vh_kind_support *kinds, uint32_t n_kinds,
                                 const vh_model_desc *m, uint32_t index, char *why, size_t why_size)
{
    const vh_block_desc *d = index < m->n_blocks ? &m->blocks[index] : NULL;
    if (!d || d->struct_size < sizeof(vh_block_desc) || d->struct_size > 4096 ||
        !vh_struct_tail_zero(d, d->struct_size, sizeof(vh_block_desc))) {
        snprintf(why, why_size, "%s: block %u: descriptor struct_size %u, this plugin knows %zu", backend, index,
                 d ? d->struct_size : 0, sizeof(vh_block_desc));
        return 0;
    }
    const vh_kind_support *k = NULL;
    for (uint32_t i = 0; i < n_kinds && !k; i++)
        if (kinds[i].kind == d->kind) k = &kinds[i];
    if (!k) {
        snprintf(why, why_size, "%s: block %u is of kind %u (%s), which this plugin does not run", backend, index,
                 d->kind, vh_block_kind_name(d->kind));
        return 0;
    }
    const char *kind = vh_block_kind_name(d->kind);
    if (!d->params || d->params->struct_size < k->params_size || d->params->struct_size > 4096 ||
        !vh_struct_tail_zero(d->params, d->params->struct_size, k->params_size)) {
        snprintf(why, why_size, "%s: block %u (%s): parameters of %u bytes, this plugin knows %u (a field it does "
                 "not know is set, or the struct is short)", backend, index, kind,
                 d->params ? d->params->struct_size : 0, k->params_size);
        return 0;
    }
    if (d->options & ~k->options) {
        snprintf(why, why_size, "%s: block %u (%s): option bits 0x%x unknown to this plugin", backend, index, kind,
                 d->options & ~k->options);
        return 0;
    }
    if (d->n_inputs < 1 || d->n_inputs > VH_BLOCK_MAX_INPUTS || vh_block_output_kind(m, d) == 0) {
        snprintf(why, why_size, "%s: block %u (%s): %u inputs, output slot %u of %u slots", backend, index, kind,
                 d->n_inputs, d->output, m->n_slots);
        return 0;
    }
    for (uint32_t i = 0; i < d->n_inputs; i++)
        if (vh_block_input_kind(m, d, i) == 0) {
            snprintf(why, why_size, "%s: block %u (%s): input %u is slot %u of %u", backend, index, kind, i,
                     d->inputs[i], m->n_slots);
            return 0;
        }
    /* the first entry of the kind whose slot kinds and features match; else the wired one closest */
    const vh_kind_support *wired = NULL, *match = NULL;
    uint32_t closest = UINT32_MAX;
    for (uint32_t i = 0; i < n_kinds && !match; i++) {
        const vh_kind_support *e = &kinds[i];
        int ok = e->kind == d->kind && vh_block_output_kind(m, d) == e->output_kind;
        for (uint32_t j = 0; ok && j < d->n_inputs; j++) ok = vh_block_input_kind(m, d, j) == e->input_kind;
        if (!ok) continue;
        const uint32_t off = e->transformer && d->params->struct_size >= sizeof(vh_transformer_params)
                                 ? vh_transformer_mismatches(e->transformer, (const vh_transformer_params *)d->params)
                                 : 0;
        if (off < closest) wired = e, closest = off;
        if (off == 0) match = e;
    }
    if (!wired) {
        snprintf(why, why_size, "%s: block %u (%s) reads %s slot '%s' and writes %s slot '%s'; this plugin runs it "
                 "from %s to %s", backend, index, kind, vh_slot_kind_name(vh_block_input_kind(m, d, 0)),
                 m->slots[d->inputs[0]].name ? m->slots[d->inputs[0]].name : "?",
                 vh_slot_kind_name(vh_block_output_kind(m, d)), m->slots[d->output].name ? m->slots[d->output].name : "?",
                 vh_slot_kind_name(k->input_kind), vh_slot_kind_name(k->output_kind));
        return 0;
    }
    if (!match) {
        char prefix[192];
        snprintf(prefix, sizeof prefix, "%s: block %u (%s, layer %u): ", backend, index, kind,
                 ((const vh_transformer_params *)d->params)->layer);
        vh_transformer_mismatch(wired->transformer, (const vh_transformer_params *)d->params, prefix, why, why_size);
        return 0;
    }
    k = match;
    uint64_t seen = 0;
    for (uint32_t t = 0; t < d->n_tensors; t++) {
        const uint32_t role = d->tensors[t].role;
        if (role >= k->n_roles || role >= VH_MAX_ROLES || (seen >> role & 1u) || !d->tensors[t].data) {
            snprintf(why, why_size, "%s: block %u (%s): tensor '%s' has role %u, %s", backend, index, kind,
                     d->tensors[t].name ? d->tensors[t].name : "?", role,
                     role >= k->n_roles || role >= VH_MAX_ROLES ? "which this plugin does not know"
                     : !d->tensors[t].data ? "without data" : "given twice");
            return 0;
        }
        seen |= 1ull << role;
    }
    return 1;
}

static inline int vh_batch_options_check(const char *backend, uint32_t supported, const vh_batch *b, char *why,
                                         size_t why_size)
{
    if (b->struct_size < sizeof(vh_batch) || b->struct_size > 4096 ||
        !vh_struct_tail_zero(b, b->struct_size, sizeof(vh_batch))) {
        snprintf(why, why_size, "%s: batch struct_size %u, this plugin knows %zu", backend, b->struct_size,
                 sizeof(vh_batch));
        return 0;
    }
    if (b->options & ~supported) {
        snprintf(why, why_size, "%s: batch option bits 0x%x unknown to this plugin", backend, b->options & ~supported);
        return 0;
    }
    return 1;
}

/* The checks of what a block's parameters and a batch's outputs must be, which every plugin
 * running these kinds makes the same way (each adds its own limits and message). */

/* A planner's parameters fit an LLM of width `hidden`: its feature is a hidden row, split over
 * 1 .. VH_PLAN_MAX_GRU_LAYERS layers' initial states; latent, modes and steps not empty. */
static inline int vh_planner_params_valid(const vh_planner_params *p, uint32_t hidden)
{
    return p->feature_dim == hidden && p->gru_layers >= 1 && p->gru_layers <= VH_PLAN_MAX_GRU_LAYERS &&
           p->gru_layers * p->gru_hidden == p->feature_dim && p->latent_dim && p->n_modes && p->n_steps;
}

/* A batch gives a planner its features (the same count of hidden rows per segment, feature_row
 * among them), its noise and room for its outputs at its offsets (VH_BATCH_PLAN). */
static inline int vh_planner_batch_valid(const vh_planner_params *p, const vh_batch *b)
{
    const uint32_t per_segment = b->n_segments ? b->n_hidden_rows / b->n_segments : 0;
    return (b->options & VH_BATCH_PLAN) && (b->options & VH_BATCH_HIDDEN_ROWS) && b->plan_noise && b->out_plan &&
           b->out_hidden && per_segment * b->n_segments == b->n_hidden_rows && p->feature_row < per_segment &&
           (uint64_t)p->noise_offset + p->latent_dim <= b->plan_noise_stride &&
           (uint64_t)p->out_offset + 2ull * p->n_modes * p->n_steps + 2ull * p->latent_dim <= b->plan_out_stride;
}

/* The hidden rows a batch asks for (VH_BATCH_HIDDEN_ROWS): some, each a row of the batch. */
static inline int vh_batch_hidden_rows_valid(const vh_batch *b)
{
    if (!b->hidden_rows || !b->out_hidden || b->n_hidden_rows == 0) return 0;
    for (uint32_t i = 0; i < b->n_hidden_rows; i++)
        if (b->hidden_rows[i] >= b->n_rows) return 0;
    return 1;
}

/* the LoRA set segment s runs with (0 without VH_BATCH_SEGMENT_ADAPTERS). */
static inline uint32_t vh_batch_segment_adapter(const vh_batch *b, uint32_t s)
{
    return (b->options & VH_BATCH_SEGMENT_ADAPTERS) ? b->segment_adapters[s] : 0;
}

/* the next run of consecutive segments with one LoRA set, from segment *segment on: its set
 * and rows (*n_rows), *segment moved past it; 0 when no segment is left. A block applies each set's
 * deltas to a run's rows at once:
 *     for (uint32_t g = 0, row = 0, set, n; vh_batch_adapter_run(b, &g, &set, &n); row += n) ... */
static inline int vh_batch_adapter_run(const vh_batch *b, uint32_t *segment, uint32_t *set, uint32_t *n_rows)
{
    if (*segment >= b->n_segments) return 0;
    *set = vh_batch_segment_adapter(b, *segment);
    *n_rows = 0;
    while (*segment < b->n_segments && vh_batch_segment_adapter(b, *segment) == *set)
        *n_rows += b->segments[(*segment)++].n_rows;
    return 1;
}

/* whether the planners run on segment s (all of them without VH_BATCH_SEGMENT_PLANS). */
static inline int vh_batch_plans_segment(const vh_batch *b, uint32_t s)
{
    return !(b->options & VH_BATCH_SEGMENT_PLANS) || b->segment_plans[s];
}

/* the per-segment arrays a batch's options promise are there (segment_adapters with
 * VH_BATCH_SEGMENT_ADAPTERS, segment_plans with VH_BATCH_SEGMENT_PLANS, which also needs
 * VH_BATCH_PLAN) and each adapter set is below VH_TF_MAX_LORA_SETS. Whether the blocks hold the sets
 * named is the plugin's check. */
static inline int vh_batch_segment_arrays_valid(const vh_batch *b, char *why, size_t why_size)
{
    if ((b->options & VH_BATCH_SEGMENT_ADAPTERS) && !b->segment_adapters) {
        snprintf(why, why_size, "VH_BATCH_SEGMENT_ADAPTERS without segment_adapters");
        return 0;
    }
    for (uint32_t s = 0; (b->options & VH_BATCH_SEGMENT_ADAPTERS) && s < b->n_segments; s++)
        if (b->segment_adapters[s] >= VH_TF_MAX_LORA_SETS) {
            snprintf(why, why_size, "segment %u names LoRA set %u (sets are 0 .. %d)", s, b->segment_adapters[s],
                     VH_TF_MAX_LORA_SETS - 1);
            return 0;
        }
    if ((b->options & VH_BATCH_SEGMENT_PLANS) && (!b->segment_plans || !(b->options & VH_BATCH_PLAN))) {
        snprintf(why, why_size, "VH_BATCH_SEGMENT_PLANS without segment_plans or without VH_BATCH_PLAN");
        return 0;
    }
    return 1;
}

/* The one symbol a plugin exports. The core passes its own ABI version; a plugin may return NULL
 * when it cannot serve that version. */
typedef const vh_backend_iface *(*vh_backend_entry_fn)(uint32_t core_abi_major,
                                                       uint32_t core_abi_minor);

#ifdef __cplusplus
}
#endif
#endif /* VLAHYBRID_BACKEND_H */
