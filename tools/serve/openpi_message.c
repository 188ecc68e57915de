/* openpi's msgpack messages: decoding an observation, encoding metadata and actions
 * (see openpi_message.h for the wire format). msgpack-c parses; this file checks what the parse
 * gives against what an OpenVLA frame needs and says precisely what is wrong when it does not fit.
 */
#include "openpi_message.h"

#include <msgpack.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "actions are sent as little-endian floats (<f8 / <f4) copied from memory: port the encoder first"
#endif

static int fail(char *why, size_t why_size, const char *fmt, ...)
{
    if (why && why_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ------------------------------------------------------------------------------------------------
 * A walk over the raw bytes before msgpack-c sees them. msgpack-c reserves n objects as soon as it
 * reads an array or map header declaring n, so a five-byte message could make it ask for 100 GB.
 * Here every container's count is held against the bytes that remain (each element takes at least
 * one), the whole message against VH_OPENPI_MAX_OBJECTS, and nesting against VH_OPENPI_MAX_DEPTH.
 */
static uint64_t read_be(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

static int check_structure(const uint8_t *msg, size_t len, char *why, size_t why_size)
{
    uint64_t left[VH_OPENPI_MAX_DEPTH + 1]; /* elements still to read at each open level */
    unsigned depth = 0;
    left[0] = 1;                            /* the top-level object */
    uint64_t objects = 0;
    size_t pos = 0;
    while (depth > 0 || left[0] > 0) {
        if (left[depth] == 0) {             /* this container is complete */
            depth--;
            continue;
        }
        left[depth]--;
        if (pos >= len) return fail(why, why_size, "truncated msgpack: the message ends inside a map or array");
        if (++objects > VH_OPENPI_MAX_OBJECTS)
            return fail(why, why_size, "the message holds more than %u msgpack objects", VH_OPENPI_MAX_OBJECTS);
        const uint8_t b = msg[pos++];
        uint64_t payload = 0;   /* bytes that follow the header */
        uint64_t children = 0;  /* elements of a map (keys and values) or array */
        unsigned lenbytes = 0;  /* width of a str/bin/ext/array/map length field */
        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
            /* fixint, nil, bool: the byte is the value */
        } else if (b <= 0x8f) {
            children = 2u * (b & 0x0fu);
        } else if (b <= 0x9f) {
            children = b & 0x0fu;
        } else if (b <= 0xbf) {
            payload = b & 0x1fu;
        } else {
            switch (b) {
            case 0xc4: case 0xd9: lenbytes = 1; break;             /* bin8, str8 */
            case 0xc5: case 0xda: lenbytes = 2; break;             /* bin16, str16 */
            case 0xc6: case 0xdb: lenbytes = 4; break;             /* bin32, str32 */
            case 0xc7: lenbytes = 1; payload = 1; break;           /* ext8: length, type */
            case 0xc8: lenbytes = 2; payload = 1; break;
            case 0xc9: lenbytes = 4; payload = 1; break;
            case 0xca: payload = 4; break;                         /* float32 */
            case 0xcb: payload = 8; break;                         /* float64 */
            case 0xcc: case 0xd0: payload = 1; break;              /* (u)int8 */
            case 0xcd: case 0xd1: payload = 2; break;
            case 0xce: case 0xd2: payload = 4; break;
            case 0xcf: case 0xd3: payload = 8; break;
            case 0xd4: payload = 2; break;                         /* fixext 1..16: type + data */
            case 0xd5: payload = 3; break;
            case 0xd6: payload = 5; break;
            case 0xd7: payload = 9; break;
            case 0xd8: payload = 17; break;
            case 0xdc: case 0xdd: case 0xde: case 0xdf:            /* array16/32, map16/32 */
                lenbytes = (b == 0xdc || b == 0xde) ? 2 : 4;
                break;
            default:
                return fail(why, why_size, "malformed msgpack: byte 0x%02x at offset %zu is not a type", b, pos - 1);
            }
        }
        if (lenbytes) {
            if (len - pos < lenbytes) return fail(why, why_size, "truncated msgpack: a length field is cut off");
            const uint64_t n = read_be(msg + pos, lenbytes);
            pos += lenbytes;
            if (b >= 0xdc) children = (b >= 0xde) ? 2 * n : n;
            else payload += n;
        }
        if (payload > len - pos)
            return fail(why, why_size, "truncated msgpack: a value of %llu bytes at offset %zu runs past the "
                        "message's end (%zu bytes)", (unsigned long long)payload, pos, len);
        pos += (size_t)payload;
        if (children) {
            /* every element still owed by this and the enclosing containers needs a byte */
            uint64_t owed = children;
            for (unsigned d = 0; d <= depth; d++) owed += left[d];
            if (owed > len - pos)
                return fail(why, why_size, "malformed msgpack: a map or array declares %llu elements but "
                            "only %zu bytes remain", (unsigned long long)children, len - pos);
            if (depth == VH_OPENPI_MAX_DEPTH)
                return fail(why, why_size, "msgpack nested deeper than %u levels", VH_OPENPI_MAX_DEPTH);
            left[++depth] = children;
        }
    }
    if (pos != len)
        return fail(why, why_size, "%zu bytes follow the observation's msgpack object", len - pos);
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * Reading the parsed objects.
 */
/* The bytes of a str or bin object; false for anything else. */
static bool bytes_of(const msgpack_object *o, const char **p, size_t *n)
{
    if (o->type == MSGPACK_OBJECT_STR) {
        *p = o->via.str.ptr;
        *n = o->via.str.size;
        return true;
    }
    if (o->type == MSGPACK_OBJECT_BIN) {
        *p = o->via.bin.ptr;
        *n = o->via.bin.size;
        return true;
    }
    return false;
}

static bool key_is_n(const msgpack_object *key, const char *name, size_t name_len)
{
    const char *p;
    size_t n;
    return bytes_of(key, &p, &n) && n == name_len && (n == 0 || !memcmp(p, name, n));
}


static const char *type_name(const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "a bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "an integer";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return "a float";
    case MSGPACK_OBJECT_STR: return "a string";
    case MSGPACK_OBJECT_ARRAY: return "an array";
    case MSGPACK_OBJECT_MAP: return "a map";
    case MSGPACK_OBJECT_BIN: return "bytes";
    case MSGPACK_OBJECT_EXT: return "a msgpack ext";
    }
    return "an unknown msgpack type";
}

/* The value under the key name[0 .. name_len) in a map: 0 found (*out set), 1 absent, -1 the key
 * occurs twice. */
static int map_get_n(const msgpack_object *map, const char *name, size_t name_len, const msgpack_object **out)
{
    *out = NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        if (!key_is_n(&map->via.map.ptr[i].key, name, name_len)) continue;
        if (*out) return -1;
        *out = &map->via.map.ptr[i].val;
    }
    return *out ? 0 : 1;
}

