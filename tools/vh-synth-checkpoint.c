/*
 * vh-synth-checkpoint: write an OpenVLA checkpoint folder with OpenVLA-7B's tensor names and shapes
 * (or reduced ones) and random, seeded weights, for speed and memory benchmarks; with --family orion
 * an Orion folder as tools/orion/convert_orion.py writes it, with --family minddrive a MindDrive
 * folder as tools/minddrive/convert_minddrive.py writes it (below).
 *
 *   vh-synth-checkpoint --out DIR --tokenizer PATH/tokenizer.model [--family openvla|orion (openvla)]
 *       [--llm-layers N (32)] [--llm-hidden H (4096)] [--vision full|tiny (full)]
 *   vh-synth-checkpoint --family minddrive --out DIR --tokenizer PATH/tokenizer.json [--size 0.5b|3b (0.5b)]
 *       [--llm-layers N] [--llm-hidden H] ...
 *       [--dtype bf16|f16|f32 (bf16)] [--seed S (0)]
 *       [--shard-bytes B (4 GiB, Orion 5e9; suffixes k, M, G = KiB, MiB, GiB)] [--threads N (online cores)]
 *       [--no-sync] [--dry-run] [--list] [--front-end [--vit-layers N (24)]] (Orion, MindDrive)
 *
 * The folder has openvla/openvla-7b's layout: config.json (with norm_stats for one dataset,
 * "bridge_orig"), preprocessor_config.json, the tokenizer side files, a copy of tokenizer.model, and
 * the weights as model.safetensors or, above --shard-bytes, as model-0000k-of-0000n.safetensors plus
 * model.safetensors.index.json. The tensors are every one the real checkpoint has, under the same
 * names, including those inference does not use (the last block and final norm of each tower,
 * SigLIP's attention-pool head): 7,541,237,184 parameters at full size.
 *
 * Reduced shapes: --llm-layers N keeps N decoder layers; --llm-hidden H (meant for tests) makes the
 * LLM H wide, with intermediate size 2.6875 H rounded to a multiple of 64 and max(1, H/128) heads;
 * --vision tiny adds "vision_backbone_overrides" for two small towers (embed 64, depth 3, 4 heads,
 * MLP 256, patch 14, image 224) so LLM-only benchmarks do not pay for the 0.7 B vision parameters.
 *
 * Weights: element i of tensor T is a pure function of (seed, name of T, i) -- a splitmix64 hash of a
 * counter -- so files are byte-identical for a seed whatever the thread count. Distributions, close
 * to the project's test fixtures: matrices N(0, 1/fan_in); biases N(0, 0.02^2); LayerNorm/RMSNorm
 * weights 1 + N(0, 0.1^2); LayerScale factors U(0.3, 1.0); position/class/register/latent embeddings
 * N(0, 0.5^2); token embeddings N(0, 1); the LM-head rows of the 256 action tokens are scaled by 3 so
 * greedy decoding produces action tokens, as with a trained model. "N" is an Irwin-Hall(4)
 * approximation (sum of four 16-bit uniforms: unit variance, bounded at 3.46 sigma), chosen for
 * speed. Values are rounded to the dtype to nearest even.
 *
 * --family orion: Orion's decision half as doc/orion-converter.md describes the converter's output:
 * the LLM (Vicuna-7B: hidden 4096, 32 layers, 32 heads, intermediate 11008, 32001 embedding rows =
 * 32000 pieces + <waypoint_ego>, max_position_embeddings 4096, rms_norm_eps 1e-5 as Vicuna's and
 * LLaVA-1.5's config files say; LoRA merged, no prefix, no lm_head) and the VAE + GRU planner
 * (planner.*: encoder H -> 2H -> 2H -> H/2, distribution H/2 -> 64, GRU 4 layers of H/4 with input
 * 32, MLP H/4 -> H/2 -> H -> H, decoder 2H -> 2H -> 2H -> 12), 6.91 B parameters at full size; the
 * tensors in name order, shards of at most 5e9 bytes (the converter's default); config.json with the
 * converter's fields in its order (model_type "orion", text_config, lora {merged: true}, planner,
 * vision_tokens 529, vision_token_groups, prompt with the exact prompt text, special_tokens, lm_head,
 * source), added_tokens.json {"<waypoint_ego>": 32000}, Vicuna's tokenizer_config.json and
 * special_tokens_map.json, and a copy of --tokenizer (the Llama-2 sentencepiece model, 32000 pieces).
 * --llm-layers and --llm-hidden (a multiple of 8) reduce it as for OpenVLA; dtypes bf16 and f32 only;
 * --vision does not apply. Planner weights: nn.Linear's N(0, 1/in) and biases N(0, 0.02^2) as above,
 * the GRU's U(-1/sqrt(H/4), 1/sqrt(H/4)) as nn.GRU initialises it. --front-end adds the camera
 * front end as the converter writes it from Orion.pth (tools/orion/front_end.py): EVA-02-L
 * (img_backbone.*: 24 blocks of 1024, 16 heads, SwiGLU 2730 with its sub-LayerNorm, q/v biases,
 * the 14 x 14 + 1 position table; in --dtype), and in F32 the position encoder (192 -> 1024 -> 256),
 * the modules both heads share (query_pos, time_embedding, ego_pose_pe), the det head (6 PETR
 * layers of 256 with FFN 2048, 600 queries, 256 extra, the memory decoders, the can-bus MLP,
 * branch 0 of its classes and boxes) and the map head (300 + 1500 lanes); config.json gets the
 * agent's front_end (640 x 640 images, windows of 16 in every block but 2, 5, ..., 23, the heads'
 * memory of 600 with top-300). --vit-layers N keeps the first N ViT blocks (for tests). Linear and
 * norm weights as above; reference points U(0, 1); query and lane embeddings N(0, 1).
 *
 * --family minddrive: MindDrive's decision half as doc/minddrive-converter.md describes the
 * converter's output (--lora keep, the default): the Qwen2 LLM of --size 0.5b (Qwen2-0.5B: hidden
 * 896, 24 layers, 14 heads / 2 KV heads of 64, intermediate 4864) or 3b (Qwen2.5-3B: 2048, 36
 * layers, 16 / 2 heads of 128, 11008), rope_theta 1e6, rms_norm_eps 1e-6, tied embeddings, q/k/v
 * biases, and both LoRA experts kept apart (r 16, alpha 16 on q/k/v/o: lora_A/lora_B.{decision_expert,
 * action_expert}); the speed planner (7 modes x 6 steps) and the path planner (6 x 20) at H, as
 * Orion's; config.json with the converter's fields in its order and its prompt texts; the
 * tokenizer.json given (it must be one) with MindDrive's 15 tokens added as the converter adds them,
 * tokenizer_config.json and added_tokens.json. Embedding rows: the real model's, 151661 (0.5b:
 * Qwen2's 151646-entry tokenizer + 15) or 151680 (3b: Qwen2.5's 151665 + 15), as the converter docs
 * derive them, or len(tokenizer) + 15 when the tokenizer given is larger; the 15 tokens' ids are the
 * given tokenizer's (with the real Qwen2 tokenizer.json the folder is exactly what the converter
 * writes). --llm-layers and --llm-hidden (a multiple of 8: heads of min(head_dim, H/4), 2 KV heads
 * when the heads are even) reduce it; dtypes bf16, f16, f32. LoRA factors: A as nn.Linear N(0, 1/in),
 * B N(0, (0.1/sqrt(r))^2), so each expert moves a projection by ~10% (peft's B = 0 would make the
 * experts equal). --front-end [--vit-layers N] adds the camera front end as for Orion (the same
 * tensors, values and config.json front_end object, the converter writing MindDrive's as Orion's:
 * tools/orion/front_end.py; doc/minddrive-converter.md), the heads' output_projection and
 * can_bus_embed.2 as wide as the LLM (896 at 0.5b, 2048 at 3b, or --llm-hidden), the ViT in --dtype
 * (f16 included), the rest F32; config.json's front_end comes last, after source, where
 * convert_minddrive.py puts it.
 *
 * Writing: everything goes to DIR.partial, which is renamed to DIR at the end; on any failure
 * (disk full, interrupt) the files written are removed and the exit status is non-zero. DIR must
 * not exist. Tensor data is generated in 256 Ki-element chunks by worker threads into a small ring
 * of buffers and written in order by the main thread, so memory stays bounded (~ threads x 4 MB).
 * Files are fsync'ed before the rename unless --no-sync.
 *
 * Exit status: 0 written, 1 failed (nothing left behind), 2 bad usage, 130 interrupted.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "minddrive_tokens.h"
#include "tool_cli.h"
#include "vlahybrid/backend.h" /* vh_f32_to_bf16 */

#define PROG "vh-synth-checkpoint"

/* OpenVLA-7B's constants (config.json of openvla/openvla-7b and Llama-2-7B). */
enum {
    VOCAB_PADDED = 32064,
    PAD_TO_MULTIPLE = 64,
    N_ACTION_BINS = 256,
    PAD_ID = 32000,
    LLAMA_HIDDEN = 4096,
    LLAMA_INTERMEDIATE = 11008,
    LLAMA_LAYERS = 32,
    ACTION_DIM = 7,
};
/* Orion's constants (doc/orion-converter.md; Vicuna-7B's LLM, the released agent's VAE + GRU planner). */
enum {
    ORION_VOCAB = 32001,        /* 32000 sentencepiece pieces + <waypoint_ego> */
    ORION_BASE_VOCAB = 32000,
    ORION_WAYPOINT_ID = 32000,
    ORION_MAX_POSITIONS = 4096,
    ORION_LATENT = 32,
    ORION_MODES = 6,
    ORION_STEPS = 6,
    ORION_GRU_LAYERS = 4,
    ORION_LORA_R = 16,
    ORION_LORA_ALPHA = 16,
};
/* Vicuna-7B v1.5 / LLaVA-1.5 config files say 1e-5 (the library's default when absent is 1e-6). */
#define ORION_RMS_EPS 1e-5
static const int orion_token_groups[4] = {256, 16, 1, 256}; /* det scene, history, can-bus, map scene: 529 */
/* tools/orion/convert_orion.py's PROMPT_TEXT (spec section 4.1; no space in "car.Please"). */
static const char orion_prompt[] =
    "A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user's questions. "
    "USER: <image>\nYou are driving a car.Please provide the planning trajectory for "
    "the ego car without reasons. ASSISTANT: Here is the planning trajectory "
    "<waypoint_ego></s>";
#define ORION_DEFAULT_SHARD_BYTES 5000000000ull /* the converter's --max-shard-size */

/* MindDrive's two LLM sizes: Qwen2-0.5B's and Qwen2.5-3B's config.json; the embedding rows after the
 * released code's resize (doc/minddrive-converter.md, "The 15 added tokens"); the llava-qwen2 folder
 * and infer config names the converter records under "source". */
typedef struct minddrive_size {
    const char *name, *llm_dir, *infer_config, *lm_model_type;
    uint32_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab_rows;
} minddrive_size;
static const minddrive_size minddrive_sizes[2] = {
    {"0.5b", "llava-qwen2-0.5b", "minddrive_qwen2_05B_infer.py", "qwen2", 896, 4864, 24, 14, 2, 64, 151661},
    {"3b", "llava-qwen2.5-3b", "minddrive_qwen25_3B_infer.py", "qwen25_3B", 2048, 11008, 36, 16, 2, 128, 151680},
};
enum {
    MINDDRIVE_LORA_R = 16, /* misc.py::load_model's LoraConfig(r=16, lora_alpha=16) */
    MINDDRIVE_LORA_ALPHA = 16,
    MINDDRIVE_SPEED_STEPS = 6, /* simple_test_pts forces fut_ts = 6 */
    MINDDRIVE_PATH_STEPS = 20, /* fut_ps */
    MINDDRIVE_MAX_POSITIONS = 32768,
    QWEN_EOS = 151643, /* <|endoftext|> of Qwen2's tokenizer, when the one given has none */
};
#define MINDDRIVE_LORA_B_STD 0.1 /* times 1/sqrt(r) */

#define ACTION_HEAD_SCALE 3.0f
#define CHUNK_ELEMENTS ((uint64_t)1 << 18) /* values a worker generates at a time */
#define GiB ((uint64_t)1 << 30)

/* ------------------------------------------------------------------------------------------------
 * Options
 */
typedef enum out_dtype { DT_BF16, DT_F16, DT_F32 } out_dtype;

static const struct {
    const char *option, *safetensors, *torch;
    uint32_t size;
} dtype_names[] = {
    [DT_BF16] = {"bf16", "BF16", "bfloat16", 2},
    [DT_F16] = {"f16", "F16", "float16", 2},
    [DT_F32] = {"f32", "F32", "float32", 4},
};

typedef struct options {
    const char *out, *tokenizer;
    uint32_t llm_layers, llm_hidden;
    int orion;        /* --family orion */
    int minddrive;    /* --family minddrive */
    int md_size;      /* --size: index into minddrive_sizes */
    int layers_given, hidden_given, size_given;
    int vision_tiny, vision_given, shard_given;
    int front_end;    /* --front-end: the camera front end (Orion, MindDrive) */
    int vit_given;
    uint32_t vit_layers; /* --vit-layers (24) */
    out_dtype dtype;
    uint64_t seed, shard_bytes;
    int threads, no_sync, dry_run, list;
} options;

/* ------------------------------------------------------------------------------------------------
 * The tensors
 */
typedef enum init_kind {
    INIT_NORMAL,  /* mean + std * z */
    INIT_UNIFORM, /* U(lo, hi) */
} init_kind;

typedef enum tensor_part { PART_VISION, PART_PROJECTOR, PART_LLM, PART_PLANNER, PART_FRONT_END, PART_COUNT } tensor_part;

typedef struct tensor_spec {
    char name[112];
    uint32_t ndim;
    uint64_t shape[4];
    uint64_t numel;
    init_kind kind;
    float a, b;                      /* NORMAL: mean, std; UNIFORM: lo, hi */
    uint64_t scaled_first, scaled_end; /* elements multiplied by ACTION_HEAD_SCALE (LM-head rows) */
    tensor_part part;
    int f32;                         /* written as F32 whatever --dtype (Orion's heads, as the converter) */
    uint64_t key;                    /* hash of (seed, name) */
    uint32_t shard;
    uint64_t offset;                 /* within its shard's byte buffer */
} tensor_spec;

typedef struct tensor_list {
    tensor_spec *t;
    uint32_t n, cap;
    int oom;
} tensor_list;

typedef struct tower_dims {
    uint32_t embed, depth, heads, mlp, patch, image, registers, class_token, layer_scale;
} tower_dims;

