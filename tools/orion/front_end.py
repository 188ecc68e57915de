"""The camera front end of an Orion or MindDrive checkpoint: which tensors convert_orion.py and
tools/minddrive/convert_minddrive.py write, and how.

Orion.pth holds the front end under the released module names: img_backbone.* (EVA-02), Orion's
position_encoder.*, the modules Orion.__init__ hands both heads (query_pos, time_embedding,
ego_pose_pe: stored at the top and again under each head), and the heads pts_bbox_head.* (OrionHead)
and map_head.* (OrionHeadM), whose cls/reg branches are one module listed six times. The converter
keeps the released names and writes each value once:

  - the shared modules at the top only; each head's copy must equal it
  - branch 0 of cls_branches / reg_branches only; the other five must equal it
  - not written: what the plan never reads (the motion decoder and its branches, the traffic-light
    branch), the loss constants (code_weights, match_costs; pc_range goes to config.json), and the
    buffers the library recomputes (the ViT's RoPE tables, coords_d, position_range)

img_backbone.* takes --dtype (the agent runs the ViT under fp16 autocast); everything else is F32
(the agent's heads run in float32). See doc/orion-converter.md.

MindDrive (xiaomi-mlab/MindDrive @ 1a4085d: Minddrive, MinddriveHead, MinddriveHeadM) has the same
front end under the same names, the heads' out_dims the Qwen hidden size; its det head adds forecast
modules the plan never reads either (pos_mlp_sa, and in the 0.5B model lane_encoder,
motion_map_decoder and pos_mlp), which NOT_WRITTEN lists next to Orion's (an Orion checkpoint has
none of them). See doc/minddrive-converter.md.
"""
import re

SHARED = ("query_pos.", "time_embedding.", "ego_pose_pe.")
HEADS = ("pts_bbox_head.", "map_head.")
PREFIXES = ("img_backbone.", "position_encoder.") + SHARED + HEADS

NOT_WRITTEN = (
    (re.compile(r"^pts_bbox_head\.(motion_decoder|motion_mode_query|traj_branches|traj_cls_branches|"
                r"tl_branches|pos_mlp_sa)\."), "agent forecasts and traffic lights: nothing the plan reads"),
    # MindDrive's 0.5B det head: the forecasts' lane interaction (MinddriveHead's motion_map_decoder
    # branch, feeding all_traj_preds only)
    (re.compile(r"^pts_bbox_head\.(motion_map_decoder|lane_encoder|pos_mlp)\."),
     "agent forecasts (MindDrive's map interaction): nothing the plan reads"),
    (re.compile(r"^(pts_bbox_head|map_head)\.(code_weights|match_costs)$"), "loss constants"),
    (re.compile(r"^(pts_bbox_head|map_head)\.pc_range$"), "in config.json (front_end.pc_range)"),
    (re.compile(r"^img_backbone\.(rope_win|rope_glb|blocks\.\d+\.attn\.rope)\.freqs_(cos|sin)$"),
     "RoPE tables, recomputed"),
    (re.compile(r"^(coords_d|position_range)$"), "LID depths and the position range, in config.json"),
)
BRANCH = re.compile(r"^(pts_bbox_head|map_head)\.(cls_branches|reg_branches)\.(\d+)\.(.+)$")

