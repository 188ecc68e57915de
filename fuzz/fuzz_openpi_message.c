/* libFuzzer target: an openpi observation message (msgpack, as vh-serve receives it) through
 * vh_openpi_decode_observation with the default keys, and with a default prompt and a single image
 * key; a decoded image is read whole and its prompt measured. Then the encoders: an action built
 * from the input's first bytes is encoded and parsed back with msgpack-c, and its values must come
 * back bit for bit. */
#include <msgpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "openpi_message.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void decode_with(const uint8_t *data, size_t size, const vh_openpi_keys *keys)
{
    vh_openpi_observation obs;
    char why[512];
    if (vh_openpi_decode_observation(data, size, keys, &obs, why, sizeof why)) {
        if (!memchr(why, '\0', sizeof why)) abort(); /* the message is always terminated */
        return;
    }
    unsigned sum = 0;
    const size_t n = (size_t)obs.width * obs.height * 3;
    for (size_t i = 0; i < n; i++) sum += obs.rgb[i];
    volatile unsigned sink = sum + (unsigned)strlen(obs.prompt) + (obs.unnorm_key ? (unsigned)strlen(obs.unnorm_key) : 0);
    (void)sink;
    vh_openpi_observation_free(&obs);
}

/* The encoded action must parse back to the same doubles (or floats). */
static void round_trip_action(const uint8_t *data, size_t size)
{
    double values[32];
    uint32_t dim = size ? data[0] % (32 + 1) : 0;
    for (uint32_t i = 0; i < dim; i++) {
        uint64_t bits = 0;
        for (uint32_t b = 0; b < 8; b++) bits = bits << 8 | (1 + i * 8 + b < size ? data[1 + i * 8 + b] : 0);
        memcpy(&values[i], &bits, sizeof bits);
    }
    const int f32 = size > 1 && (data[size - 1] & 1);
    vh_openpi_action a = {.values = values, .action_dim = dim, .as_float32 = f32, .infer_ms = 1.5,
                          .compute_ms = 1.0, .prev_total_ms = size > 2 ? -1 : 3.0};
    vh_openpi_buffer out = {.headroom = 16};
    if (vh_openpi_encode_action(&a, &out)) abort();
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    if (msgpack_unpack_next(&u, (const char *)out.data + 16, out.size - 16, &off) != MSGPACK_UNPACK_SUCCESS ||
        off != out.size - 16 || u.data.type != MSGPACK_OBJECT_MAP)
        abort();
    const msgpack_object *actions = &u.data.via.map.ptr[0].val, *bytes = NULL;
    for (uint32_t i = 0; i < actions->via.map.size; i++) {
        const msgpack_object_kv *kv = &actions->via.map.ptr[i];
        if (kv->key.type == MSGPACK_OBJECT_BIN && kv->key.via.bin.size == 4 && !memcmp(kv->key.via.bin.ptr, "data", 4))
            bytes = &kv->val;
    }
    if (!bytes || bytes->type != MSGPACK_OBJECT_BIN || bytes->via.bin.size != dim * (f32 ? 4u : 8u)) abort();
    for (uint32_t i = 0; i < dim; i++) {
        if (f32) {
            float f, want = (float)values[i];
            memcpy(&f, bytes->via.bin.ptr + 4 * i, 4);
            if (memcmp(&f, &want, 4)) abort();
        } else if (memcmp(bytes->via.bin.ptr + 8 * i, &values[i], 8)) {
            abort();
        }
    }
    msgpack_unpacked_destroy(&u);
    vh_openpi_buffer_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const vh_openpi_keys defaults = {.image = "observation/image,image", .prompt = "prompt"};
    static const vh_openpi_keys single = {.image = "image", .prompt = "task", .default_prompt = "do it"};
    decode_with(data, size, &defaults);
    decode_with(data, size, &single);
    round_trip_action(data, size);
    return 0;
}