/* timm's vit_large_patch14_reg4_dinov2 and vit_so400m_patch14_siglip_224 at 224 px. */
static const tower_dims full_towers[2] = {
    {1024, 24, 16, 4096, 14, 224, 4, 1, 1},
    {1152, 27, 16, 4304, 14, 224, 0, 0, 0},
};
/* --vision tiny: written to config.json as vision_backbone_overrides. */
static const tower_dims tiny_towers[2] = {
    {64, 3, 4, 256, 14, 224, 4, 1, 1},
    {64, 3, 4, 256, 14, 224, 0, 0, 0},
};
static const char *const timm_ids[2] = {"vit_large_patch14_reg4_dinov2.lvd142m", "vit_so400m_patch14_siglip_224"};
static const char *const tower_prefix[2] = {"vision_backbone.featurizer.", "vision_backbone.fused_featurizer."};

typedef struct llm_dims {
    uint32_t hidden, intermediate, layers, heads;
    uint32_t kv_heads, head_dim; /* MindDrive's Qwen2 (the others: heads, hidden / heads) */
} llm_dims;

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

#define GOLDEN 0x9e3779b97f4a7c15u

static uint64_t name_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 0x100000001b3u;
    return mix64(h + mix64(seed + GOLDEN));
}

static tensor_spec *add_tensor(tensor_list *L, tensor_part part, init_kind kind, float a, float b, uint32_t ndim,
                               const uint64_t *shape, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));
static tensor_spec *add_tensor(tensor_list *L, tensor_part part, init_kind kind, float a, float b, uint32_t ndim,
                               const uint64_t *shape, const char *fmt, ...)
{
    if (L->oom) return NULL;
    if (L->n == L->cap) {
        uint32_t cap = L->cap ? 2 * L->cap : 256;
        tensor_spec *t = realloc(L->t, cap * sizeof *t);
        if (!t) {
            L->oom = 1;
            return NULL;
        }
        L->t = t;
        L->cap = cap;
    }
    tensor_spec *t = &L->t[L->n++];
    memset(t, 0, sizeof *t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->ndim = ndim;
    t->numel = 1;
    for (uint32_t i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->numel *= shape[i];
    }
    t->kind = kind;
    t->a = a;
    t->b = b;
    t->part = part;
    return t;
}

#define DIMS(...) (sizeof((uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t)), ((const uint64_t[]){__VA_ARGS__})

/* nn.Linear(in, out) (+ bias): weight N(0, 1/in), bias N(0, 0.02^2). */
static void add_linear(tensor_list *L, tensor_part p, uint64_t in, uint64_t out, int bias, const char *name)
{
    add_tensor(L, p, INIT_NORMAL, 0.0f, (float)(1.0 / sqrt((double)in)), DIMS(out, in), "%s.weight",
               name);
    if (bias) add_tensor(L, p, INIT_NORMAL, 0.0f, 0.02f, DIMS(out), "%s.bias", name);
}

static void add_layernorm(tensor_list *L, tensor_part p, uint64_t d, const char *name)
{
    add_tensor(L, p, INIT_NORMAL, 1.0f, 0.1f, DIMS(d), "%s.weight", name);
    add_tensor(L, p, INIT_NORMAL, 0.0f, 0.02f, DIMS(d), "%s.bias", name);
}

/* A timm VisionTransformer's state dict, in registration order (OpenVLA's LayerScale renaming). */
static void add_tower(tensor_list *L, uint32_t t, const tower_dims *d)
{
    const char *pre = tower_prefix[t];
    const uint64_t D = d->embed, H = d->mlp, P = d->patch, grid = d->image / d->patch, n_patches = grid * grid;
    char name[160];
    if (d->class_token) add_tensor(L, PART_VISION, INIT_NORMAL, 0.0f, 0.5f, DIMS(1, 1, D), "%scls_token", pre);
    if (d->registers)
        add_tensor(L, PART_VISION, INIT_NORMAL, 0.0f, 0.5f, DIMS(1, d->registers, D), "%sreg_token", pre);
    /* DINOv2 is no_embed_class and SigLIP has no prefix tokens: positions for the patches only */
    add_tensor(L, PART_VISION, INIT_NORMAL, 0.0f, 0.5f, DIMS(1, n_patches, D), "%spos_embed", pre);
    add_tensor(L, PART_VISION, INIT_NORMAL, 0.0f, (float)(1.0 / sqrt(3.0 * P * P)), DIMS(D, 3, P, P),
               "%spatch_embed.proj.weight", pre);
    add_tensor(L, PART_VISION, INIT_NORMAL, 0.0f, 0.02f, DIMS(D), "%spatch_embed.proj.bias", pre);
    for (uint32_t i = 0; i < d->depth; i++) {
        snprintf(name, sizeof name, "%sblocks.%u.norm1", pre, i);
        add_layernorm(L, PART_VISION, D, name);
        snprintf(name, sizeof name, "%sblocks.%u.attn.qkv", pre, i);
        add_linear(L, PART_VISION, D, 3 * D, 1, name);
        snprintf(name, sizeof name, "%sblocks.%u.attn.proj", pre, i);
        add_linear(L, PART_VISION, D, D, 1, name);
        if (d->layer_scale)
            add_tensor(L, PART_VISION, INIT_UNIFORM, 0.3f, 1.0f, DIMS(D), "%sblocks.%u.ls1.scale_factor", pre, i);
        snprintf(name, sizeof name, "%sblocks.%u.norm2", pre, i);
        add_layernorm(L, PART_VISION, D, name);
        snprintf(name, sizeof name, "%sblocks.%u.mlp.fc1", pre, i);
        add_linear(L, PART_VISION, D, H, 1, name);
        snprintf(name, sizeof name, "%sblocks.%u.mlp.fc2", pre, i);
        add_linear(L, PART_VISION, H, D, 1, name);
        if (d->layer_scale)
            add_tensor(L, PART_VISION, INIT_UNIFORM, 0.3f, 1.0f, DIMS(D), "%sblocks.%u.ls2.scale_factor", pre, i);
    }
    snprintf(name, sizeof name, "%snorm", pre);
    add_layernorm(L, PART_VISION, D, name);
    if (!d->class_token) { /* SigLIP: global_pool "map", timm's AttentionPoolLatent head */
        add_tensor(L, PART_VISION, INIT_NORMAL, 0.0f, 0.5f, DIMS(1, 1, D), "%sattn_pool.latent", pre);
        snprintf(name, sizeof name, "%sattn_pool.q", pre);
        add_linear(L, PART_VISION, D, D, 1, name);
        snprintf(name, sizeof name, "%sattn_pool.kv", pre);
        add_linear(L, PART_VISION, D, 2 * D, 1, name);
        snprintf(name, sizeof name, "%sattn_pool.proj", pre);
        add_linear(L, PART_VISION, D, D, 1, name);
        snprintf(name, sizeof name, "%sattn_pool.norm", pre);
        add_layernorm(L, PART_VISION, D, name);
        snprintf(name, sizeof name, "%sattn_pool.mlp.fc1", pre);
        add_linear(L, PART_VISION, D, H, 1, name);
        snprintf(name, sizeof name, "%sattn_pool.mlp.fc2", pre);
        add_linear(L, PART_VISION, H, D, 1, name);
    }
}

/* LlamaForCausalLM's state dict, in registration order. */
static void add_llm(tensor_list *L, const llm_dims *l)
{
    const uint64_t D = l->hidden, F = l->intermediate, V = VOCAB_PADDED;
    const char *pre = "language_model.model.";
    char name[160];
    add_tensor(L, PART_LLM, INIT_NORMAL, 0.0f, 1.0f, DIMS(V, D), "%sembed_tokens.weight", pre);
    for (uint32_t i = 0; i < l->layers; i++) {
        static const char *const attn[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "%slayers.%u.self_attn.%s", pre, i, attn[k]);
            add_linear(L, PART_LLM, D, D, 0, name);
        }
        snprintf(name, sizeof name, "%slayers.%u.mlp.gate_proj", pre, i);
        add_linear(L, PART_LLM, D, F, 0, name);
        snprintf(name, sizeof name, "%slayers.%u.mlp.up_proj", pre, i);
        add_linear(L, PART_LLM, D, F, 0, name);
        snprintf(name, sizeof name, "%slayers.%u.mlp.down_proj", pre, i);
        add_linear(L, PART_LLM, F, D, 0, name);
        add_tensor(L, PART_LLM, INIT_NORMAL, 1.0f, 0.1f, DIMS(D), "%slayers.%u.input_layernorm.weight", pre, i);
        add_tensor(L, PART_LLM, INIT_NORMAL, 1.0f, 0.1f, DIMS(D), "%slayers.%u.post_attention_layernorm.weight",
                   pre, i);
    }
    add_tensor(L, PART_LLM, INIT_NORMAL, 1.0f, 0.1f, DIMS(D), "%snorm.weight", pre);
    add_linear(L, PART_LLM, D, V, 0, "language_model.lm_head");
    if (!L->oom) { /* rows of the action tokens: ids vocab_unpadded - 256 .. vocab_unpadded - 1 */
        tensor_spec *head = &L->t[L->n - 1];
        const uint64_t unpadded = VOCAB_PADDED - PAD_TO_MULTIPLE;
        head->scaled_first = (unpadded - N_ACTION_BINS) * D;
        head->scaled_end = unpadded * D;
    }
}

/* Orion's LLM as convert_orion.py writes it: LoRA merged, no prefix, no lm_head (Orion reads the
 * final-normed hidden state at <waypoint_ego> and never evaluates the head). */
static void add_orion_llm(tensor_list *L, const llm_dims *l)
{
    const uint64_t D = l->hidden, F = l->intermediate, V = ORION_VOCAB;
    char name[160];
    add_tensor(L, PART_LLM, INIT_NORMAL, 0.0f, 1.0f, DIMS(V, D), "model.embed_tokens.weight");
    for (uint32_t i = 0; i < l->layers; i++) {
        static const char *const attn[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "model.layers.%u.self_attn.%s", i, attn[k]);
            add_linear(L, PART_LLM, D, D, 0, name);
        }
        snprintf(name, sizeof name, "model.layers.%u.mlp.gate_proj", i);
        add_linear(L, PART_LLM, D, F, 0, name);
        snprintf(name, sizeof name, "model.layers.%u.mlp.up_proj", i);
        add_linear(L, PART_LLM, D, F, 0, name);
        snprintf(name, sizeof name, "model.layers.%u.mlp.down_proj", i);
        add_linear(L, PART_LLM, F, D, 0, name);
        add_tensor(L, PART_LLM, INIT_NORMAL, 1.0f, 0.1f, DIMS(D), "model.layers.%u.input_layernorm.weight", i);
        add_tensor(L, PART_LLM, INIT_NORMAL, 1.0f, 0.1f, DIMS(D), "model.layers.%u.post_attention_layernorm.weight", i);
    }
    add_tensor(L, PART_LLM, INIT_NORMAL, 1.0f, 0.1f, DIMS(D), "model.norm.weight");
}

/* The camera front end as tools/orion/convert_orion.py and tools/minddrive/convert_minddrive.py write
 * it (tools/orion/front_end.py; Orion's and MindDrive's are the same modules):
 * EVA-02-L (img_backbone.*, in --dtype) and, in F32 as the agent runs them, the position encoder,
 * the modules both heads share (once, at the top), the det head (pts_bbox_head.*) and the map head
 * (map_head.*), each branch once (branch 0). Geometry: the released agent config (spec sections 2-3;
 * MindDrive's infer configs give the same); the heads' output width is the LLM's (out_dims: Orion
 * 4096, MindDrive 896 / 2048). */
enum {
    EVA_EMBED = 1024, EVA_LAYERS = 24, EVA_HEADS = 16, EVA_MLP = 2730, EVA_PATCH = 16, EVA_IMAGE = 640,
    EVA_WINDOW = 16, EVA_PRETRAIN_GRID = 14,
    PETR_EMBED = 256, PETR_HEADS = 8, PETR_FFN = 2048, PETR_MEMORY_FFN = 512, PETR_LAYERS = 6,
    PETR_DET_QUERIES = 600, PETR_EXTRA = 256, PETR_MEMORY_LEN = 600, PETR_TOPK = 300, PETR_NUM_MEMORY = 16,
    PETR_SCENE_LEN = 256, PETR_CANBUS_LEN = 2, PETR_DET_CLASSES = 9, PETR_MAP_CLASSES = 6, PETR_LANES = 300,
    PETR_LANES_MANY = 1500, PETR_CONTROL = 11, PETR_DEPTH_BINS = 64,
};
/* EVAViT's window_block_indexes in the agent config: every block but 2, 5, 8, ..., 23 */
static int eva_windowed(uint32_t block) { return block % 3 != 2; }

static void add_eva(tensor_list *L, uint32_t layers)
{
    const uint64_t D = EVA_EMBED, F = EVA_MLP, P = EVA_PATCH, G = EVA_PRETRAIN_GRID;
    const tensor_part p = PART_FRONT_END;
    char name[160];
    add_tensor(L, p, INIT_NORMAL, 0.0f, (float)(1.0 / sqrt(3.0 * P * P)), DIMS(D, 3, P, P),
               "img_backbone.patch_embed.proj.weight");
    add_tensor(L, p, INIT_NORMAL, 0.0f, 0.02f, DIMS(D), "img_backbone.patch_embed.proj.bias");
    add_tensor(L, p, INIT_NORMAL, 0.0f, 0.5f, DIMS(1, G * G + 1, D), "img_backbone.pos_embed");
    for (uint32_t i = 0; i < layers; i++) {
        static const char *const qkv[] = {"q_proj", "k_proj", "v_proj"};
        snprintf(name, sizeof name, "img_backbone.blocks.%u.norm1", i);
        add_layernorm(L, p, D, name);
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "img_backbone.blocks.%u.attn.%s", i, qkv[k]);
            add_linear(L, p, D, D, 0, name);
        }
        add_tensor(L, p, INIT_NORMAL, 0.0f, 0.02f, DIMS(D), "img_backbone.blocks.%u.attn.q_bias", i);
        add_tensor(L, p, INIT_NORMAL, 0.0f, 0.02f, DIMS(D), "img_backbone.blocks.%u.attn.v_bias", i);
        snprintf(name, sizeof name, "img_backbone.blocks.%u.attn.proj", i);
        add_linear(L, p, D, D, 1, name);
        snprintf(name, sizeof name, "img_backbone.blocks.%u.norm2", i);
        add_layernorm(L, p, D, name);
        snprintf(name, sizeof name, "img_backbone.blocks.%u.mlp.w1", i);
        add_linear(L, p, D, F, 1, name);
        snprintf(name, sizeof name, "img_backbone.blocks.%u.mlp.w2", i);
        add_linear(L, p, D, F, 1, name);
        snprintf(name, sizeof name, "img_backbone.blocks.%u.mlp.ffn_ln", i);
        add_layernorm(L, p, F, name);
        snprintf(name, sizeof name, "img_backbone.blocks.%u.mlp.w3", i);
        add_linear(L, p, F, D, 1, name);
    }
}