# A front end is complete when these are there (the ViT's blocks are checked one by one).
REQUIRED = (
    "img_backbone.patch_embed.proj.weight", "img_backbone.patch_embed.proj.bias", "img_backbone.pos_embed",
    "position_encoder.0.weight", "position_encoder.0.bias", "position_encoder.2.weight", "position_encoder.2.bias",
    "query_pos.0.weight", "query_pos.2.weight", "time_embedding.0.weight", "time_embedding.1.weight",
    "ego_pose_pe.reduce.0.weight", "ego_pose_pe.gamma.weight", "ego_pose_pe.beta.weight",
    "pts_bbox_head.transformer.query_decoder._layers.0.transformer_layers.0.attn.in_proj_weight",
    "pts_bbox_head.transformer.query_decoder._layers.0.transformer_layers.2.attn.in_proj_weight",
    "pts_bbox_head.memory_decoder_cq._layers.0.transformer_layers.0.attn.in_proj_weight",
    "pts_bbox_head.memory_decoder_mq._layers.0.transformer_layers.0.attn.in_proj_weight",
    "pts_bbox_head.input_projection.weight", "pts_bbox_head.output_projection.weight",
    "pts_bbox_head.reference_points.weight", "pts_bbox_head.pseudo_reference_points.weight",
    "pts_bbox_head.query_embedding.weight", "pts_bbox_head.memory_query.weight",
    "pts_bbox_head.scene_time_embedding.0.weight", "pts_bbox_head.can_bus_embed.0.weight",
    "pts_bbox_head.can_bus_embed.2.weight", "pts_bbox_head.cls_branches.0.6.weight",
    "pts_bbox_head.reg_branches.0.4.weight",
    "map_head.transformer.query_decoder._layers.0.transformer_layers.0.attn.in_proj_weight",
    "map_head.input_projection.weight", "map_head.output_projection.weight",
    "map_head.reference_points_lane.weight", "map_head.points_embedding_lane.weight",
    "map_head.instance_embedding_lane.weight", "map_head.query_embedding.weight",
    "map_head.cls_branches.0.6.weight", "map_head.reg_branches.0.4.weight",
)
VIT_BLOCK = ("norm1.weight", "norm1.bias", "attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight",
             "attn.q_bias", "attn.v_bias", "attn.proj.weight", "attn.proj.bias", "norm2.weight", "norm2.bias",
             "mlp.w1.weight", "mlp.w1.bias", "mlp.w2.weight", "mlp.w2.bias", "mlp.ffn_ln.weight",
             "mlp.ffn_ln.bias", "mlp.w3.weight", "mlp.w3.bias")


def is_front_end(key):
    return key.startswith(PREFIXES) or key in ("coords_d", "position_range")


def vit_depth(sd):
    """Blocks of the ViT: one past the highest img_backbone.blocks.N."""
    return 1 + max([int(m.group(1)) for m in map(re.compile(r"^img_backbone\.blocks\.(\d+)\.").match, sd) if m],
                   default=-1)


def missing(sd):
    """The keys a complete front end lacks (empty: complete)."""
    out = [k for k in REQUIRED if k not in sd]
    for i in range(vit_depth(sd)):
        out += ["img_backbone.blocks.%d.%s" % (i, n) for n in VIT_BLOCK if "img_backbone.blocks.%d.%s" % (i, n) not in sd]
    return out


def plan(sd, same, ConvertError, detector="Orion"):
    """[(source key, written name, "vit" | "head")] and {key: why not written}; `same(a, b)` compares
    two tensors exactly. Raises ConvertError where a copy differs from what it copies (`detector`:
    the class whose __init__ hands the heads the shared modules, for the message)."""
    written, dropped = [], {}
    for k in sorted(sd):
        if not is_front_end(k):
            continue
        why = next((w for rx, w in NOT_WRITTEN if rx.search(k)), None)
        if why:
            dropped[k] = why
            continue
        head = next((h for h in HEADS for s in SHARED if k.startswith(h + s)), None)
        if head is not None:
            top = k[len(head):]
            if top not in sd:
                raise ConvertError("%s has no top-level %s (%s.__init__ hands the heads one module)"
                                   % (k, top, detector))
            if not same(sd[k], sd[top]):
                raise ConvertError("%s differs from %s: the heads share %s's module" % (k, top, detector))
            dropped[k] = "a copy of %s" % top
            continue
        m = BRANCH.match(k)
        if m and m.group(3) != "0":
            first = "%s.%s.0.%s" % m.group(1, 2, 4)
            if first not in sd or not same(sd[k], sd[first]):
                raise ConvertError("%s differs from %s: the six branches are one module" % (k, first))
            dropped[k] = "a copy of %s" % first
            continue
        written.append((k, k, "vit" if k.startswith("img_backbone.") else "head"))
    return written, dropped


def select(sd, mode, same, ConvertError, log, warn, detector="Orion"):
    """--front-end `mode` (auto | yes | no) on the state dict: plan()'s (written, dropped) when the
    front end is to be written, else None, having said why (auto: none in the checkpoint, or an
    incomplete one, warned; no: left out). Raises ConvertError under yes when it is incomplete."""
    present = any(is_front_end(k) for k in sd)
    if mode == "no" or (mode == "auto" and not present):
        log("camera front end: not written (%s)" % ("--front-end no" if present else "none in the checkpoint"))
        return None
    lacking = missing(sd)
    if lacking:
        what = "incomplete camera front end: %d of its tensors missing (%s%s)" % (
            len(lacking), ", ".join(lacking[:4]), ", ..." if len(lacking) > 4 else "")
        if mode == "yes":
            raise ConvertError(what)
        warn(what + "; not written: the model runs from precomputed vision tokens")
        return None
    return plan(sd, same, ConvertError, detector)


