"""A space's ``calibration:`` key: the calibration file its designs are scored with (``dse calibrate``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["parse_calibration"]


def parse_calibration(ck, raw) -> tuple[str, str]:
    """(the calibration file's path, relative to the space file, from the working directory; its sha256);
    a file that is not a calibration is one line (objectives.Calibration.read)."""
    if raw is None:
        return "", ""
    if not isinstance(raw, str) or not raw.strip():
        ck.fail("calibration", f"must be the path of a calibration file (dse calibrate), not {type(raw).__name__}")
    from objectives import InputError
    from objectives.calibration import Calibration

    path = Path(raw.strip()).expanduser()
    if not path.is_absolute() and ck.source not in ("<space>", ""):
        path = Path(ck.source).parent / path
    try:
        Calibration.read(path)
    except InputError as exc:
        ck.fail("calibration", str(exc))
    return str(path), hashlib.sha256(path.read_bytes()).hexdigest()