/* PETR decoder layers under `pre` (mmcv's names): a query decoder's self-attention (0), norm (1),
 * cross-attention (2), norm (3), FFN (4), norm (5); a memory decoder's cross-attention (0, no
 * biases), norm (1), FFN (2), norm (3). */
static void add_petr_decoder(tensor_list *L, const char *pre, uint32_t layers, int query_decoder)
{
    const uint64_t D = PETR_EMBED, F = query_decoder ? PETR_FFN : PETR_MEMORY_FFN;
    const int attn[2] = {0, 2}, n_attn = query_decoder ? 2 : 1, ffn = query_decoder ? 4 : 2;
    const tensor_part p = PART_FRONT_END;
    char name[200];
    for (uint32_t l = 0; l < layers; l++) {
        for (int a = 0; a < n_attn; a++) {
            add_tensor(L, p, INIT_NORMAL, 0.0f, (float)(1.0 / sqrt((double)D)), DIMS(3 * D, D),
                       "%s._layers.%u.transformer_layers.%d.attn.in_proj_weight", pre, l, attn[a]);
            if (query_decoder)
                add_tensor(L, p, INIT_NORMAL, 0.0f, 0.02f, DIMS(3 * D),
                           "%s._layers.%u.transformer_layers.%d.attn.in_proj_bias", pre, l, attn[a]);
            snprintf(name, sizeof name, "%s._layers.%u.transformer_layers.%d.attn.out_proj", pre, l, attn[a]);
            add_linear(L, p, D, D, query_decoder, name);
        }
        for (int n = 1; n <= (query_decoder ? 5 : 3); n += 2) {
            snprintf(name, sizeof name, "%s._layers.%u.transformer_layers.%d", pre, l, n);
            add_layernorm(L, p, D, name);
        }
        snprintf(name, sizeof name, "%s._layers.%u.transformer_layers.%d._layers.0", pre, l, ffn);
        add_linear(L, p, D, F, 1, name);
        snprintf(name, sizeof name, "%s._layers.%u.transformer_layers.%d._layers.3", pre, l, ffn);
        add_linear(L, p, F, D, 1, name);
    }
}

/* A head's cls branch (Linear, LN, ReLU, Linear, LN, ReLU, Linear) or reg branch (Linear, ReLU,
 * Linear, ReLU, Linear): branch 0 only. */
static void add_petr_branch(tensor_list *L, const char *head, int cls, uint64_t out)
{
    const int linears[2][3] = {{0, 2, 4}, {0, 3, 6}};
    char name[160];
    for (int j = 0; j < 3; j++) {
        snprintf(name, sizeof name, "%s.%s_branches.0.%d", head, cls ? "cls" : "reg", linears[cls][j]);
        add_linear(L, PART_FRONT_END, PETR_EMBED, j == 2 ? out : PETR_EMBED, 1, name);
    }
    for (int n = 1; cls && n <= 4; n += 3) {
        snprintf(name, sizeof name, "%s.cls_branches.0.%d", head, n);
        add_layernorm(L, PART_FRONT_END, PETR_EMBED, name);
    }
}

static void add_front_end(tensor_list *L, uint32_t vit_layers, uint64_t out)
{
    const uint64_t D = PETR_EMBED;
    const tensor_part p = PART_FRONT_END;
    add_eva(L, vit_layers);
    const uint32_t heads_first = L->n;
    add_linear(L, p, 3 * PETR_DEPTH_BINS, 4 * D, 1, "position_encoder.0");
    add_linear(L, p, 4 * D, D, 1, "position_encoder.2");
    add_linear(L, p, 3 * 12 * PETR_CONTROL, D, 1, "query_pos.0"); /* nerf of 11 points x 3: 396 */
    add_linear(L, p, D, D, 1, "query_pos.2");
    add_linear(L, p, D, D, 1, "time_embedding.0");
    add_layernorm(L, p, D, "time_embedding.1");
    add_linear(L, p, 13 * 12, D, 1, "ego_pose_pe.reduce.0");      /* nerf of [age, egopose[:3]]: 156 */
    add_linear(L, p, D, D, 1, "ego_pose_pe.gamma");
    add_linear(L, p, D, D, 1, "ego_pose_pe.beta");
    /* the det head */
    add_tensor(L, p, INIT_NORMAL, 0.0f, 1.0f, DIMS(PETR_NUM_MEMORY, D), "pts_bbox_head.memory_query.weight");
    add_linear(L, p, D, D, 1, "pts_bbox_head.scene_time_embedding.0");
    add_layernorm(L, p, D, "pts_bbox_head.scene_time_embedding.1");
    add_linear(L, p, EVA_EMBED, D, 1, "pts_bbox_head.input_projection");
    add_linear(L, p, D, out, 1, "pts_bbox_head.output_projection");
    add_tensor(L, p, INIT_UNIFORM, 0.0f, 1.0f, DIMS(PETR_DET_QUERIES, 3), "pts_bbox_head.reference_points.weight");
    add_tensor(L, p, INIT_UNIFORM, 0.0f, 1.0f, DIMS(PETR_TOPK, 3), "pts_bbox_head.pseudo_reference_points.weight");
    add_tensor(L, p, INIT_NORMAL, 0.0f, 1.0f, DIMS(PETR_EXTRA, D), "pts_bbox_head.query_embedding.weight");
    add_linear(L, p, 89, 4 * D, 1, "pts_bbox_head.can_bus_embed.0");
    add_linear(L, p, 4 * D, out, 1, "pts_bbox_head.can_bus_embed.2");
    add_petr_decoder(L, "pts_bbox_head.transformer.query_decoder", PETR_LAYERS, 1);
    add_petr_decoder(L, "pts_bbox_head.memory_decoder_cq", 1, 0);
    add_petr_decoder(L, "pts_bbox_head.memory_decoder_mq", 1, 0);
    add_petr_branch(L, "pts_bbox_head", 1, PETR_DET_CLASSES);
    add_petr_branch(L, "pts_bbox_head", 0, 10);
    /* the map head */
    add_linear(L, p, EVA_EMBED, D, 1, "map_head.input_projection");
    add_linear(L, p, D, out, 1, "map_head.output_projection");
    add_linear(L, p, D, 3, 1, "map_head.reference_points_lane");
    add_tensor(L, p, INIT_NORMAL, 0.0f, 1.0f, DIMS(PETR_CONTROL, D), "map_head.points_embedding_lane.weight");
    add_tensor(L, p, INIT_NORMAL, 0.0f, 1.0f, DIMS(PETR_LANES + PETR_LANES_MANY, D),
               "map_head.instance_embedding_lane.weight");
    add_tensor(L, p, INIT_NORMAL, 0.0f, 1.0f, DIMS(PETR_EXTRA, D), "map_head.query_embedding.weight");
    add_petr_decoder(L, "map_head.transformer.query_decoder", PETR_LAYERS, 1);
    add_petr_branch(L, "map_head", 1, PETR_MAP_CLASSES);
    add_petr_branch(L, "map_head", 0, 3 * PETR_CONTROL);
    for (uint32_t i = heads_first; i < L->n && !L->oom; i++) L->t[i].f32 = 1;
}

/* config.json's front_end as tools/orion/front_end.py's config() writes it for the agent (Orion's
 * orion_stage3_agent.py, MindDrive's infer configs: the same values). */
static json_t *make_front_end_config(uint32_t vit_layers)
{
    json_t *windows = json_array();
    for (uint32_t i = 0; i < vit_layers; i++)
        if (eva_windowed(i)) json_array_append_new(windows, json_integer(i));
    return json_pack("{s:{s:i, s:i, s:i, s:i, s:i, s:i, s:o, s:i}, s:[f, f, f, f, f, f], s:[f, f, f, f, f, f], s:i,"
                     " s:{s:{s:i, s:i, s:i, s:i, s:i, s:i}, s:{s:i, s:i, s:i, s:i}}}",
                     "backbone", "embed_dim", EVA_EMBED, "patch_size", EVA_PATCH, "depth", (int)vit_layers,
                     "num_heads", EVA_HEADS, "img_size", EVA_IMAGE, "window_size", EVA_WINDOW,
                     "window_block_indexes", windows, "mlp_hidden", EVA_MLP,
                     "pc_range", -51.2, -51.2, -5.0, 51.2, 51.2, 3.0,
                     "position_range", -61.2, -61.2, -10.0, 61.2, 61.2, 10.0, "depth_num", PETR_DEPTH_BINS,
                     "heads", "det", "num_heads", PETR_HEADS, "memory_len", PETR_MEMORY_LEN, "topk_proposals",
                     PETR_TOPK, "num_propagated", PETR_TOPK, "scene_memory_len", PETR_SCENE_LEN, "can_bus_len",
                     PETR_CANBUS_LEN, "map", "num_heads", PETR_HEADS, "memory_len", PETR_MEMORY_LEN,
                     "topk_proposals", PETR_TOPK, "num_lanes_one2one", PETR_LANES);
}

/* The VAE + GRU planner (doc/orion-converter.md, "Planner names in full"), H = the LLM's width:
 * encoder H -> 2H -> 2H -> H/2, distribution H/2 -> 2 latent, GRU (4 layers of H/4, input latent),
 * MLP H/4 -> H/2 -> H -> H, decoder 2H -> 2H -> 2H -> 2 modes, under `prefix` ("planner." for Orion,
 * "planner.speed." and "planner.path." for MindDrive). Linear layers as nn.Linear's N(0, 1/in)
 * (biases N(0, 0.02^2)); the GRU as nn.GRU initialises it, U(-1/sqrt(g), 1/sqrt(g)). */
static void add_vae_gru_planner(tensor_list *L, uint64_t H, const char *prefix, uint64_t modes)
{
    const uint64_t g = H / ORION_GRU_LAYERS, lat = ORION_LATENT;
    const float r = (float)(1.0 / sqrt((double)g));
    static const struct {
        const char *name;
        uint32_t in_times_4, out_times_4; /* widths in quarters of H: g = 1, H = 4 */
    } linear[] = {
        {"present_distribution.encoder.conv1", 4, 8}, {"present_distribution.encoder.conv2", 8, 8},
        {"present_distribution.encoder.conv3", 8, 2}, {"predict_model.linear1", 1, 2},
        {"predict_model.linear2", 2, 4},              {"predict_model.linear3", 4, 4},
        {"ego_fut_decoder.0", 8, 8},                  {"ego_fut_decoder.2", 8, 8},
    };
    char name[160];
    for (size_t k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "%s%s", prefix, linear[k].name);
        add_linear(L, PART_PLANNER, linear[k].in_times_4 * g, linear[k].out_times_4 * g, 1, name);
    }
    snprintf(name, sizeof name, "%spresent_distribution.last_conv.1", prefix);
    add_linear(L, PART_PLANNER, H / 2, 2 * lat, 1, name);
    for (uint32_t l = 0; l < ORION_GRU_LAYERS; l++) {
        add_tensor(L, PART_PLANNER, INIT_UNIFORM, -r, r, DIMS(3 * g, l ? g : lat), "%spredict_model.gru.weight_ih_l%u",
                   prefix, l);
        add_tensor(L, PART_PLANNER, INIT_UNIFORM, -r, r, DIMS(3 * g, g), "%spredict_model.gru.weight_hh_l%u", prefix, l);
        add_tensor(L, PART_PLANNER, INIT_UNIFORM, -r, r, DIMS(3 * g), "%spredict_model.gru.bias_ih_l%u", prefix, l);
        add_tensor(L, PART_PLANNER, INIT_UNIFORM, -r, r, DIMS(3 * g), "%spredict_model.gru.bias_hh_l%u", prefix, l);
    }
    for (size_t k = 3; k < sizeof linear / sizeof linear[0]; k++) {
        snprintf(name, sizeof name, "%s%s", prefix, linear[k].name);
        add_linear(L, PART_PLANNER, linear[k].in_times_4 * g, linear[k].out_times_4 * g, 1, name);
    }
    snprintf(name, sizeof name, "%sego_fut_decoder.4", prefix);
    add_linear(L, PART_PLANNER, 2 * H, 2 * modes, 1, name);
}

/* MindDrive's Qwen2 as convert_minddrive.py writes it with --lora keep: q/k/v with biases, the base
 * q/k/v/o and each expert's lora_A [r, in] / lora_B [out, r], no lm_head (tied). */
static void add_minddrive_llm(tensor_list *L, const llm_dims *l, uint64_t vocab_rows)
{
    static const char *const proj[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    static const char *const experts[2] = {"decision_expert", "action_expert"};
    const uint64_t D = l->hidden, F = l->intermediate, q = (uint64_t)l->heads * l->head_dim;
    const uint64_t kv = (uint64_t)l->kv_heads * l->head_dim, r = MINDDRIVE_LORA_R;
    const uint64_t out[4] = {q, kv, kv, D}, in[4] = {D, D, D, q};
    const float b_std = (float)(MINDDRIVE_LORA_B_STD / sqrt((double)r));
    char name[160];
    add_tensor(L, PART_LLM, INIT_NORMAL, 0.0f, 1.0f, DIMS(vocab_rows, D), "model.embed_tokens.weight");
    for (uint32_t i = 0; i < l->layers; i++) {
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "model.layers.%u.self_attn.%s", i, proj[k]);
            add_linear(L, PART_LLM, in[k], out[k], k < 3, name);
            for (int e = 0; e < 2; e++) {
                add_tensor(L, PART_LLM, INIT_NORMAL, 0.0f, (float)(1.0 / sqrt((double)in[k])), DIMS(r, in[k]),
                           "%s.lora_A.%s.weight", name, experts[e]);
                add_tensor(L, PART_LLM, INIT_NORMAL, 0.0f, b_std, DIMS(out[k], r), "%s.lora_B.%s.weight", name,
                           experts[e]);
            }
        }
        snprintf(name, sizeof name, "model.layers.%u.mlp.gate_proj", i);
        add_linear(L, PART_LLM, D, F, 0, name);
        snprintf(name, sizeof name, "model.layers.%u.mlp.up_proj", i);
        add_linear(L, PART_LLM, D, F, 0, name);
        snprintf(name, sizeof name, "model.layers.%u.mlp.down_proj", i);
        add_linear(L, PART_LLM, F, D, 0, name);
        add_tensor(L, PART_LLM, INIT_NORMAL, 1.0f, 0.1f, DIMS(D), "model.layers.%u.input_layernorm.weight", i);
        add_tensor(L, PART_LLM, INIT_NORMAL, 1.0f, 0.1f, DIMS(D), "model.layers.%u.post_attention_layernorm.weight", i);
    }
    add_tensor(L, PART_LLM, INIT_NORMAL, 1.0f, 0.1f, DIMS(D), "model.norm.weight");
}

