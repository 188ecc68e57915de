"""A vh_frame from predict()/submit()'s arguments, with the objects that own its memory."""
import ctypes

from . import _library as L
from . import _structs as S
from ._image import Pixels, floats

INT_RANGES = {
    "tag": (0, 2**64 - 1), "timestamp_ns": (-2**63, 2**63 - 1), "sequence": (0, 2**64 - 1),
    "deadline_ns": (-2**63, 2**63 - 1), "command": (-2**31, 2**31 - 1),
    "command_timestamp_ns": (-2**63, 2**63 - 1), "stream": (0, 2**64 - 1),
}
FIELDS = tuple(INT_RANGES) + ("unnorm_key", "cameras", "lidar2img", "intrinsics", "extrinsics", "ego_pose",
                              "can_bus", "vision_tokens", "noise")


def integer(name, value, lo, hi):
    """An integer argument checked against its C type's range (ctypes would wrap it silently)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name}: an integer, not {type(value).__name__}")
    value = value.__index__()
    if not lo <= value <= hi:
        raise ValueError(f"{name} = {value} is outside {lo} .. {hi}")
    return value


def _camera_list(cameras):
    """[(name or None, image)] from a dict {name: image} or a sequence of images or (name, image)."""
    if isinstance(cameras, dict):
        return list(cameras.items())
    return [c if isinstance(c, tuple) else (None, c) for c in cameras]


def _text(name, value):
    """A str argument as the UTF-8 bytes a const char * field takes."""
    if not isinstance(value, str):
        raise TypeError(f"{name}: a str, not {type(value).__name__}")
    encoded = value.encode("utf-8")
    if b"\0" in encoded:
        raise ValueError(f"{name} contains a NUL character")
    return encoded


def build(image, instruction, fields):
    """(vh_frame, keep): `keep` holds every buffer the frame points into."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise TypeError(f"unknown frame field(s): {', '.join(sorted(unknown))}; known: {', '.join(FIELDS)}")
    f = L.new(S.Frame)
    keep = []
    if image is not None:
        px = Pixels(image)
        keep.append(px)
        f.rgb, f.width, f.height, f.stride = px.pointer, px.width, px.height, px.stride
    if instruction is not None:
        encoded = _text("instruction", instruction)
        keep.append(encoded)
        f.instruction = encoded
    if fields.get("unnorm_key") is not None:  # the frame's dataset (vh_frame 0.4.0), else the session's
        encoded = _text("unnorm_key", fields["unnorm_key"])
        keep.append(encoded)
        f.unnorm_key = encoded
    for name, (lo, hi) in INT_RANGES.items():
        if fields.get(name) is not None:
            setattr(f, name, integer(name, fields[name], lo, hi))

    n_cameras = 0
    if fields.get("cameras") is not None:
        cams = _camera_list(fields["cameras"])
        n_cameras = len(cams)
        table = (S.CameraImage * max(n_cameras, 1))()
        for i, (name, cam_image) in enumerate(cams):
            px = Pixels(cam_image, what=f"cameras[{i}]")
            keep.append(px)
            table[i].rgb, table[i].width, table[i].height, table[i].stride = px.pointer, px.width, px.height, px.stride
            if name is not None:
                encoded = str(name).encode("utf-8")
                keep.append(encoded)
                table[i].name = encoded
        keep.append(table)
        f.n_cameras = n_cameras
        f.cameras = ctypes.cast(table, ctypes.POINTER(S.CameraImage))
    for name in ("lidar2img", "intrinsics", "extrinsics"):
        if fields.get(name) is not None:
            array, _ = floats(fields[name], name)
            if array.size != 16 * n_cameras or n_cameras == 0:
                raise ValueError(f"{name}: {array.size} floats; expected a 4 x 4 matrix for each of the "
                                 f"{n_cameras} cameras")
            array, pointer = floats(array.reshape(n_cameras, 16), name)
            keep.append(array)
            setattr(f, name, pointer)
    if fields.get("ego_pose") is not None:
        array, pointer = floats(fields["ego_pose"], "ego_pose")
        if array.size != 16:
            raise ValueError(f"ego_pose: {array.size} floats; expected a 4 x 4 matrix")
        keep.append(array)
        f.ego_pose = pointer
    if fields.get("can_bus") is not None:
        array, pointer = floats(fields["can_bus"], "can_bus", shape=(S.CAN_BUS_FLOATS,))
        keep.append(array)
        f.can_bus = pointer
    if fields.get("vision_tokens") is not None:
        array, pointer = floats(fields["vision_tokens"], "vision_tokens", shape=(None, None))
        keep.append(array)
        f.vision_tokens, f.n_vision_tokens, f.vision_token_width = pointer, array.shape[0], array.shape[1]
    if fields.get("noise") is not None:
        array, pointer = floats(fields["noise"], "noise", shape=(None,))
        keep.append(array)
        f.noise, f.n_noise = pointer, array.shape[0]
    return f, keep