static int map_get(const msgpack_object *map, const char *name, const msgpack_object **out)
{
    return map_get_n(map, name, strlen(name), out);
}

/* The first of a comma-separated list of keys ("observation/image,image") the map has: as map_get,
 * and *which / *which_len name the key found. */
static int map_get_any(const msgpack_object *map, const char *names, const msgpack_object **out,
                       const char **which, int *which_len)
{
    for (const char *k = names;;) {
        const char *comma = strchr(k, ',');
        const size_t n = comma ? (size_t)(comma - k) : strlen(k);
        *which = k;
        *which_len = n > 200 ? 200 : (int)n;
        int found = map_get_n(map, k, n, out);
        if (found <= 0 || !comma) return found;
        k = comma + 1;
    }
}

/* "'a', 'b', ..." of a map's string keys, for messages about a missing key. */
static void list_keys(const msgpack_object *map, char *out, size_t out_size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < map->via.map.size && used + 1 < out_size; i++) {
        const char *p;
        size_t n;
        if (!bytes_of(&map->via.map.ptr[i].key, &p, &n)) continue;
        int w = snprintf(out + used, out_size - used, "%s'%.*s'", used ? ", " : "", n > 40 ? 40 : (int)n, p);
        if (w < 0) break;
        used += (size_t)w;
    }
    if (used >= out_size && out_size > 4) memcpy(out + out_size - 4, "...", 4);
}