static int compare_tensor_names(const void *x, const void *y)
{
    return strcmp(((const tensor_spec *)x)->name, ((const tensor_spec *)y)->name);
}

/* ------------------------------------------------------------------------------------------------
 * The plan: tensors, shards, file names
 */
typedef struct shard_info {
    char file[64];
    uint64_t data_bytes;   /* tensor bytes */
    uint64_t header_bytes; /* 8 + padded JSON */
    char *header;          /* padded JSON */
    uint32_t n_tensors;
} shard_info;

typedef struct plan {
    const tower_dims *towers;
    llm_dims llm;
    uint32_t esize;
    tensor_list list;         /* registration order (shards are cut in this order) */
    uint32_t *order;          /* file order: by shard, then by name */
    shard_info *shards;
    uint32_t n_shards;
    uint64_t params[PART_COUNT], total_params, total_data_bytes, total_file_bytes;
    /* MindDrive */
    uint64_t vocab_rows;      /* embedding rows */
    md_tokenizer tok;         /* the --tokenizer given, its 15 ids (json NULL: none given, a dry run) */
} plan;

static int compare_by_shard_and_name(const void *x, const void *y, void *ctx)
{
    const tensor_spec *t = ctx;
    const tensor_spec *a = &t[*(const uint32_t *)x], *b = &t[*(const uint32_t *)y];
    if (a->shard != b->shard) return a->shard < b->shard ? -1 : 1;
    return strcmp(a->name, b->name);
}

static int append(char **buf, size_t *len, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int append(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return -1;
        if (*buf && *len + (size_t)n < *cap) {
            *len += (size_t)n;
            return 0;
        }
        size_t want = (*cap ? *cap * 2 : 65536);
        while (want <= *len + (size_t)n) want *= 2;
        char *grown = realloc(*buf, want);
        if (!grown) return -1;
        *buf = grown;
        *cap = want;
    }
}

/* The safetensors header of shard s: {"__metadata__":{"format":"pt"}, tensors by name with
 * increasing offsets}, padded with spaces to a multiple of 8 (as the safetensors library does). */
/* Bytes an element of t takes in the file. */
static uint64_t tensor_esize(const plan *P, const tensor_spec *t) { return t->f32 ? 4 : P->esize; }

static int build_header(plan *P, uint32_t s, uint32_t first, uint32_t end, const char *st_dtype)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int bad = append(&buf, &len, &cap, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t offset = 0;
    for (uint32_t k = first; k < end && !bad; k++) {
        tensor_spec *t = &P->list.t[P->order[k]];
        t->offset = offset;
        uint64_t bytes = t->numel * tensor_esize(P, t);
        bad |= append(&buf, &len, &cap, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, t->f32 ? "F32" : st_dtype);
        for (uint32_t i = 0; i < t->ndim && !bad; i++)
            bad |= append(&buf, &len, &cap, i ? ",%" PRIu64 : "%" PRIu64, t->shape[i]);
        bad |= append(&buf, &len, &cap, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", offset, offset + bytes);
        offset += bytes;
    }
    bad |= append(&buf, &len, &cap, "}");
    while (!bad && len % 8) bad |= append(&buf, &len, &cap, " ");
    if (bad) {
        free(buf);
        return -1;
    }
    P->shards[s].header = buf;
    P->shards[s].header_bytes = 8 + len;
    P->shards[s].data_bytes = offset;
    P->shards[s].n_tensors = end - first;
    return 0;
}

static void plan_free(plan *P)
{
    for (uint32_t s = 0; s < P->n_shards; s++) free(P->shards[s].header);
    free(P->shards);
    free(P->order);
    free(P->list.t);
    md_tokenizer_free(&P->tok);
}

/* MindDrive's LLM shape: --size's, or reduced by --llm-layers / --llm-hidden. 0, or -1 after saying why. */
static int set_minddrive_dims(const options *o, plan *P)
{
    const minddrive_size *z = &minddrive_sizes[o->md_size];
    llm_dims *l = &P->llm;
    l->layers = o->layers_given ? o->llm_layers : z->layers;
    if (!o->hidden_given || o->llm_hidden == z->hidden) {
        *l = (llm_dims){z->hidden, z->intermediate, l->layers, z->heads, z->kv_heads, z->head_dim};
        return 0;
    }
    const uint32_t H = o->llm_hidden;
    if (H % (2 * ORION_GRU_LAYERS)) {
        fprintf(stderr, PROG ": --llm-hidden %u: MindDrive's planners split the hidden size in %d GRU layers and "
                "halves; give a multiple of %d\n", H, ORION_GRU_LAYERS, 2 * ORION_GRU_LAYERS);
        return -1;
    }
    /* heads of the size's head_dim where they fit 4 times, else the largest even divisor below */
    uint32_t d = z->head_dim < H / 4 ? z->head_dim : H / 4;
    while (d > 2 && (H % d || d % 2)) d--;
    l->hidden = H;
    l->head_dim = d;
    l->heads = H / d;
    l->kv_heads = l->heads % 2 ? 1 : 2;
    /* the size's MLP ratio (4864 / 896, 11008 / 2048), to a multiple of 8 */
    uint64_t f = ((uint64_t)H * z->intermediate / z->hidden + 4) / 8 * 8;
    l->intermediate = (uint32_t)(f < 8 ? 8 : f);
    return 0;
}

static int make_plan(const options *o, plan *P)
{
    memset(P, 0, sizeof *P);
    P->towers = o->vision_tiny ? tiny_towers : full_towers;
    P->esize = dtype_names[o->dtype].size;
    P->llm.layers = o->llm_layers;
    P->llm.hidden = o->llm_hidden;
    if (o->minddrive) {
        if (set_minddrive_dims(o, P)) return 2;
    } else if (o->llm_hidden == LLAMA_HIDDEN) {
        P->llm.intermediate = LLAMA_INTERMEDIATE;
        P->llm.heads = 32;
    } else {
        uint64_t f = ((uint64_t)o->llm_hidden * 43 / 16 + 32) / 64 * 64; /* 2.6875 H to a multiple of 64 */
        P->llm.intermediate = (uint32_t)(f < 64 ? 64 : f);
        P->llm.heads = o->llm_hidden >= 128 ? o->llm_hidden / 128 : 1;
        while (o->llm_hidden % P->llm.heads) P->llm.heads--;
        if ((o->llm_hidden / P->llm.heads) % 2) {
            fprintf(stderr, PROG ": --llm-hidden %u gives %u heads of odd size %u; RoPE needs an even head size\n",
                    o->llm_hidden, P->llm.heads, o->llm_hidden / P->llm.heads);
            return 2;
        }
    }

    tensor_list *L = &P->list;
    if (o->minddrive) {
        char why[512];
        if (o->tokenizer && md_tokenizer_load(o->tokenizer, &P->tok, why, sizeof why)) {
            fprintf(stderr, PROG ": %s\n", why);
            return 1;
        }
        /* the real model's rows, unless the tokenizer given needs more */
        P->vocab_rows = minddrive_sizes[o->md_size].vocab_rows;
        if (P->tok.json && P->tok.n_entries > P->vocab_rows) P->vocab_rows = P->tok.n_entries;
        add_minddrive_llm(L, &P->llm, P->vocab_rows);
        add_vae_gru_planner(L, P->llm.hidden, "planner.speed.", MD_N_SPEED_TOKENS);
        add_vae_gru_planner(L, P->llm.hidden, "planner.path.", MD_N_COMMANDS);
        if (o->front_end) add_front_end(L, o->vit_layers, P->llm.hidden);
        if (L->oom) goto oom;
        qsort(L->t, L->n, sizeof *L->t, compare_tensor_names); /* the converter's file order */
    } else if (o->orion) {
        if (o->llm_hidden % (2 * ORION_GRU_LAYERS)) {
            fprintf(stderr, PROG ": --llm-hidden %u: Orion's %d GRU layers split the hidden size, and its half "
                    "must split too; give a multiple of %d\n", o->llm_hidden, ORION_GRU_LAYERS, 2 * ORION_GRU_LAYERS);
            return 2;
        }
        /* the converter's file order: shards filled greedily in name order */
        add_orion_llm(L, &P->llm);
        add_vae_gru_planner(L, P->llm.hidden, "planner.", ORION_MODES);
        if (o->front_end) add_front_end(L, o->vit_layers, P->llm.hidden);
        if (L->oom) goto oom;
        qsort(L->t, L->n, sizeof *L->t, compare_tensor_names);
    } else {
        /* OpenVLA's module order: vision_backbone (featurizer, fused_featurizer), projector, language_model */
        add_tower(L, 0, &P->towers[0]);
        add_tower(L, 1, &P->towers[1]);
        const uint64_t Dv = P->towers[0].embed + P->towers[1].embed, Dl = P->llm.hidden;
        add_linear(L, PART_PROJECTOR, Dv, 4 * Dv, 1, "projector.fc1");
        add_linear(L, PART_PROJECTOR, 4 * Dv, Dl, 1, "projector.fc2");
        add_linear(L, PART_PROJECTOR, Dl, Dl, 1, "projector.fc3");
        add_llm(L, &P->llm);
        if (L->oom) goto oom;
    }

    /* Shards as transformers cuts them: in state-dict order, a new file when the next tensor would
     * take the current one over the limit (a tensor larger than the limit gets a file of its own). */
    uint64_t in_shard = 0;
    uint32_t shard = 0;
    for (uint32_t i = 0; i < L->n; i++) {
        tensor_spec *t = &L->t[i];
        uint64_t bytes = t->numel * tensor_esize(P, t);
        if (in_shard > 0 && in_shard + bytes > o->shard_bytes) {
            shard++;
            in_shard = 0;
        }
        t->shard = shard;
        in_shard += bytes;
        t->key = name_key(o->seed, t->name);
        P->params[t->part] += t->numel;
        P->total_params += t->numel;
        P->total_data_bytes += bytes;
    }
    P->n_shards = shard + 1;
    if (P->n_shards > 99999) {
        fprintf(stderr, PROG ": --shard-bytes %" PRIu64 " would make %u files; at most 99999\n", o->shard_bytes,
                P->n_shards);
        return 2;
    }
    P->order = malloc(L->n * sizeof *P->order);
    P->shards = calloc(P->n_shards, sizeof *P->shards);
    if (!P->order || !P->shards) goto oom;
    for (uint32_t i = 0; i < L->n; i++) P->order[i] = i;
    qsort_r(P->order, L->n, sizeof *P->order, compare_by_shard_and_name, L->t);
    for (uint32_t s = 0, k = 0; s < P->n_shards; s++) {
        uint32_t end = k;
        while (end < L->n && L->t[P->order[end]].shard == s) end++;
        if (P->n_shards == 1) snprintf(P->shards[s].file, sizeof P->shards[s].file, "model.safetensors");
        else
            snprintf(P->shards[s].file, sizeof P->shards[s].file, "model-%05u-of-%05u.safetensors", s + 1,
                     P->n_shards);
        if (build_header(P, s, k, end, dtype_names[o->dtype].safetensors)) goto oom;
        P->total_file_bytes += P->shards[s].header_bytes + P->shards[s].data_bytes;
        k = end;
    }
    return 0;
oom:
    fprintf(stderr, PROG ": out of memory\n");
    return 1;
}

/* ------------------------------------------------------------------------------------------------
 * Value generation (pure functions of the tensor's key and the element index)
 */
static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u); /* inf, NaN */
    if (x >= 0x477ff000u) return sign | 0x7c00u;                                    /* rounds to inf */
    if (x < 0x38800000u) {                                                          /* f16 subnormal or 0 */
        if (x <= 0x33000000u) return sign;                                          /* <= 2^-25: to 0 (even) */
        uint32_t m = (x & 0x7fffffu) | 0x800000u, shift = 126u - (x >> 23);         /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return sign | (uint16_t)q;
    }
    x -= 0x38000000u; /* exponent bias 127 -> 15 */
    x += 0xfffu + ((x >> 13) & 1u);
    return sign | (uint16_t)(x >> 13);
}

/* unit-variance Irwin-Hall(4) from one 64-bit hash */
#define IH4_MEAN 131070.0f
#define IH4_INV_STD 2.6428997921303014e-05f

static inline float value_at(const tensor_spec *t, uint64_t i)
{
    uint64_t h = mix64(t->key + i * GOLDEN);
    float v;
    if (t->kind == INIT_NORMAL) {
        uint32_t s = (uint32_t)(h & 0xffffu) + (uint32_t)((h >> 16) & 0xffffu) + (uint32_t)((h >> 32) & 0xffffu) +
                     (uint32_t)(h >> 48);
        v = t->a + t->b * (((float)s - IH4_MEAN) * IH4_INV_STD);
    } else {
        v = t->a + (t->b - t->a) * ((float)(h >> 40) * (1.0f / 16777216.0f));
    }
    if (i >= t->scaled_first && i < t->scaled_end) v *= ACTION_HEAD_SCALE;
    return v;
}

static void generate(const tensor_spec *t, uint64_t first, uint64_t count, out_dtype dt, void *out)
{
    if (dt == DT_F32) {
        float *o = out;
        for (uint64_t k = 0; k < count; k++) o[k] = value_at(t, first + k);
    } else if (dt == DT_BF16) {
        uint16_t *o = out;
        for (uint64_t k = 0; k < count; k++) o[k] = vh_f32_to_bf16(value_at(t, first + k));
    } else {
        uint16_t *o = out;
        for (uint64_t k = 0; k < count; k++) o[k] = f32_to_f16(value_at(t, first + k));
    }
}

/* ------------------------------------------------------------------------------------------------
 * Files
 */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void report_errno(const char *path, const char *what, int e)
{
    fprintf(stderr, PROG ": %s: %s: %s%s\n", path, what, strerror(e),
            e == ENOSPC ? " (the disk is full)" : e == EDQUOT ? " (disk quota exceeded)" :
            e == EFBIG ? " (file size limit)" : "");
}

static int write_all(int fd, const void *data, size_t n, const char *path)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            report_errno(path, "write failed", errno);
            return -1;
        }
        if (w == 0) {
            report_errno(path, "write failed", ENOSPC);
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int open_new(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) report_errno(path, "cannot create", errno);
    return fd;
}

static int close_file(int fd, const char *path, int sync)
{
    if (sync && fsync(fd) != 0) {
        int e = errno;
        close(fd);
        report_errno(path, "fsync failed", e);
        return -1;
    }
    if (close(fd) != 0) {
        report_errno(path, "close failed", errno);
        return -1;
    }
    return 0;
}

