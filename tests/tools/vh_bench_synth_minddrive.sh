#!/bin/sh
# vh-synth-checkpoint --family minddrive --front-end: a MindDrive folder with the camera front end
# (the same tensors as Orion's, the heads' out_dims the LLM's width), reduced (--vit-layers 1,
# --llm-hidden 64, --llm-layers 1): its config.json's front_end (the converter's members, last, after
# source), the heads' output widths in the safetensors header (64 = the hidden size, F32; the ViT in
# --dtype), then vh-bench loads it in a cpu_generic session and answers a camera frame (six images of
# 320 x 180 from tools/camera_rig.h's rig) and a frame of vision tokens on the same folder, without a
# failure. Bad options exit 2 with a message. No timings are asserted (a camera frame at the agent's
# 640 x 640 ViT geometry takes a few seconds on cpu_generic).
# usage: vh_bench_synth_minddrive.sh VH_SYNTH_CHECKPOINT VH_BENCH QWEN2_TOKENIZER_JSON
set -eu
synth=$1
vh_bench=$2
tokenizer=$3
py=/usr/bin/python3
[ -x "$py" ] || { echo "no $py: skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/built_program.sh"
synth=$(built_program "$synth" "$out")
vh_bench=$(built_program "$vh_bench" "$out")

model=$out/md-front
"$synth" --family minddrive --out "$model" --tokenizer "$tokenizer" --front-end --vit-layers 1 --llm-hidden 64 \
    --llm-layers 1 --no-sync > "$out/synth.txt" 2>&1 || { cat "$out/synth.txt"; exit 1; }
grep -q "camera front end: EVA-02-L 1 blocks at 640 x 640 (bf16), position encoder, det + map heads (F32, out_dims 64)" \
    "$out/synth.txt" || { cat "$out/synth.txt"; exit 1; }

"$py" - "$model" <<'PY'
import json, struct, sys
d = sys.argv[1]
c = json.load(open(d + "/config.json"))
# convert_minddrive.py: a front_end key only with the front end, after source
assert list(c)[-2:] == ["source", "front_end"], list(c)
assert c["model_type"] == "minddrive" and c["text_config"]["hidden_size"] == 64, c["text_config"]
fe = c["front_end"]
assert sorted(fe) == ["backbone", "depth_num", "heads", "pc_range", "position_range"], fe
assert fe["backbone"] == {"embed_dim": 1024, "patch_size": 16, "depth": 1, "num_heads": 16, "img_size": 640,
                          "window_size": 16, "window_block_indexes": [0], "mlp_hidden": 2730}, fe["backbone"]
assert fe["heads"] == {"det": {"num_heads": 8, "memory_len": 600, "topk_proposals": 300, "num_propagated": 300,
                               "scene_memory_len": 256, "can_bus_len": 2},
                       "map": {"num_heads": 8, "memory_len": 600, "topk_proposals": 300,
                               "num_lanes_one2one": 300}}, fe["heads"]
raw = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
want = {"pts_bbox_head.output_projection.weight": ("F32", [64, 256]),
        "pts_bbox_head.can_bus_embed.2.weight": ("F32", [64, 1024]),
        "map_head.output_projection.weight": ("F32", [64, 256]),
        "img_backbone.blocks.0.attn.q_proj.weight": ("BF16", [1024, 1024]),
        "model.embed_tokens.weight": ("BF16", [151661, 64])}
for k, (dt, shape) in want.items():
    assert (h[k]["dtype"], h[k]["shape"]) == (dt, shape), (k, h[k])
assert not any(k.startswith("img_backbone.blocks.1.") for k in h), "more than one ViT block"
# what tools/orion/front_end.py does not write (forecasts, copies, branches 1..5) is not there either
assert not any(".motion_" in k or ".pos_mlp" in k or ".lane_encoder." in k or "_branches.1." in k
               or k.startswith(("pts_bbox_head.query_pos.", "map_head.time_embedding.")) for k in h)
print("config.json's front_end and the heads' widths: ok (%d tensors)" % (len(h) - 1))
PY

bench() { # NAME SOURCE ARGS...
    name=$1 source=$2
    shift 2
    rc=0
    "$vh_bench" --model "$model" --json --backend cpu_generic --frames 1 --warmup 0 "$@" > "$out/$name.json" \
        2> "$out/$name.err" || rc=$?
    [ "$rc" -eq 0 ] || { echo "$name: exit status $rc"; cat "$out/$name.err"; exit 1; }
    "$py" - "$out/$name.json" "$name" "$source" <<'PY'
import json, sys
path, name, source = sys.argv[1:]
r = json.load(open(path))
assert r["family"] == "minddrive" and r["frames"] == 1 and r["failures"] == 0, r
of = r["orion_frames"]
assert of["source"] == source and of["vision_tokens"] == 529 and of["width"] == 64, of
if source == "cameras":
    assert of["cameras"] == 6 and of["camera_width"] == 320 and of["camera_height"] == 180, of
    assert r["vision_ms"]["max"] > 0, r
else:
    assert "cameras" not in of, of
print("%s: %s, %d frame answered (%s)" % (name, source, r["frames"], r["mode"]))
PY
}
bench cameras cameras --camera-size 320x180
bench tokens tokens --frame-source tokens

# the text report names MindDrive's camera frames
"$vh_bench" --model "$model" --frames 1 --warmup 0 --backend cpu_generic --camera-size 200x120 > "$out/text.txt" 2>&1 ||
    { cat "$out/text.txt"; exit 1; }
grep -q "^input    MindDrive: synthetic camera frames, 6 cameras 200 x 120 " "$out/text.txt" ||
    { cat "$out/text.txt"; exit 1; }

refused() { # PROGRAM EXPECTED-MESSAGE ARGS...: exit status 2 and the message
    prog=$1 want=$2
    shift 2
    rc=0
    "$prog" "$@" > /dev/null 2> "$out/refuse.err" || rc=$?
    [ "$rc" -eq 2 ] && grep -qF -- "$want" "$out/refuse.err" ||
        { echo "$prog $*: rc $rc"; cat "$out/refuse.err"; exit 1; }
}
refused "$synth" "--front-end and --vit-layers are for --family orion or minddrive" --dry-run --front-end
refused "$synth" "--vit-layers needs --front-end" --family minddrive --dry-run --vit-layers 2
refused "$vh_bench" "runs on synthetic camera frames, not --image" --model "$model" --image x.png
"$synth" --help | grep -q "Orion, MindDrive: the camera front end too" || { echo "--help: no MindDrive front end"; exit 1; }
echo "ok"