/* A numpy scalar: {__npgeneric__: True, data: value, dtype: "..."}; NULL if `o` is not one. */
static const msgpack_object *npgeneric_value(const msgpack_object *o)
{
    const msgpack_object *flag, *data;
    if (o->type != MSGPACK_OBJECT_MAP || map_get(o, "__npgeneric__", &flag) != 0) return NULL;
    if (flag->type != MSGPACK_OBJECT_BOOLEAN || !flag->via.boolean) return NULL;
    return map_get(o, "data", &data) == 0 ? data : NULL;
}

/* A text field (prompt, unnorm_key): a str, or a numpy str_ scalar. Returns a malloc'd copy. */
static int decode_text(const msgpack_object *o, const char *key, size_t max_bytes, char **out, char *why,
                       size_t why_size)
{
    const msgpack_object *scalar = npgeneric_value(o);
    if (scalar) o = scalar;
    if (o->type != MSGPACK_OBJECT_STR)
        return fail(why, why_size, "'%s' must be a string, got %s", key, type_name(o));
    const size_t n = o->via.str.size;
    if (n > max_bytes) return fail(why, why_size, "'%s' is %zu bytes long; at most %zu are accepted", key, n, max_bytes);
    if (n && memchr(o->via.str.ptr, '\0', n)) return fail(why, why_size, "'%s' contains a NUL character", key);
    char *copy = malloc(n + 1);
    if (!copy) return fail(why, why_size, "out of memory copying '%s'", key);
    if (n) memcpy(copy, o->via.str.ptr, n);
    copy[n] = '\0';
    *out = copy;
    return 0;
}

/* The image: a msgpack_numpy ndarray of uint8, H x W x 3, or 3 x H x W as openpi's LIBERO client
 * may send it (openpi's own LIBERO transform takes shape[0] == 3 as channels-first; so do we). */