static int write_small_file(const char *dir, const char *name, const void *data, size_t n, int sync)
{
    char *path = path_join(dir, name);
    if (!path) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    int fd = open_new(path), rc = -1;
    if (fd >= 0) {
        rc = write_all(fd, data, n, path);
        if (close_file(fd, path, sync && rc == 0)) rc = -1;
    }
    free(path);
    return rc;
}

/* json.dumps(obj, indent=2, sort_keys=True) + "\n", as transformers writes its config files
 * (sorted 0: the keys in insertion order, as convert_orion.py's json.dump(indent=2) writes them). */
static int write_json_sorted(const char *dir, const char *name, json_t *obj, int sync, int sorted)
{
    if (!obj) {
        fprintf(stderr, PROG ": out of memory building %s\n", name);
        return -1;
    }
    char *text = json_dumps(obj, JSON_INDENT(2) | (sorted ? JSON_SORT_KEYS : 0) | JSON_REAL_PRECISION(10));
    json_decref(obj);
    if (!text) {
        fprintf(stderr, PROG ": out of memory building %s\n", name);
        return -1;
    }
    size_t n = strlen(text);
    char *with_newline = realloc(text, n + 2);
    if (!with_newline) {
        free(text);
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    with_newline[n] = '\n';
    int rc = write_small_file(dir, name, with_newline, n + 1, sync);
    free(with_newline);
    return rc;
}

static int write_json(const char *dir, const char *name, json_t *obj, int sync)
{
    return write_json_sorted(dir, name, obj, sync, 1);
}

static int copy_file(const char *from, const char *dir, const char *name, int sync, uint64_t *bytes)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        report_errno(from, "cannot open", errno);
        return -1;
    }
    char *path = path_join(dir, name);
    int out = path ? open_new(path) : -1, rc = out >= 0 ? 0 : -1;
    char buf[1 << 16];
    *bytes = 0;
    while (rc == 0) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            report_errno(from, "read failed", errno);
            rc = -1;
        }
        if (r <= 0) break;
        rc = write_all(out, buf, (size_t)r, path);
        *bytes += (uint64_t)r;
    }
    if (out >= 0 && close_file(out, path, sync && rc == 0)) rc = -1;
    close(in);
    free(path);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * config.json, preprocessor_config.json and the tokenizer side files
 */
static json_t *real_list(const double *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_real(v[i]));
    return a;
}

/* Plausible 7-dim statistics of the "bridge_orig" dataset (xyz, rpy deltas, gripper), of the
 * magnitudes openvla-7b's config.json has; gripper not normalised (mask false). */
static json_t *norm_stats(void)
{
    static const double mean[ACTION_DIM] = {0.00023341949, 0.00013004911, -0.00012762475, -0.00015565631,
                                            -0.00040393285, 0.00023557483, 0.57645792};
    static const double std[ACTION_DIM] = {0.0097659305, 0.013689135, 0.012667363, 0.028534092, 0.030637972,
                                           0.076914191, 0.49737015};
    static const double max[ACTION_DIM] = {0.41691166, 0.25864795, 0.21218234, 3.1222019, 1.8618113, 6.2804785,
                                           1.0};
    static const double min[ACTION_DIM] = {-0.40075102, -0.13874775, -0.225539, -3.2010787, -1.8618113,
                                           -6.2790756, 0.0};
    static const double q01[ACTION_DIM] = {-0.028727253, -0.0417035, -0.026093859, -0.080921051, -0.092886995,
                                           -0.20718276, 0.0};
    static const double q99[ACTION_DIM] = {0.028309678, 0.040855255, 0.040161587, 0.081920478, 0.077928505,
                                           0.20382574, 1.0};
    static const double zeros[ACTION_DIM] = {0};
    json_t *mask = json_array();
    for (int i = 0; mask && i < ACTION_DIM; i++) json_array_append_new(mask, json_boolean(i < ACTION_DIM - 1));
    json_t *action = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "mean", real_list(mean, ACTION_DIM), "std",
                               real_list(std, ACTION_DIM), "max", real_list(max, ACTION_DIM), "min",
                               real_list(min, ACTION_DIM), "q01", real_list(q01, ACTION_DIM), "q99",
                               real_list(q99, ACTION_DIM), "mask", mask);
    json_t *proprio = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "mean", real_list(zeros, ACTION_DIM), "std",
                                real_list(zeros, ACTION_DIM), "max", real_list(zeros, ACTION_DIM), "min",
                                real_list(zeros, ACTION_DIM), "q01", real_list(zeros, ACTION_DIM), "q99",
                                real_list(zeros, ACTION_DIM));
    return json_pack("{s:{s:o, s:o, s:i, s:i}}", "bridge_orig", "action", action, "proprio", proprio,
                     "num_transitions", 2135463, "num_trajectories", 60064);
}

static json_t *make_config(const options *o, const plan *P)
{
    const char *torch_dtype = dtype_names[o->dtype].torch;
    json_t *text = json_pack("{s:s, s:i, s:s, s:i}", "model_type", "llama", "pad_token_id", PAD_ID, "torch_dtype",
                             torch_dtype, "vocab_size", VOCAB_PADDED);
    if (text && o->llm_layers != LLAMA_LAYERS)
        json_object_set_new(text, "num_hidden_layers", json_integer(o->llm_layers));
    if (text && o->llm_hidden != LLAMA_HIDDEN) {
        json_object_set_new(text, "hidden_size", json_integer(P->llm.hidden));
        json_object_set_new(text, "intermediate_size", json_integer(P->llm.intermediate));
        json_object_set_new(text, "num_attention_heads", json_integer(P->llm.heads));
    }
    json_t *c = json_pack(
        "{s:s, s:[s], s:{s:s, s:s}, s:s, s:s, s:[i, i], s:s, s:i, s:s, s:i, s:o, s:b, s:i, s:i, s:o, s:[s, s],"
        " s:[n, n], s:s, s:s, s:b, s:s}",
        "arch_specifier", "no-align+fused-gelu-mlp", "architectures", "OpenVLAForActionPrediction", "auto_map",
        "AutoConfig", "configuration_prismatic.OpenVLAConfig", "AutoModelForVision2Seq",
        "modeling_prismatic.OpenVLAForActionPrediction", "hf_llm_id", "meta-llama/Llama-2-7b-hf",
        "image_resize_strategy", "resize-naive", "image_sizes", (int)P->towers[0].image, (int)P->towers[1].image,
        "llm_backbone_id", "llama2-7b-pure", "llm_max_length", 2048, "model_type", "openvla", "n_action_bins",
        N_ACTION_BINS, "norm_stats", norm_stats(), "output_projector_states", 0, "pad_to_multiple_of",
        PAD_TO_MULTIPLE, "pad_token_id", PAD_ID, "text_config", text, "timm_model_ids", timm_ids[0], timm_ids[1],
        "timm_override_act_layers", "torch_dtype", torch_dtype, "transformers_version", "4.40.1",
        "use_fused_vision_backbone", 1, "vision_backbone_id", "dinosiglip-vit-so-224px");
    if (c && o->vision_tiny) { /* vlahybrid's extension, as the test fixtures use it */
        json_t *ov = json_array();
        for (int t = 0; ov && t < 2; t++) {
            const tower_dims *d = &P->towers[t];
            json_array_append_new(ov, json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:b}", "embed_dim",
                                                (int)d->embed, "depth", (int)d->depth, "num_heads", (int)d->heads,
                                                "mlp_hidden", (int)d->mlp, "patch_size", (int)d->patch,
                                                "image_size", (int)d->image, "num_registers", (int)d->registers,
                                                "class_token", (int)d->class_token, "layer_scale",
                                                (int)d->layer_scale));
        }
        json_object_set_new(c, "vision_backbone_overrides", ov);
    }
    return c;
}

static json_t *triple(double a, double b, double c) { return json_pack("[f, f, f]", a, b, c); }

static json_t *make_preprocessor_config(const plan *P)
{
    /* ImageNet's mean/std after a bf16 round trip (as openvla-7b ships them), SigLIP's 0.5 */
    const double mean0[3] = {0.484375, 0.455078125, 0.40625}, std0[3] = {0.228515625, 0.2236328125, 0.224609375};
    json_t *sizes = json_array(), *crop = json_array(), *norm = json_array(), *resize = json_array();
    for (int t = 0; t < 2; t++) {
        int s = (int)P->towers[t].image;
        json_array_append_new(sizes, json_pack("[i, i, i]", 3, s, s));
        json_array_append_new(crop, json_pack("{s:[i, i]}", "output_size", s, s));
        json_array_append_new(norm, json_pack("{s:b, s:o, s:o}", "inplace", 0, "mean",
                                              t ? triple(0.5, 0.5, 0.5) : real_list(mean0, 3), "std",
                                              t ? triple(0.5, 0.5, 0.5) : real_list(std0, 3)));
        json_array_append_new(resize, json_pack("{s:b, s:i, s:n, s:[i, i]}", "antialias", 1, "interpolation", 3,
                                                "max_size", "size", s, s));
    }
    return json_pack("{s:{s:s, s:s}, s:s, s:s, s:o, s:[s, s], s:[o, o], s:s, s:[o, o], s:o, s:b, s:n, s:o, s:o,"
                     " s:b}",
                     "auto_map", "AutoImageProcessor", "processing_prismatic.PrismaticImageProcessor",
                     "AutoProcessor", "processing_prismatic.PrismaticProcessor", "image_processor_type",
                     "PrismaticImageProcessor", "image_resize_strategy", "resize-naive", "input_sizes", sizes,
                     "interpolations", "bicubic", "bicubic", "means", real_list(mean0, 3), triple(0.5, 0.5, 0.5),
                     "processor_class", "PrismaticProcessor", "stds", real_list(std0, 3), triple(0.5, 0.5, 0.5),
                     "tvf_crop_params", crop, "tvf_do_letterbox", 0, "tvf_letterbox_fill", "tvf_normalize_params",
                     norm, "tvf_resize_params", resize, "use_fused_vision_backbone", 1);
}

static json_t *special_token(const char *content, int with_special)
{
    json_t *t = json_pack("{s:s, s:b, s:b, s:b, s:b}", "content", content, "lstrip", 0, "normalized", 0, "rstrip",
                          0, "single_word", 0);
    if (t && with_special) json_object_set_new(t, "special", json_true());
    return t;
}

static int write_orion_configs(const options *o, const plan *P, const char *dir, int sync);
static int write_minddrive_configs(const options *o, const plan *P, const char *dir, int sync);

static int write_configs(const options *o, const plan *P, const char *dir, int sync)
{
    if (o->minddrive) return write_minddrive_configs(o, P, dir, sync);
    if (o->orion) return write_orion_configs(o, P, dir, sync);
    json_t *tok = json_pack(
        "{s:b, s:b, s:{s:o, s:o, s:o, s:o}, s:{s:s}, s:s, s:b, s:s, s:b, s:i, s:s, s:s, s:s, s:{}, s:s, s:s, s:b}",
        "add_bos_token", 1, "add_eos_token", 0, "added_tokens_decoder", "0", special_token("<unk>", 1), "1",
        special_token("<s>", 1), "2", special_token("</s>", 1), "32000", special_token("<PAD>", 1), "auto_map",
        "AutoProcessor", "processing_prismatic.PrismaticProcessor", "bos_token", "<s>",
        "clean_up_tokenization_spaces", 0, "eos_token", "</s>", "legacy", 0, "model_max_length", 2048,
        "pad_token", "<PAD>", "padding_side", "right", "processor_class", "PrismaticProcessor", "sp_model_kwargs",
        "tokenizer_class", "LlamaTokenizer", "unk_token", "<unk>", "use_default_system_prompt", 0);
    json_t *special = json_pack("{s:o, s:o, s:o, s:o}", "bos_token", special_token("<s>", 0), "eos_token",
                                special_token("</s>", 0), "pad_token", special_token("<PAD>", 0), "unk_token",
                                special_token("<unk>", 0));
    json_t *gen = json_pack("{s:b, s:i, s:i, s:i, s:s}", "_from_model_config", 1, "bos_token_id", 1, "eos_token_id",
                            2, "pad_token_id", PAD_ID, "transformers_version", "4.40.1");
    int rc = write_json(dir, "config.json", make_config(o, P), sync);
    rc = rc ? rc : write_json(dir, "preprocessor_config.json", make_preprocessor_config(P), sync);
    rc = rc ? rc : write_json(dir, "generation_config.json", gen, sync);
    gen = NULL;
    rc = rc ? rc : write_json(dir, "special_tokens_map.json", special, sync);
    special = NULL;
    rc = rc ? rc : write_json(dir, "tokenizer_config.json", tok, sync);
    tok = NULL;
    json_decref(gen); /* left over when an earlier file failed */
    json_decref(special);
    json_decref(tok);
    return rc;
}

/* Orion: config.json field by field as tools/orion/convert_orion.py writes it (doc/orion-converter.md);
 * text_config is what a Vicuna-7B pretrain_qformer/config.json holds, with the converter's changes
 * (vocab_size = embedding rows, base_vocab_size, num_key_value_heads, head_dim, rope_theta). */
