"""How large one sample may be: an image side whose decoded image fits in this machine's free memory, checked
before a dataset is generated or a loader decodes to it."""

from __future__ import annotations

import psutil

from dataperf.errors import UserError
from dataperf.results import MIB

MAX_IMAGE_SIDE = 16384  # pixels; past this a single decoded image is ~800 MiB


def available_mib() -> float:
    return psutil.virtual_memory().available / MIB


def check_image_side(side: int, option: str = "--image-size", per_pixel_bytes: int = 3) -> None:
    if side < 1:
        raise UserError(f"{option} must be a positive number of pixels, got {side}")
    if side > MAX_IMAGE_SIDE:
        raise UserError(f"{option} {side} is larger than {MAX_IMAGE_SIDE} pixels (one image would need "
                        f"{side * side * per_pixel_bytes / MIB / 1024:.0f} GiB); did you mean a smaller size?")
    need, free = side * side * per_pixel_bytes / MIB, available_mib()
    if need > 0.5 * free:
        raise UserError(f"{option} {side}: one image needs {need:.0f} MiB, more than half the {free:.0f} MiB of "
                        "free memory; use a smaller size")