static int decode_image(const msgpack_object *o, const char *key, vh_openpi_observation *obs, char *why,
                        size_t why_size)
{
    const msgpack_object *flag, *data, *dtype, *shape;
    if (o->type != MSGPACK_OBJECT_MAP)
        return fail(why, why_size, "'%s' must be a numpy array (a msgpack_numpy __ndarray__ map), got %s", key,
                    type_name(o));
    if (npgeneric_value(o)) return fail(why, why_size, "'%s' is a numpy scalar, not an image array", key);
    if (map_get(o, "__ndarray__", &flag) != 0 || flag->type != MSGPACK_OBJECT_BOOLEAN || !flag->via.boolean)
        return fail(why, why_size, "'%s' must be a numpy array: its map lacks __ndarray__: True", key);
    if (map_get(o, "data", &data) != 0 || map_get(o, "dtype", &dtype) != 0 || map_get(o, "shape", &shape) != 0)
        return fail(why, why_size, "'%s': a numpy array needs exactly one each of data, dtype and shape", key);

    const char *dt;
    size_t dt_len;
    if (!bytes_of(dtype, &dt, &dt_len)) return fail(why, why_size, "'%s': dtype must be a string", key);
    /* numpy writes uint8 as "|u1" (byte order is meaningless for one byte) */
    const bool is_u8 = dt_len == 3 && (dt[0] == '|' || dt[0] == '<' || dt[0] == '>' || dt[0] == '=') &&
                       dt[1] == 'u' && dt[2] == '1';
    if (!is_u8)
        return fail(why, why_size, "'%s' has dtype '%.*s'; send uint8 pixels ('|u1', 0..255 RGB)", key,
                    dt_len > 16 ? 16 : (int)dt_len, dt);

    if (shape->type != MSGPACK_OBJECT_ARRAY)
        return fail(why, why_size, "'%s': shape must be an array, got %s", key, type_name(shape));
    uint64_t dims[3];
    const uint32_t rank = shape->via.array.size;
    if (rank != 3)
        return fail(why, why_size, "'%s' has %u dimensions; an image is H x W x 3 (or 3 x H x W)", key, rank);
    for (uint32_t i = 0; i < rank; i++) {
        const msgpack_object *d = &shape->via.array.ptr[i];
        if (d->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return fail(why, why_size, "'%s': shape[%u] must be a non-negative integer, got %s", key, i,
                        d->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? "a negative one" : type_name(d));
        dims[i] = d->via.u64;
    }
    uint64_t h, w;
    if (dims[0] == 3) {
        obs->channels_first = 1;
        h = dims[1];
        w = dims[2];
    } else if (dims[2] == 3) {
        h = dims[0];
        w = dims[1];
    } else {
        return fail(why, why_size, "'%s' has shape [%llu, %llu, %llu]; an image is H x W x 3 RGB (or 3 x H x W)",
                    key, (unsigned long long)dims[0], (unsigned long long)dims[1], (unsigned long long)dims[2]);
    }
    if (h < 1 || w < 1 || h > VH_OPENPI_MAX_IMAGE_SIDE || w > VH_OPENPI_MAX_IMAGE_SIDE)
        return fail(why, why_size, "'%s' is %llu x %llu pixels; each side must be 1..%u", key, (unsigned long long)h,
                    (unsigned long long)w, VH_OPENPI_MAX_IMAGE_SIDE);

    const char *px;
    size_t px_len;
    if (!bytes_of(data, &px, &px_len)) return fail(why, why_size, "'%s': data must be bytes, got %s", key, type_name(data));
    const uint64_t want = h * w * 3; /* at most 16384^2 * 3: no overflow */
    if (px_len != want)
        return fail(why, why_size, "'%s': shape says %llu bytes of pixels, data holds %zu", key,
                    (unsigned long long)want, px_len);
    obs->height = (uint32_t)h;
    obs->width = (uint32_t)w;
    if (!obs->channels_first) {
        obs->rgb = (const uint8_t *)px;
        return 0;
    }
    /* planes R, G, B -> interleaved rows */
    uint8_t *rgb = malloc((size_t)want);
    if (!rgb) return fail(why, why_size, "out of memory transposing a %llu x %llu image", (unsigned long long)h,
                          (unsigned long long)w);
    const size_t plane = (size_t)(h * w);
    const uint8_t *src = (const uint8_t *)px;
    for (size_t i = 0; i < plane; i++) {
        rgb[3 * i + 0] = src[i];
        rgb[3 * i + 1] = src[plane + i];
        rgb[3 * i + 2] = src[2 * plane + i];
    }
    obs->owned_rgb = rgb;
    obs->rgb = rgb;
    return 0;
}

static int decode_fields(const msgpack_object *top, const vh_openpi_keys *keys, vh_openpi_observation *obs,
                         char *why, size_t why_size)
{
    if (top->type != MSGPACK_OBJECT_MAP)
        return fail(why, why_size, "an observation is a msgpack map (a dict), got %s", type_name(top));
    const msgpack_object *image, *prompt, *unnorm;
    const char *image_key;
    int image_key_len;
    int found = map_get_any(top, keys->image, &image, &image_key, &image_key_len);
    if (found < 0) return fail(why, why_size, "the key '%.*s' occurs twice", image_key_len, image_key);
    if (found > 0) {
        char present[256];
        list_keys(top, present, sizeof present);
        return fail(why, why_size, "the observation has no image under '%s' (its keys: %s); vh-serve --image-key "
                    "names the image's key", keys->image, present[0] ? present : "none");
    }
    char image_name[208];
    snprintf(image_name, sizeof image_name, "%.*s", image_key_len, image_key);
    if (decode_image(image, image_name, obs, why, why_size)) return -1;

    found = map_get(top, keys->prompt, &prompt);
    if (found < 0) return fail(why, why_size, "the key '%s' occurs twice", keys->prompt);
    if (found == 0) {
        if (decode_text(prompt, keys->prompt, VH_OPENPI_MAX_PROMPT_BYTES, &obs->prompt, why, why_size)) return -1;
    } else if (keys->default_prompt) {
        obs->prompt = strdup(keys->default_prompt);
        if (!obs->prompt) return fail(why, why_size, "out of memory");
    } else {
        return fail(why, why_size, "the observation has no '%s' (the task text); vh-serve --prompt-key names it, "
                    "--default-prompt supplies one", keys->prompt);
    }

    found = map_get(top, "unnorm_key", &unnorm);
    if (found < 0) return fail(why, why_size, "the key 'unnorm_key' occurs twice");
    if (found == 0 && unnorm->type != MSGPACK_OBJECT_NIL &&
        decode_text(unnorm, "unnorm_key", 256, &obs->unnorm_key, why, why_size))
        return -1;
    return 0;
}

int vh_openpi_decode_observation(const uint8_t *msg, size_t len, const vh_openpi_keys *keys,
                                 vh_openpi_observation *obs, char *why, size_t why_size)
{
    if (!obs) return fail(why, why_size, "no observation to fill");
    memset(obs, 0, sizeof *obs);
    if (!msg || !keys || !keys->image || !keys->prompt) return fail(why, why_size, "invalid arguments");
    if (len == 0) return fail(why, why_size, "empty message");
    if (check_structure(msg, len, why, why_size)) return -1;

    msgpack_unpacked parsed;
    msgpack_unpacked_init(&parsed);
    size_t offset = 0;
    msgpack_unpack_return r = msgpack_unpack_next(&parsed, (const char *)msg, len, &offset);
    int rc;
    if (r == MSGPACK_UNPACK_NOMEM_ERROR) rc = fail(why, why_size, "out of memory parsing the msgpack message");
    else if (r != MSGPACK_UNPACK_SUCCESS) rc = fail(why, why_size, "malformed msgpack (msgpack-c: %d)", (int)r);
    else if (offset != len) rc = fail(why, why_size, "%zu bytes follow the observation's msgpack object", len - offset);
    else rc = decode_fields(&parsed.data, keys, obs, why, why_size);
    /* strings and bins point into msg, not into the zone freed here */
    msgpack_unpacked_destroy(&parsed);
    if (rc) vh_openpi_observation_free(obs);
    return rc;
}

void vh_openpi_observation_free(vh_openpi_observation *obs)
{
    if (!obs) return;
    free(obs->owned_rgb);
    free(obs->prompt);
    free(obs->unnorm_key);
    memset(obs, 0, sizeof *obs);
}

/* ------------------------------------------------------------------------------------------------
 * Encoding.
 */
static int buffer_write(void *data, const char *bytes, size_t n)
{
    vh_openpi_buffer *b = data;
    if (n > SIZE_MAX - b->size) return -1;
    if (b->size + n > b->capacity) {
        size_t cap = b->capacity ? b->capacity : 256;
        while (cap < b->size + n) {
            if (cap > SIZE_MAX / 2) return -1;
            cap *= 2;
        }
        uint8_t *grown = realloc(b->data, cap);
        if (!grown) return -1;
        b->data = grown;
        b->capacity = cap;
    }
    memcpy(b->data + b->size, bytes, n);
    b->size += n;
    return 0;
}

static int buffer_reset(vh_openpi_buffer *b)
{
    b->size = 0;
    if (!b->headroom) return 0;
    static const char zeros[64];
    size_t left = b->headroom;
    while (left) {
        size_t n = left < sizeof zeros ? left : sizeof zeros;
        if (buffer_write(b, zeros, n)) return -1;
        left -= n;
    }
    return 0;
}

static int pack_text(msgpack_packer *pk, const char *s)
{
    const size_t n = strlen(s);
    return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

static int pack_key_bin(msgpack_packer *pk, const char *s)
{
    const size_t n = strlen(s);
    return msgpack_pack_bin(pk, n) || msgpack_pack_bin_body(pk, s, n);
}

static int pack_text_entry(msgpack_packer *pk, const char *key, const char *value)
{
    return pack_text(pk, key) || (value ? pack_text(pk, value) : msgpack_pack_nil(pk));
}

static int pack_uint_entry(msgpack_packer *pk, const char *key, uint64_t value)
{
    return pack_text(pk, key) || msgpack_pack_uint64(pk, value);
}

int vh_openpi_encode_metadata(const vh_openpi_metadata *m, vh_openpi_buffer *out)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, buffer_write);
    if (buffer_reset(out)) return -1;
    int bad = msgpack_pack_map(&pk, 13) ||
              pack_text_entry(&pk, "server", "vh-serve") ||
              pack_text_entry(&pk, "vlahybrid_version", m->server_version) ||
              pack_text_entry(&pk, "model", m->model) ||
              pack_text_entry(&pk, "model_path", m->model_path) ||
              pack_uint_entry(&pk, "action_dim", m->action_dim) ||
              pack_uint_entry(&pk, "action_horizon", 1) ||
              pack_text_entry(&pk, "actions_dtype", m->actions_dtype) ||
              pack_text_entry(&pk, "backends", m->backends) ||
              pack_text_entry(&pk, "execution_mode", m->execution_mode) ||
              pack_uint_entry(&pk, "frames_in_flight", m->frames_in_flight) ||
              pack_text_entry(&pk, "unnorm_key", m->unnorm_key) ||
              pack_uint_entry(&pk, "max_message_bytes", m->max_message_bytes) ||
              /* which observation keys the server reads, and what it expects there */
              pack_text(&pk, "observation_keys") || msgpack_pack_map(&pk, 4) ||
              pack_text_entry(&pk, "image", m->keys->image) ||
              pack_text_entry(&pk, "prompt", m->keys->prompt) ||
              pack_text_entry(&pk, "image_format", "uint8 HxWx3 RGB, or 3xHxW") ||
              pack_text_entry(&pk, "default_prompt", m->keys->default_prompt);
    return bad ? -1 : 0;
}