static json_t *make_orion_config(const options *o, const plan *P)
{
    const int H = (int)P->llm.hidden, g = H / ORION_GRU_LAYERS;
    const char *dtype = o->dtype == DT_F32 ? "float32" : "bfloat16";
    json_t *text = json_pack("{s:s, s:[s], s:i, s:i, s:s, s:i, s:f, s:i, s:i, s:s, s:i, s:i, s:i, s:i, s:f, s:n,"
                             " s:b, s:s, s:s, s:b, s:i, s:i, s:i, s:f, s:i}",
                             "_name_or_path", "pretrain_qformer", "architectures", "LlavaLlamaForCausalLM",
                             "bos_token_id", 1, "eos_token_id", 2, "hidden_act", "silu", "hidden_size", H,
                             "initializer_range", 0.02, "intermediate_size", (int)P->llm.intermediate,
                             "max_position_embeddings", ORION_MAX_POSITIONS, "model_type", "llava_llama",
                             "num_attention_heads", (int)P->llm.heads, "num_hidden_layers", (int)P->llm.layers,
                             "pad_token_id", 0, "pretraining_tp", 1, "rms_norm_eps", ORION_RMS_EPS, "rope_scaling",
                             "tie_word_embeddings", 0, "torch_dtype", dtype, "transformers_version", "4.31.0",
                             "use_cache", 1, "vocab_size", ORION_VOCAB, "num_key_value_heads", (int)P->llm.heads,
                             "head_dim", H / (int)P->llm.heads, "rope_theta", 10000.0, "base_vocab_size",
                             ORION_BASE_VOCAB);
    json_t *lora = json_pack("{s:i, s:i, s:f, s:b, s:[s, s, s, s], s:s}", "r", ORION_LORA_R, "alpha", ORION_LORA_ALPHA,
                             "scale", (double)ORION_LORA_ALPHA / ORION_LORA_R, "merged", 1, "targets", "q_proj",
                             "k_proj", "v_proj", "o_proj", "alpha_source",
                             "Orion mmcv/utils/misc.py::load_model (lora_alpha=16)");
    json_t *planner = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:[i, i, i], s:[i, i, i],"
                                " s:[i, i, i], s:f, s:f, s:s, s:s, s:i}",
                                "type", "vae_gru", "in_channels", H, "out_channels", H, "compress_dim", H / 2,
                                "decoder_in", 2 * H, "latent_dim", ORION_LATENT, "ego_fut_mode", ORION_MODES,
                                "gru_layers", ORION_GRU_LAYERS, "gru_hidden", g, "gru_input", ORION_LATENT, "fut_ts",
                                ORION_STEPS, "encoder_widths", 2 * H, 2 * H, H / 2, "predict_widths", 2 * g, 4 * g,
                                H, "decoder_widths", 2 * H, 2 * H, 2 * ORION_MODES, "min_log_sigma", -5.0,
                                "max_log_sigma", 5.0, "activation", "relu", "gru_gate_order", "r,z,n",
                                "waypoint_dim", 2);
    char source[64];
    snprintf(source, sizeof source, PROG " --seed %" PRIu64, o->seed);
    const int n_tokens = orion_token_groups[0] + orion_token_groups[1] + orion_token_groups[2] + orion_token_groups[3];
    json_t *c = json_pack("{s:s, s:i, s:s, s:o, s:o, s:o, s:i, s:[i, i, i, i], s:{s:s, s:s, s:i, s:b, s:s},"
                          " s:{s:i}, s:b, s:{s:s, s:n, s:n, s:n}}",
                     "model_type", "orion", "vlahybrid_format", 1, "dtype", dtype, "text_config", text, "lora", lora,
                     "planner", planner, "vision_tokens", n_tokens, "vision_token_groups", orion_token_groups[0],
                     orion_token_groups[1], orion_token_groups[2], orion_token_groups[3], "prompt", "text",
                     orion_prompt, "image_marker", "<image>", "image_token_index", -200, "add_bos", 1,
                     "readout_token", "<waypoint_ego>", "special_tokens", "<waypoint_ego>", ORION_WAYPOINT_ID,
                     "lm_head", 0, "source", "checkpoint", source, "llm_dir", "agent_config", "llm_path");
    if (c && o->front_end) json_object_set_new(c, "front_end", make_front_end_config(o->vit_layers));
    return c;
}

/* Orion's side files: Vicuna's tokenizer_config.json and special_tokens_map.json (the converter
 * copies pretrain_qformer's), added_tokens.json with <waypoint_ego>. */
static int write_orion_configs(const options *o, const plan *P, const char *dir, int sync)
{
    json_t *special = json_pack("{s:s, s:s, s:s, s:s}", "bos_token", "<s>", "eos_token", "</s>", "pad_token", "<unk>",
                                "unk_token", "<unk>");
    const char *fmt = "{s:s, s:s, s:b, s:b, s:b, s:b}";
    json_t *tok = json_pack("{s:b, s:b, s:o, s:b, s:o, s:b, s:i, s:n, s:s, s:{}, s:s, s:o}", "add_bos_token", 1,
                            "add_eos_token", 0, "bos_token",
                            json_pack(fmt, "__type", "AddedToken", "content", "<s>", "lstrip", 0, "normalized", 0,
                                      "rstrip", 0, "single_word", 0),
                            "clean_up_tokenization_spaces", 0, "eos_token",
                            json_pack(fmt, "__type", "AddedToken", "content", "</s>", "lstrip", 0, "normalized", 0,
                                      "rstrip", 0, "single_word", 0),
                            "legacy", 0, "model_max_length", 2048, "pad_token", "padding_side", "right",
                            "sp_model_kwargs", "tokenizer_class", "LlamaTokenizer", "unk_token",
                            json_pack(fmt, "__type", "AddedToken", "content", "<unk>", "lstrip", 0, "normalized", 0,
                                      "rstrip", 0, "single_word", 0));
    json_t *added = json_pack("{s:i}", "<waypoint_ego>", ORION_WAYPOINT_ID);
    int rc = write_json_sorted(dir, "config.json", make_orion_config(o, P), sync, 0);
    rc = rc ? rc : write_json_sorted(dir, "added_tokens.json", added, sync, 0);
    added = NULL;
    rc = rc ? rc : write_json_sorted(dir, "special_tokens_map.json", special, sync, 0);
    special = NULL;
    rc = rc ? rc : write_json_sorted(dir, "tokenizer_config.json", tok, sync, 0);
    tok = NULL;
    json_decref(added); /* left over when an earlier file failed */
    json_decref(special);
    json_decref(tok);
    return rc;
}

/* MindDrive: JSON strings md_added_tokens[first .. end). */
static json_t *token_list(int first, int end)
{
    json_t *a = json_array();
    for (int k = first; a && k < end; k++) json_array_append_new(a, json_string(md_added_tokens[k]));
    return a;
}

/* One planner object as convert_minddrive.py's planner_hyperparameters writes it (Orion's fields,
 * then feature_token, mode_source, source_modules). */
static json_t *minddrive_planner(int H, int modes, int steps, const char *token, const char *mode_source,
                                 const char *module_prefix)
{
    const int g = H / ORION_GRU_LAYERS;
    char m[3][48];
    snprintf(m[0], sizeof m[0], "%spresent_distribution", module_prefix);
    snprintf(m[1], sizeof m[1], "%spredict_model", module_prefix);
    snprintf(m[2], sizeof m[2], "%sego_fut_decoder", module_prefix);
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:[i, i, i], s:[i, i, i], s:[i, i, i],"
                     " s:f, s:f, s:s, s:s, s:i, s:s, s:s, s:[s, s, s]}",
                     "type", "vae_gru", "in_channels", H, "out_channels", H, "compress_dim", H / 2, "decoder_in", 2 * H,
                     "latent_dim", ORION_LATENT, "ego_fut_mode", modes, "fut_ts", steps, "gru_layers", ORION_GRU_LAYERS,
                     "gru_hidden", g, "gru_input", ORION_LATENT, "encoder_widths", 2 * H, 2 * H, H / 2,
                     "predict_widths", 2 * g, 4 * g, H, "decoder_widths", 2 * H, 2 * H, 2 * modes, "min_log_sigma",
                     -5.0, "max_log_sigma", 5.0, "activation", "relu", "gru_gate_order", "r,z,n", "waypoint_dim", 2,
                     "feature_token", token, "mode_source", mode_source, "source_modules", m[0], m[1], m[2]);
}

/* MindDrive: config.json field by field as tools/minddrive/convert_minddrive.py's convert() writes it
 * (doc/minddrive-converter.md, "config.json"). text_config is a llava-qwen2 folder's config.json
 * (Qwen2Config's fields in transformers' sorted order, LlavaQwen2's model_type and
 * tokenizer_vocab_size, as tests/minddrive/make_tiny_minddrive.py writes it) with the converter's
 * changes: vocab_size = embedding rows, then head_dim and base_vocab_size appended. */
static json_t *make_minddrive_config(const options *o, const plan *P)
{
    const minddrive_size *z = &minddrive_sizes[o->md_size];
    const llm_dims *l = &P->llm;
    const int H = (int)l->hidden;
    const json_int_t eos = P->tok.eos_id >= 0 ? P->tok.eos_id : QWEN_EOS, base = (json_int_t)P->tok.base_len;
    json_t *text = json_pack("{s:s, s:[s], s:f, s:I, s:I, s:s, s:i, s:f, s:i, s:i, s:i, s:s, s:i, s:i, s:i, s:f, s:n,"
                             " s:f, s:i, s:b, s:I, s:s, s:s, s:b, s:b, s:I, s:i, s:I}",
                             "_name_or_path", z->llm_dir, "architectures", "LlavaQwen2ForCausalLM", "attention_dropout",
                             0.0, "bos_token_id", eos, "eos_token_id", eos, "hidden_act", "silu", "hidden_size", H,
                             "initializer_range", 0.02, "intermediate_size", (int)l->intermediate,
                             "max_position_embeddings", MINDDRIVE_MAX_POSITIONS, "max_window_layers", (int)l->layers,
                             "model_type", "llava_qwen2", "num_attention_heads", (int)l->heads, "num_hidden_layers",
                             (int)l->layers, "num_key_value_heads", (int)l->kv_heads, "rms_norm_eps", 1e-6,
                             "rope_scaling", "rope_theta", 1000000.0, "sliding_window", MINDDRIVE_MAX_POSITIONS,
                             "tie_word_embeddings", 1, "tokenizer_vocab_size", base, "torch_dtype", "bfloat16",
                             "transformers_version", "4.45.2", "use_cache", 1, "use_sliding_window", 0, "vocab_size",
                             (json_int_t)P->vocab_rows, "head_dim", (int)l->head_dim, "base_vocab_size", base);
    json_t *lora = json_pack("{s:i, s:i, s:f, s:b, s:[s, s], s:[s, s, s, s], s:s}", "r", MINDDRIVE_LORA_R, "alpha",
                             MINDDRIVE_LORA_ALPHA, "scale", (double)MINDDRIVE_LORA_ALPHA / MINDDRIVE_LORA_R, "merged", 0,
                             "experts", "decision_expert", "action_expert", "targets", "q_proj", "k_proj", "v_proj",
                             "o_proj", "alpha_source", "MindDrive mmcv/utils/misc.py::load_model (lora_alpha=16)");
    json_t *planners = json_pack("{s:o, s:o}", "speed",
                                 minddrive_planner(H, MD_N_SPEED_TOKENS, MINDDRIVE_SPEED_STEPS, MD_WAYPOINT_TOKEN,
                                                   "decision", ""),
                                 "path",
                                 minddrive_planner(H, MD_N_COMMANDS, MINDDRIVE_PATH_STEPS, MD_PATH_WAYPOINT_TOKEN,
                                                   "command", "pw_"));
    json_t *prompt = json_pack(
        "{s:s, s:i, s:b, s:{s:s, s:s, s:o, s:s}, s:{s:s, s:s, s:[s, s]}}", "image_marker", "<image>",
        "image_token_index", -200, "add_special_tokens", 0, "decision", "text", md_prompt_decision, "expert",
        "decision_expert", "last_token_choices", token_list(0, MD_N_SPEED_TOKENS), "readout",
        "logits at position -2 (the row before the last token) over speed_tokens, log_softmax, argmax", "action",
        "text", md_prompt_action, "expert", "action_expert", "readout_tokens", MD_WAYPOINT_TOKEN,
        MD_PATH_WAYPOINT_TOKEN);
    json_t *modes = json_array();
    for (int c = 0; modes && c < MD_N_COMMANDS; c++) json_array_append_new(modes, json_integer(md_path_mode_of_command[c]));
    char source[64], llm_path[96];
    snprintf(source, sizeof source, PROG " --seed %" PRIu64, o->seed);
    snprintf(llm_path, sizeof llm_path, "./Bench2DriveZoo/ckpts/%s", z->llm_dir);
    const int n_tokens = orion_token_groups[0] + orion_token_groups[1] + orion_token_groups[2] + orion_token_groups[3];
    json_t *c = json_pack("{s:s, s:i, s:s, s:o, s:o, s:o, s:i, s:[i, i, i, i], s:o, s:o, s:o, s:o, s:o,"
                          " s:{s:s, s:s, s:s, s:s, s:s}}",
                          "model_type", "minddrive", "vlahybrid_format", 1, "dtype", dtype_names[o->dtype].torch,
                          "text_config", text, "lora", lora, "planners", planners, "vision_tokens", n_tokens,
                          "vision_token_groups", orion_token_groups[0], orion_token_groups[1],
                          orion_token_groups[2], orion_token_groups[3], "prompt", prompt, "meta_action_tokens",
                          token_list(0, MD_N_META_TOKENS), "speed_tokens", token_list(0, MD_N_SPEED_TOKENS),
                          "path_mode_of_command", modes, "special_tokens", md_added_tokens_json(&P->tok), "source",
                          "checkpoint", source, "llm_dir", z->llm_dir, "infer_config", z->infer_config,
                          "lm_model_type", z->lm_model_type, "llm_path", llm_path);
    /* convert_minddrive.py: a front_end key only with the front end, after source */
    if (c && o->front_end) json_object_set_new(c, "front_end", make_front_end_config(o->vit_layers));
    return c;
}

/* json.dump(obj, indent=2, ensure_ascii=False) + "\n" with every real number to 17 digits (the
 * tokenizer's scores, if any, round-trip). */
static int write_json_exact(const char *dir, const char *name, json_t *obj, int sync)
{
    char *text = obj ? json_dumps(obj, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(obj);
    size_t n = text ? strlen(text) : 0;
    char *with_newline = text ? realloc(text, n + 2) : NULL;
    if (!with_newline) {
        free(text);
        fprintf(stderr, PROG ": out of memory building %s\n", name);
        return -1;
    }
    with_newline[n] = '\n';
    int rc = write_small_file(dir, name, with_newline, n + 1, sync);
    free(with_newline);
    return rc;
}

/* MindDrive's side files as convert_minddrive.py's write_tokenizer_files writes them: tokenizer.json
 * with the 15 tokens, tokenizer_config.json with them in added_tokens_decoder, added_tokens.json. */
static int write_minddrive_configs(const options *o, const plan *P, const char *dir, int sync)
{
    int rc = write_json_sorted(dir, "config.json", make_minddrive_config(o, P), sync, 0);
    rc = rc ? rc : write_json_exact(dir, "tokenizer.json", md_tokenizer_json(&P->tok), sync);
    rc = rc ? rc : write_json_sorted(dir, "tokenizer_config.json", md_tokenizer_config(&P->tok), sync, 0);
    rc = rc ? rc : write_json_sorted(dir, "added_tokens.json", md_added_tokens_json(&P->tok), sync, 0);
    return rc;
}

/* model.safetensors.index.json: metadata.total_size (tensor bytes) and the weight map. */
static int write_index(const plan *P, const char *dir, int sync)
{
    json_t *map = json_object();
    for (uint32_t i = 0; map && i < P->list.n; i++)
        json_object_set_new(map, P->list.t[i].name, json_string(P->shards[P->list.t[i].shard].file));
    json_t *index = json_pack("{s:{s:I}, s:o}", "metadata", "total_size", (json_int_t)P->total_data_bytes,
                              "weight_map", map);
    return write_json(dir, "model.safetensors.index.json", index, sync);
}

/* ------------------------------------------------------------------------------------------------
 * The weight writer: worker threads fill a ring of chunk buffers, the main thread writes them in order
 */
typedef struct job {
    uint32_t tensor; /* index into plan.list */
    uint32_t shard;
    uint64_t first, count;
} job;

typedef struct writer {
    const plan *P;
    out_dtype dtype;
    job *jobs;
    uint64_t n_jobs;
    uint32_t n_slots;
    uint8_t **slots;         /* [n_slots] of CHUNK_ELEMENTS * 4 bytes */
    uint64_t *slot_job;      /* the job allowed to fill the slot next */
    uint64_t *slot_done;     /* job + 1 once the slot holds that job's bytes */
    uint64_t next_job;       /* next job a worker takes */
    pthread_mutex_t lock;
    pthread_cond_t slot_free, slot_ready;
    atomic_int cancel;       /* 1: error in the writer, 2: interrupted by a signal */
} writer;

static void *worker_main(void *arg)
{
    writer *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        uint64_t j = w->next_job;
        if (j >= w->n_jobs || atomic_load(&w->cancel)) {
            pthread_mutex_unlock(&w->lock);
            return NULL;
        }
        w->next_job++;
        uint32_t s = (uint32_t)(j % w->n_slots);
        while (w->slot_job[s] != j && !atomic_load(&w->cancel)) pthread_cond_wait(&w->slot_free, &w->lock);
        pthread_mutex_unlock(&w->lock);
        if (atomic_load(&w->cancel)) return NULL;
        const job *jb = &w->jobs[j];
        const tensor_spec *t = &w->P->list.t[jb->tensor];
        generate(t, jb->first, jb->count, t->f32 ? DT_F32 : w->dtype, w->slots[s]);
        pthread_mutex_lock(&w->lock);
        w->slot_done[s] = j + 1;
        pthread_cond_broadcast(&w->slot_ready);
        pthread_mutex_unlock(&w->lock);
    }
}

