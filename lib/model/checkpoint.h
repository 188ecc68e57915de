/* A Hugging Face checkpoint folder: its safetensors shards, memory-mapped, as one tensor table.
 *
 * Which files are read:
 *   - model.safetensors.index.json if present: {"metadata": {"total_size": N}, (optional)
 *     "weight_map": {"tensor name": "shard file name", ...}}. Every shard it names is opened.
 *     Shard names must be plain file names in the folder (no '/', '\\', "." or ".."; not empty).
 *     Every tensor listed must be in the shard it is listed for. A shard may hold tensors the
 *     index does not list (they are found too); a tensor name in two shards is an error.
 *     total_size, when present, must be a non-negative number; it is not compared with the
 *     shards (checkpoints in the wild disagree with it).
 *   - else model.safetensors.
 *   - else an error naming what the folder holds: VH_ERR_UNSUPPORTED when it has PyTorch pickles
 *     (pytorch_model*.bin) to convert, VH_ERR_BAD_MODEL otherwise.
 * Every shard is validated as safetensors.h describes.
 *
 * Threads: after open, every function may be called from any number of threads at once, until
 * vh_checkpoint_close (which must run alone).
 */
#ifndef VH_MODEL_CHECKPOINT_H
#define VH_MODEL_CHECKPOINT_H

#include <stdint.h>

#include "model/safetensors.h"
#include "util/error.h"

#define VH_CHECKPOINT_INDEX_FILE "model.safetensors.index.json"
#define VH_CHECKPOINT_SINGLE_FILE "model.safetensors"
#define VH_CHECKPOINT_MAX_INDEX_BYTES (64u << 20) /* a 7B index is about 100 KB */

typedef struct vh_checkpoint vh_checkpoint;

/* Open the checkpoint in folder `dir` (the path is copied).
 * Returns VH_OK and *out, or: VH_ERR_IO if dir is missing or not a folder, or a file cannot be
 * read or mapped; VH_ERR_BAD_MODEL if the index or a shard is malformed or they disagree, or no
 * safetensors checkpoint is there; VH_ERR_UNSUPPORTED if only PyTorch .bin weights are there;
 * VH_ERR_OUT_OF_MEMORY. On error *out is NULL and the message names the file and tensor. */
vh_status vh_checkpoint_open(const char *dir, vh_checkpoint **out, vh_error *err);

/* Unmap every shard and free everything; every pointer obtained from c dies. NULL is ignored. */
void vh_checkpoint_close(vh_checkpoint *c);

/* The tensor named `name` in any shard, or NULL if absent. O(log n) over all shards' tensors.
 * *file (if file is not NULL) receives its shard, for vh_st_data and for messages (NULL when
 * absent). */
const vh_st_tensor *vh_checkpoint_find(const vh_checkpoint *c, const char *name,
                                       vh_st_file **file);

/* Number of tensors over all shards, and the i-th in name (strcmp) order; NULL beyond. */
uint32_t vh_checkpoint_count(const vh_checkpoint *c);
const vh_st_tensor *vh_checkpoint_at(const vh_checkpoint *c, uint32_t i, vh_st_file **file);

/* Number of shard files, and the i-th (sorted by file name); NULL beyond. */
uint32_t vh_checkpoint_shard_count(const vh_checkpoint *c);
vh_st_file *vh_checkpoint_shard(const vh_checkpoint *c, uint32_t i);

/* Total bytes of the mapped shard files, for reporting. */
uint64_t vh_checkpoint_mapped_bytes(const vh_checkpoint *c);

/* The folder path given at open. */
const char *vh_checkpoint_dir(const vh_checkpoint *c);

#endif