int vh_openpi_encode_action(const vh_openpi_action *a, vh_openpi_buffer *out)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, buffer_write);
    if (buffer_reset(out)) return -1;
    const size_t item = a->as_float32 ? 4 : 8;
    const size_t data_bytes = (size_t)a->action_dim * item;
    int bad = msgpack_pack_map(&pk, 3) ||
              pack_text(&pk, "actions") || msgpack_pack_map(&pk, 4) ||
              pack_key_bin(&pk, "__ndarray__") || msgpack_pack_true(&pk) ||
              pack_key_bin(&pk, "data") || msgpack_pack_bin(&pk, data_bytes);
    for (uint32_t i = 0; !bad && i < a->action_dim; i++) {
        if (a->as_float32) {
            const float f = (float)a->values[i];
            bad = msgpack_pack_bin_body(&pk, &f, sizeof f);
        } else {
            bad = msgpack_pack_bin_body(&pk, &a->values[i], sizeof a->values[i]);
        }
    }
    bad = bad ||
          pack_key_bin(&pk, "dtype") || pack_text(&pk, a->as_float32 ? "<f4" : "<f8") ||
          /* an action chunk of one step: [horizon, action_dim] as openpi's policies return */
          pack_key_bin(&pk, "shape") || msgpack_pack_array(&pk, 2) || msgpack_pack_uint64(&pk, 1) ||
          msgpack_pack_uint64(&pk, a->action_dim) ||
          pack_text(&pk, "policy_timing") || msgpack_pack_map(&pk, 1) ||
          pack_text(&pk, "infer_ms") || msgpack_pack_double(&pk, a->compute_ms) ||
          pack_text(&pk, "server_timing") || msgpack_pack_map(&pk, a->prev_total_ms >= 0 ? 2 : 1) ||
          pack_text(&pk, "infer_ms") || msgpack_pack_double(&pk, a->infer_ms) ||
          (a->prev_total_ms >= 0 && (pack_text(&pk, "prev_total_ms") || msgpack_pack_double(&pk, a->prev_total_ms)));
    return bad ? -1 : 0;
}

void vh_openpi_buffer_free(vh_openpi_buffer *buf)
{
    if (!buf) return;
    free(buf->data);
    buf->data = NULL;
    buf->size = buf->capacity = 0;
}