static void wake_all(writer *w)
{
    pthread_mutex_lock(&w->lock);
    pthread_cond_broadcast(&w->slot_free);
    pthread_cond_broadcast(&w->slot_ready);
    pthread_mutex_unlock(&w->lock);
}

typedef struct signal_watch {
    sigset_t set;
    writer *w;
} signal_watch;

/* The only thread that receives SIGINT/SIGTERM/SIGHUP: turns them into a cancel request. */
static void *signal_main(void *arg)
{
    signal_watch *sw = arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&sw->set, &sig) != 0) continue;
        atomic_store(&sw->w->cancel, 2);
        wake_all(sw->w);
    }
    return NULL;
}

static int make_jobs(writer *w)
{
    const plan *P = w->P;
    w->n_jobs = 0;
    for (uint32_t i = 0; i < P->list.n; i++) w->n_jobs += (P->list.t[i].numel + CHUNK_ELEMENTS - 1) / CHUNK_ELEMENTS;
    w->jobs = malloc(w->n_jobs * sizeof *w->jobs);
    if (!w->jobs) return -1;
    uint64_t j = 0;
    for (uint32_t k = 0; k < P->list.n; k++) { /* file order */
        uint32_t i = P->order[k];
        const tensor_spec *t = &P->list.t[i];
        for (uint64_t first = 0; first < t->numel; first += CHUNK_ELEMENTS) {
            uint64_t count = t->numel - first < CHUNK_ELEMENTS ? t->numel - first : CHUNK_ELEMENTS;
            w->jobs[j++] = (job){i, t->shard, first, count};
        }
    }
    return 0;
}

static void print_progress(double t0, uint64_t done, uint64_t total, int final)
{
    double t = now_s() - t0;
    fprintf(stderr, "\r  %.2f / %.2f GB  %5.1f%%  %.1f s  %.2f GB/s%s", done / 1e9, total / 1e9,
            total ? 100.0 * done / total : 100.0, t, t > 0 ? done / 1e9 / t : 0.0, final ? "\n" : "");
}

/* Write every shard into dir (files created there are recorded in *created). */
static int write_weights(const plan *P, const options *o, const char *dir, writer *w, uint32_t *shards_created)
{
    int fd = -1, rc = 0, progress = isatty(STDERR_FILENO);
    char *path = NULL;
    uint32_t cur = UINT32_MAX;
    uint64_t done_bytes = 0;
    double t0 = now_s(), last_print = t0;
    for (uint64_t j = 0; j < w->n_jobs && rc == 0; j++) {
        const job *jb = &w->jobs[j];
        if (jb->shard != cur) { /* next file: header first */
            if (fd >= 0 && close_file(fd, path, !o->no_sync)) {
                fd = -1;
                rc = -1;
                break;
            }
            fd = -1;
            free(path);
            cur = jb->shard;
            const shard_info *s = &P->shards[cur];
            path = path_join(dir, s->file);
            if (!path) {
                fprintf(stderr, PROG ": out of memory\n");
                rc = -1;
                break;
            }
            if ((fd = open_new(path)) < 0) {
                rc = -1;
                break;
            }
            (*shards_created)++;
            /* reserve the space now, so a full disk shows at once (not every file system can) */
            if (fallocate(fd, 0, 0, (off_t)(s->header_bytes + s->data_bytes)) != 0 && errno != EOPNOTSUPP &&
                errno != ENOSYS && errno != EINVAL) {
                report_errno(path, "cannot reserve space", errno);
                rc = -1;
                break;
            }
            uint8_t len[8];
            uint64_t n = s->header_bytes - 8;
            for (int b = 0; b < 8; b++) len[b] = (uint8_t)(n >> (8 * b)); /* little-endian u64 */
            if (write_all(fd, len, 8, path) || write_all(fd, s->header, (size_t)n, path)) {
                rc = -1;
                break;
            }
        }
        uint32_t slot = (uint32_t)(j % w->n_slots);
        pthread_mutex_lock(&w->lock);
        while (w->slot_done[slot] != j + 1 && !atomic_load(&w->cancel)) pthread_cond_wait(&w->slot_ready, &w->lock);
        pthread_mutex_unlock(&w->lock);
        if (atomic_load(&w->cancel)) {
            rc = -1;
            break;
        }
        size_t bytes = (size_t)(jb->count * tensor_esize(P, &P->list.t[jb->tensor]));
        if (write_all(fd, w->slots[slot], bytes, path)) {
            rc = -1;
            break;
        }
        done_bytes += bytes;
        pthread_mutex_lock(&w->lock);
        w->slot_job[slot] = j + w->n_slots;
        pthread_cond_broadcast(&w->slot_free);
        pthread_mutex_unlock(&w->lock);
        if (progress && now_s() - last_print > 0.5) {
            last_print = now_s();
            print_progress(t0, done_bytes, P->total_data_bytes, 0);
        }
    }
    if (fd >= 0) {
        if (rc == 0) {
            if (progress) print_progress(t0, done_bytes, P->total_data_bytes, 1);
            if (!o->no_sync && progress) fprintf(stderr, "  syncing...\n");
        }
        if (close_file(fd, path, rc == 0 && !o->no_sync)) rc = -1;
    }
    free(path);
    if (rc) {
        int was = atomic_load(&w->cancel);
        if (!was) atomic_store(&w->cancel, 1);
        wake_all(w);
    }
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * main
 */
static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " --out DIR --tokenizer PATH/tokenizer.model [--family openvla|orion] [--llm-layers N]\n"
            "       " PROG " --family minddrive --out DIR --tokenizer PATH/tokenizer.json [--size 0.5b|3b] ...\n"
            "       [--llm-hidden H] [--vision full|tiny] [--dtype bf16|f16|f32] [--seed S] [--shard-bytes B]\n"
            "       [--threads N] [--no-sync] [--dry-run] [--list] [--front-end [--vit-layers N]]\n"
            "       " PROG " --help | --version\n"
            "Writes an OpenVLA checkpoint folder with OpenVLA-7B's tensor names and shapes and random, seeded\n"
            "weights (for benchmarks).\n"
            "  --out DIR        the folder to write (required; must not exist: written as DIR.partial, then renamed)\n"
            "  --tokenizer PATH the Llama-2 tokenizer.model copied into it (required; MindDrive: the Qwen2\n"
            "                   tokenizer.json, written with MindDrive's 15 tokens added)\n"
            "  --family F       openvla (default) | orion: an Orion folder as tools/orion/convert_orion.py\n"
            "                   writes it: Vicuna-7B LLM (rms_norm_eps 1e-5, 32001 rows) + VAE/GRU planner,\n"
            "                   bf16 or f32, shards of 5e9 bytes | minddrive: a MindDrive folder as\n"
            "                   tools/minddrive/convert_minddrive.py writes it (--lora keep): Qwen2 with two\n"
            "                   LoRA experts, the speed and path planners; --tokenizer is a tokenizer.json\n"
            "  --front-end      Orion, MindDrive: the camera front end too (EVA-02-L at 640, the position\n"
            "                   encoder, the det and map heads at the agent's geometry, their out_dims the LLM\n"
            "                   width; the ViT in --dtype, the rest F32; config.json's front_end)\n"
            "  --vit-layers N   the front end's ViT blocks, 1..24 (default 24; windowed unless N %% 3 == 2)\n"
            "  --size S         MindDrive's LLM: 0.5b (default; Qwen2-0.5B) | 3b (Qwen2.5-3B)\n"
            "  --llm-layers N   LLM layers, 1..1024 (default 32; MindDrive: the size's)\n"
            "  --llm-hidden H   LLM width, even, 2..65536 (default 4096; tests: intermediate 2.6875 H rounded\n"
            "                   to 64, max(1, H/128) heads; MindDrive: a multiple of 8, the size's by default)\n"
            "  --vision V       full (default): OpenVLA-7B's towers | tiny: small towers (OpenVLA only)\n"
            "  --dtype T        bf16 (default) | f16 | f32 (Orion: bf16 or f32)\n"
            "  --seed S         the weights' seed, 0..2^64-1 (default 0)\n"
            "  --shard-bytes B  largest shard (default 4 GiB; Orion 5e9 bytes; k/M/G suffixes, powers of 1024)\n"
            "  --threads N      writer threads, 1..1024 (default: all online cores, at most 256)\n"
            "  --no-sync        do not fsync the files before the final rename (default: fsync)\n"
            "  --dry-run        print what would be written and write nothing; --list also lists tensors\n"
            "  --help, -h       this text; --version: the version of the vlahybrid library in use\n");
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, int suffixes, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!*s || *s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return -1;
    uint64_t mult = 1;
    if (suffixes && *end) {
        switch (*end) {
        case 'k': case 'K': mult = 1ull << 10; break;
        case 'm': case 'M': mult = 1ull << 20; break;
        case 'g': case 'G': mult = 1ull << 30; break;
        default: return -1;
        }
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'B' || *end == 'b') end++;
    }
    if (*end) return -1;
    if (v > hi / mult) return -1;
    v *= mult;
    if (v < lo) return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (options){.llm_layers = LLAMA_LAYERS, .llm_hidden = LLAMA_HIDDEN, .dtype = DT_BF16, .vit_layers = EVA_LAYERS,
                   .shard_bytes = 4 * GiB, .threads = cores > 0 ? (int)(cores > 256 ? 256 : cores) : 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        uint64_t v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--version")) {
            vh_tool_print_version(stdout, PROG);
            exit(0);
        }
        if (!strcmp(a, "--no-sync")) { o->no_sync = 1; continue; }
        if (!strcmp(a, "--dry-run")) { o->dry_run = 1; continue; }
        if (!strcmp(a, "--list")) { o->dry_run = o->list = 1; continue; }
        if (!strcmp(a, "--front-end")) { o->front_end = 1; continue; }
        static const char *const value_flags[] = {"--out", "--tokenizer", "--family", "--llm-layers", "--llm-hidden",
                                                  "--vision", "--dtype", "--seed", "--shard-bytes", "--threads",
                                                  "--size", "--vit-layers", NULL};
        if (vh_tool_check_option(PROG, argc, argv, i, value_flags)) return -1;
        const char *s = argv[++i];
        if (!strcmp(a, "--out")) o->out = s;
        else if (!strcmp(a, "--family") && (!strcmp(s, "openvla") || !strcmp(s, "orion") || !strcmp(s, "minddrive"))) {
            o->orion = !strcmp(s, "orion");
            o->minddrive = !strcmp(s, "minddrive");
        }
        else if (!strcmp(a, "--size") && (!strcmp(s, "0.5b") || !strcmp(s, "3b"))) {
            o->md_size = !strcmp(s, "3b");
            o->size_given = 1;
        }
        else if (!strcmp(a, "--tokenizer")) o->tokenizer = s;
        else if (!strcmp(a, "--llm-layers") && !parse_u64(s, 1, 1024, 0, &v)) {
            o->llm_layers = (uint32_t)v;
            o->layers_given = 1;
        }
        else if (!strcmp(a, "--llm-hidden") && !parse_u64(s, 2, 65536, 0, &v) && v % 2 == 0) {
            o->llm_hidden = (uint32_t)v;
            o->hidden_given = 1;
        }
        else if (!strcmp(a, "--seed") && !parse_u64(s, 0, UINT64_MAX, 0, &v)) o->seed = v;
        else if (!strcmp(a, "--shard-bytes") && !parse_u64(s, 1, UINT64_MAX, 1, &v)) {
            o->shard_bytes = v;
            o->shard_given = 1;
        }
        else if (!strcmp(a, "--threads") && !parse_u64(s, 1, 1024, 0, &v)) o->threads = (int)v;
        else if (!strcmp(a, "--vit-layers") && !parse_u64(s, 1, EVA_LAYERS, 0, &v)) {
            o->vit_layers = (uint32_t)v;
            o->vit_given = 1;
        }
        else if (!strcmp(a, "--vision") && (!strcmp(s, "full") || !strcmp(s, "tiny"))) {
            o->vision_tiny = !strcmp(s, "tiny");
            o->vision_given = 1;
        }
        else if (!strcmp(a, "--dtype") && !strcmp(s, "bf16")) o->dtype = DT_BF16;
        else if (!strcmp(a, "--dtype") && !strcmp(s, "f16")) o->dtype = DT_F16;
        else if (!strcmp(a, "--dtype") && !strcmp(s, "f32")) o->dtype = DT_F32;
        else {
            fprintf(stderr, PROG ": bad option or value: %s %s\n", a, s);
            return -1;
        }
    }
    if ((o->front_end || o->vit_given) && !o->orion && !o->minddrive) {
        fprintf(stderr, PROG ": --front-end and --vit-layers are for --family orion or minddrive\n");
        return -1;
    }
    if (o->vit_given && !o->front_end) {
        fprintf(stderr, PROG ": --vit-layers needs --front-end\n");
        return -1;
    }
    if (o->size_given && !o->minddrive) {
        fprintf(stderr, PROG ": --size is for --family minddrive\n");
        return -1;
    }
    if (o->minddrive) {
        if (o->vision_given) {
            fprintf(stderr, PROG ": --vision is for OpenVLA; a MindDrive checkpoint starts from vision tokens\n");
            return -1;
        }
        if (!o->shard_given) o->shard_bytes = ORION_DEFAULT_SHARD_BYTES; /* convert_minddrive.py's too */
    }
    if (o->orion) {
        if (o->vision_given) {
            fprintf(stderr, PROG ": --vision is for OpenVLA; an Orion checkpoint starts from vision tokens\n");
            return -1;
        }
        if (o->dtype == DT_F16) {
            fprintf(stderr, PROG ": Orion checkpoints are bf16 or f32 (as convert_orion.py writes them)\n");
            return -1;
        }
        if (!o->shard_given) o->shard_bytes = ORION_DEFAULT_SHARD_BYTES;
    }
    if (!o->dry_run && (!o->out || !o->tokenizer)) {
        fprintf(stderr, PROG ": --out and --tokenizer are required\n");
        return -1;
    }
    return 0;
}