def report(written, dropped, log):
    """The stderr line of a written front end: its tensors, and what was not written, by reason."""
    reasons = {}
    for why in dropped.values():
        why = "copies of shared modules" if why.startswith("a copy of") else why
        reasons[why] = reasons.get(why, 0) + 1
    log("camera front end: %d tensors written; not written: %s" % (
        len(written), "; ".join("%d %s" % (n, w) for w, n in sorted(reasons.items()))))


def heads_config(det, mp, cfg_get):
    """What the heads' shapes do not say, from the agent config's OrionHead / OrionHeadM arguments with
    the classes' defaults (orion_head.py, orion_head_map.py)."""
    def transformer(cfg, where):
        t = cfg.get("transformer") if isinstance(cfg.get("transformer"), dict) else {}
        return cfg_get(t, "num_heads", 8, where + ".transformer")
    return {
        "det": {"num_heads": transformer(det, "pts_bbox_head"),
                "memory_len": cfg_get(det, "memory_len", 1024, "pts_bbox_head"),
                "topk_proposals": cfg_get(det, "topk_proposals", 256, "pts_bbox_head"),
                "num_propagated": cfg_get(det, "num_propagated", 256, "pts_bbox_head"),
                "scene_memory_len": cfg_get(det, "scence_memory_len", 256, "pts_bbox_head"),
                "can_bus_len": cfg_get(det, "can_bus_len", 2, "pts_bbox_head")},
        "map": {"num_heads": transformer(mp, "map_head"),
                "memory_len": cfg_get(mp, "memory_len", 1000, "map_head"),
                "topk_proposals": cfg_get(mp, "topk_proposals", 500, "map_head"),
                "num_lanes_one2one": cfg_get(mp, "num_lanes_one2one", 0, "map_head")},
    }


def config(sd, model_cfg, shape_of, cfg_get, values):
    """config.json's front_end: the backbone's geometry (the checkpoint's shapes, the agent config's
    EVAViT arguments with the class defaults), the heads' point-cloud range, the LID depths."""
    vit = model_cfg.get("img_backbone") if isinstance(model_cfg.get("img_backbone"), dict) else {}
    w = shape_of(sd, "img_backbone.patch_embed.proj.weight")
    depth = vit_depth(sd)
    det = model_cfg.get("pts_bbox_head") if isinstance(model_cfg.get("pts_bbox_head"), dict) else {}
    mp = model_cfg.get("map_head") if isinstance(model_cfg.get("map_head"), dict) else {}
    coder = det.get("bbox_coder") if isinstance(det.get("bbox_coder"), dict) else {}
    # OrionHead's range is its bbox_coder's, OrionHeadM's its own argument (the agent: both
    # point_cloud_range); else the stored parameter, float32, to 6 decimals
    pc = cfg_get(coder, "pc_range", None, "pts_bbox_head.bbox_coder") or cfg_get(mp, "pc_range", None, "map_head")
    if pc is None and "pts_bbox_head.pc_range" in sd:
        pc = [round(v, 6) for v in values("pts_bbox_head.pc_range")]
    out = {
        "backbone": {"embed_dim": w[0], "patch_size": w[2], "depth": depth,
                     "num_heads": cfg_get(vit, "num_heads", 12, "img_backbone"),
                     "img_size": cfg_get(vit, "img_size", 1024, "img_backbone"),
                     "window_size": cfg_get(vit, "window_size", 0, "img_backbone"),
                     "window_block_indexes": list(cfg_get(vit, "window_block_indexes", (), "img_backbone")),
                     "mlp_hidden": shape_of(sd, "img_backbone.blocks.0.mlp.w1.weight")[0]},
        "pc_range": list(pc) if pc is not None else [-51.2, -51.2, -5.0, 51.2, 51.2, 3.0],
    }
    out["heads"] = heads_config(det, mp, cfg_get)
    if "position_range" in sd:
        out["position_range"] = values("position_range")
    if "coords_d" in sd:
        out["depth_num"] = shape_of(sd, "coords_d")[0]
    return out