static void print_plan(const options *o, const plan *P)
{
    if (o->minddrive)
        printf("%s: MindDrive %s, LLM %u layers x %u (MLP %u, %u heads / %u KV heads of %u), vocab %" PRIu64
               ", LoRA r %d x 2 experts (kept), planners speed %d x %d and path %d x %d (latent %d, GRU %d x %u), %s, "
               "seed %" PRIu64 "\n",
               o->dry_run ? "plan" : "wrote", minddrive_sizes[o->md_size].name, P->llm.layers, P->llm.hidden,
               P->llm.intermediate, P->llm.heads, P->llm.kv_heads, P->llm.head_dim, P->vocab_rows, MINDDRIVE_LORA_R,
               MD_N_SPEED_TOKENS, MINDDRIVE_SPEED_STEPS, MD_N_COMMANDS, MINDDRIVE_PATH_STEPS, ORION_LATENT,
               ORION_GRU_LAYERS, P->llm.hidden / ORION_GRU_LAYERS, dtype_names[o->dtype].option, o->seed);
    else if (o->orion)
        printf("%s: Orion, LLM %u layers x %u (MLP %u, %u heads, rms_norm_eps 1e-5), vocab %d, planner VAE+GRU "
               "(latent %d, %d modes x %d steps, GRU %d x %u), %s, seed %" PRIu64 "\n",
               o->dry_run ? "plan" : "wrote", P->llm.layers, P->llm.hidden, P->llm.intermediate, P->llm.heads,
               ORION_VOCAB, ORION_LATENT, ORION_MODES, ORION_STEPS, ORION_GRU_LAYERS,
               P->llm.hidden / ORION_GRU_LAYERS, dtype_names[o->dtype].option, o->seed);
    else
        printf("%s: OpenVLA, %s vision towers, LLM %u layers x %u (MLP %u, %u heads), vocab %d, %s, seed %" PRIu64 "\n",
               o->dry_run ? "plan" : "wrote", o->vision_tiny ? "tiny" : "full (DINOv2 ViT-L/14 reg4 + SigLIP so400m/14)",
               P->llm.layers, P->llm.hidden, P->llm.intermediate, P->llm.heads, VOCAB_PADDED,
               dtype_names[o->dtype].option, o->seed);
    if (o->front_end)
        printf("  camera front end: EVA-02-L %u blocks at %d x %d (%s), position encoder, det + map heads "
               "(F32, out_dims %u)\n", o->vit_layers, EVA_IMAGE, EVA_IMAGE, dtype_names[o->dtype].option,
               P->llm.hidden);
    for (uint32_t s = 0; s < P->n_shards; s++)
        printf("  %-36s %15" PRIu64 " bytes  %5u tensors\n", P->shards[s].file,
               P->shards[s].header_bytes + P->shards[s].data_bytes, P->shards[s].n_tensors);
    if (o->list) {
        for (uint32_t k = 0; k < P->list.n; k++) {
            const tensor_spec *t = &P->list.t[P->order[k]];
            printf("    %s %s [", t->name, t->f32 ? "F32" : dtype_names[o->dtype].safetensors);
            for (uint32_t i = 0; i < t->ndim; i++) printf(i ? ", %" PRIu64 : "%" PRIu64, t->shape[i]);
            printf("] %s\n", P->shards[t->shard].file);
        }
    }
    printf("tensors %u\n", P->list.n);
    if (o->front_end)
        printf("parameters %" PRIu64 " (llm %" PRIu64 ", planner%s %" PRIu64 ", camera front end %" PRIu64 ")\n",
               P->total_params, P->params[PART_LLM], o->minddrive ? "s" : "", P->params[PART_PLANNER],
               P->params[PART_FRONT_END]);
    else if (o->orion || o->minddrive)
        printf("parameters %" PRIu64 " (llm %" PRIu64 ", planner%s %" PRIu64 ")\n", P->total_params, P->params[PART_LLM],
               o->minddrive ? "s" : "", P->params[PART_PLANNER]);
    else
        printf("parameters %" PRIu64 " (vision %" PRIu64 ", projector %" PRIu64 ", llm %" PRIu64 ")\n",
               P->total_params, P->params[PART_VISION], P->params[PART_PROJECTOR], P->params[PART_LLM]);
    printf("tensor bytes %" PRIu64 " (%.2f GB, %.2f GiB); safetensors files %" PRIu64 " bytes in %u file%s\n",
           P->total_data_bytes, P->total_data_bytes / 1e9, (double)P->total_data_bytes / GiB, P->total_file_bytes,
           P->n_shards, P->n_shards == 1 ? "" : "s");
}

/* The folder's files other than the shards (the index only when sharded). */
static const char *const other_files[] = {"config.json", "preprocessor_config.json", "generation_config.json",
                                          "special_tokens_map.json", "tokenizer_config.json", "tokenizer.model",
                                          "model.safetensors.index.json", "added_tokens.json", "tokenizer.json"};
#define N_OTHER_FILES (sizeof other_files / sizeof other_files[0])

/* Remove what this run created in dir, then dir itself. */
static void remove_partial(const char *dir, const plan *P, uint32_t shards_created)
{
    for (size_t i = 0; i < N_OTHER_FILES; i++) {
        char *p = path_join(dir, other_files[i]);
        if (p) unlink(p);
        free(p);
    }
    for (uint32_t s = 0; s < shards_created && s < P->n_shards; s++) {
        char *p = path_join(dir, P->shards[s].file);
        if (p) unlink(p);
        free(p);
    }
    if (rmdir(dir) != 0 && errno != ENOENT)
        fprintf(stderr, PROG ": could not remove %s: %s\n", dir, strerror(errno));
    else
        fprintf(stderr, PROG ": removed the incomplete %s\n", dir);
}

/* Sizes of the files written into dir. */
static uint64_t folder_bytes(const char *dir, const plan *P)
{
    uint64_t total = 0;
    struct stat st;
    for (size_t i = 0; i < N_OTHER_FILES + P->n_shards; i++) {
        char *p = path_join(dir, i < N_OTHER_FILES ? other_files[i] : P->shards[i - N_OTHER_FILES].file);
        if (p && stat(p, &st) == 0) total += (uint64_t)st.st_size;
        free(p);
    }
    return total;
}

static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Before anything is created: the tokenizer exists, DIR and DIR.partial do not, and the disk has room. */
static int preflight(const options *o, const plan *P, const char *out, const char *partial, const char *parent,
                     uint64_t *tokenizer_size)
{
    struct stat st;
    if (stat(o->tokenizer, &st) != 0) {
        report_errno(o->tokenizer, "cannot read the tokenizer", errno);
        return 1;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, PROG ": %s: not a regular file (give the tokenizer.model file)\n", o->tokenizer);
        return 1;
    }
    *tokenizer_size = (uint64_t)st.st_size;
    if (lstat(out, &st) == 0) {
        fprintf(stderr, PROG ": %s already exists; remove it or choose another --out\n", out);
        return 1;
    }
    if (lstat(partial, &st) == 0) {
        fprintf(stderr, PROG ": %s exists (left by an interrupted run?); remove it first\n", partial);
        return 1;
    }
    struct statvfs vfs;
    uint64_t need = P->total_file_bytes + *tokenizer_size + (1u << 20);
    if (statvfs(parent, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < need) {
        fprintf(stderr, PROG ": %s: not enough free space: the checkpoint needs %.2f GB, %.2f GB are free\n",
                parent, need / 1e9, (double)vfs.f_bavail * vfs.f_frsize / 1e9);
        return 1;
    }

    return 0;
}

/* Write the folder into DIR.partial and rename it to DIR; on failure remove what was written. */
static int write_checkpoint(const options *o, const plan *P, const char *out, const char *partial,
                            const char *parent)
{
    /* signals: blocked everywhere, taken by one thread that cancels the writer */
    writer w = {.P = P, .dtype = o->dtype};
    signal_watch sw = {.w = &w};
    sigemptyset(&sw.set);
    sigaddset(&sw.set, SIGINT);
    sigaddset(&sw.set, SIGTERM);
    sigaddset(&sw.set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sw.set, NULL);
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.slot_free, NULL);
    pthread_cond_init(&w.slot_ready, NULL);
    atomic_init(&w.cancel, 0);
    pthread_t sig_thread;
    int have_sig_thread = pthread_create(&sig_thread, NULL, signal_main, &sw) == 0;

    double t0 = now_s();
    uint32_t shards_created = 0;
    pthread_t *workers = NULL;
    int n_workers = 0, status = 1;
    uint64_t tok_bytes = 0;
    if (mkdir(partial, 0755) != 0) {
        report_errno(partial, "cannot create the folder", errno);
        goto out;
    }
    /* MindDrive's tokenizer.json is written with the configs (its 15 tokens added) */
    if (write_configs(o, P, partial, !o->no_sync) ||
        (!o->minddrive && copy_file(o->tokenizer, partial, "tokenizer.model", !o->no_sync, &tok_bytes)) ||
        atomic_load(&w.cancel))
        goto fail;

    w.n_slots = (uint32_t)(4 * o->threads < 8 ? 8 : 4 * o->threads);
    w.slots = calloc(w.n_slots, sizeof *w.slots);
    w.slot_job = calloc(w.n_slots, sizeof *w.slot_job);
    w.slot_done = calloc(w.n_slots, sizeof *w.slot_done);
    workers = calloc((size_t)o->threads, sizeof *workers);
    if (!w.slots || !w.slot_job || !w.slot_done || !workers || make_jobs(&w)) {
        fprintf(stderr, PROG ": out of memory\n");
        goto fail;
    }
    for (uint32_t s = 0; s < w.n_slots; s++) {
        w.slot_job[s] = s;
        if (!(w.slots[s] = malloc(CHUNK_ELEMENTS * 4))) { /* the widest element: F32 */
            fprintf(stderr, PROG ": out of memory\n");
            goto fail;
        }
    }
    for (int i = 0; i < o->threads; i++) {
        if (pthread_create(&workers[i], NULL, worker_main, &w) != 0) {
            if (i == 0) {
                fprintf(stderr, PROG ": cannot start a thread\n");
                goto fail;
            }
            break; /* fewer workers: same bytes */
        }
        n_workers++;
    }
    int wrc = write_weights(P, o, partial, &w, &shards_created);
    for (int i = 0; i < n_workers; i++) pthread_join(workers[i], NULL);
    n_workers = 0;
    if (wrc) goto fail;
    if (P->n_shards > 1 && write_index(P, partial, !o->no_sync)) goto fail;
    if (atomic_load(&w.cancel)) goto fail;
    if (!o->no_sync && sync_dir(partial) != 0) {
        report_errno(partial, "fsync failed", errno);
        goto fail;
    }
    if (rename(partial, out) != 0) {
        report_errno(out, "cannot rename the finished folder to this name", errno);
        goto fail;
    }
    if (!o->no_sync) sync_dir(parent);
    double took = now_s() - t0;
    print_plan(o, P);
    if (o->minddrive)
        printf("folder %s: %" PRIu64 " bytes in all (with the config files%s and tokenizer.json)\n", out,
               folder_bytes(out, P), P->n_shards > 1 ? ", the index" : "");
    else
        printf("folder %s: %" PRIu64 " bytes in all (with the config files, the%s tokenizer.model of %" PRIu64
               " bytes)\n", out, folder_bytes(out, P), P->n_shards > 1 ? " index and" : "", tok_bytes);
    printf("time %.2f s (%.2f GB/s, %d threads%s)\n", took, P->total_file_bytes / 1e9 / took, o->threads,
           o->no_sync ? ", not synced" : ", synced");
    status = 0;
    goto out;
fail:
    for (int i = 0; i < n_workers; i++) {
        if (!atomic_load(&w.cancel)) atomic_store(&w.cancel, 1);
        wake_all(&w);
        pthread_join(workers[i], NULL);
    }
    status = atomic_load(&w.cancel) == 2 ? 130 : 1;
    if (status == 130) fprintf(stderr, PROG ": interrupted\n");
    remove_partial(partial, P, shards_created);
out:
    if (have_sig_thread) {
        pthread_cancel(sig_thread);
        pthread_join(sig_thread, NULL);
    }
    for (uint32_t s = 0; w.slots && s < w.n_slots; s++) free(w.slots[s]);
    free(w.slots);
    free(w.slot_job);
    free(w.slot_done);
    free(w.jobs);
    free(workers);
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.slot_free);
    pthread_cond_destroy(&w.slot_ready);
    return status;
}

int main(int argc, char **argv)
{
    signal(SIGXFSZ, SIG_IGN); /* past a file size limit, write() fails with EFBIG: cleaned up like a full disk */
    options o;
    if (parse_args(argc, argv, &o)) return 2; /* parse_args said why */
    plan P;
    int status = make_plan(&o, &P);
    if (status == 0 && o.dry_run) print_plan(&o, &P);
    if (status || o.dry_run) {
        plan_free(&P);
        return status;
    }

    /* the names: DIR (must not exist), DIR.partial (written), DIR's parent (space, fsync) */
    size_t out_len = strlen(o.out);
    while (out_len > 1 && o.out[out_len - 1] == '/') out_len--;
    char *out = strndup(o.out, out_len), *partial = malloc(out_len + 16), *parent = strndup(o.out, out_len);
    if (!out || !partial || !parent) {
        fprintf(stderr, PROG ": out of memory\n");
        status = 1;
        goto done;
    }
    snprintf(partial, out_len + 16, "%s.partial", out);
    char *slash = strrchr(parent, '/');
    if (!slash) strcpy(parent, ".");
    else if (slash == parent) parent[1] = '\0';
    else *slash = '\0';

    uint64_t tokenizer_size = 0;
    status = preflight(&o, &P, out, partial, parent, &tokenizer_size);
    if (status == 0) status = write_checkpoint(&o, &P, out, partial, parent);
done:
    plan_free(&P);
    free(out);
    free(partial);
    free(parent);
    return status;
}
