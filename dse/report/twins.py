"""Near-twins on a front: designs within :data:`TWIN_TOLERANCE` of each other on every objective.

The default space's front has pairs 0.01% apart that differ only in a checkpoint storage tier the
asynchronous checkpoint hides: two rows a reader has to compare digit by digit to find nothing. A table
shows such a group as one row, "and N more alike", and the recommendation compares its design with the
nearest front design that is not its twin.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["TWIN_TOLERANCE", "twin_groups", "is_twin", "twin_note"]

#: two designs within this share of each other on every objective are one choice: 0.5% is 20-100x narrower
#: than the model's 80% intervals (objectives.training.intervals: +-10% to +-60%) and below what a buyer would
#: trade a storage tier or a fabric for; what tells the twins apart is said in their row
TWIN_TOLERANCE = 0.005


def is_twin(a: Sequence[float], b: Sequence[float], tolerance: float = TWIN_TOLERANCE) -> bool:
    """Whether values ``a`` and ``b`` (one per objective) are within ``tolerance`` of each other on every one."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return False
    scale = np.maximum(np.abs(a), np.abs(b))
    return bool(np.all(np.abs(a - b) <= tolerance * np.where(scale > 0, scale, 1.0)))


def twin_groups(front: pd.DataFrame, objectives: Sequence[str], keep: int | None = None,
                tolerance: float = TWIN_TOLERANCE) -> list[list[int]]:
    """The front's rows (0-based, in its order) in groups of near-twins of each group's first row; every row
    in exactly one group, groups in the order of their first row. ``keep``: a row that heads its group (the
    recommended design), whichever of its twins comes first."""
    values = front[list(objectives)].to_numpy(dtype=np.float64)
    n = len(front)
    order = list(range(n))
    if keep is not None and 0 <= keep < n:  # the kept row claims its twins before anyone else does
        order = [keep] + [i for i in order if i != keep]
    group_of: dict[int, list[int]] = {}
    for i in order:
        if i in group_of:
            continue
        group = [i] + [j for j in range(n) if j != i and j not in group_of and is_twin(values[i], values[j], tolerance)]
        for j in group:
            group_of[j] = group
    heads = {id(g): g for g in group_of.values()}
    return sorted(heads.values(), key=lambda g: min(g))


def twin_note(names: Sequence[str], group: Sequence[int]) -> str:
    """'and 1 more alike: #7 pfs-large' for a group (0-based rows; ``names``: the front's names): each
    twin's number and the words of its name the group's head lacks."""
    if len(group) < 2:
        return ""
    head = set(names[group[0]].replace("·", " ").split())
    said = []
    for j in group[1:]:
        words = [w for w in names[j].replace("·", " ").split() if w not in head]
        said.append(f"#{j + 1}" + (f" {' '.join(words)}" if words else ""))
    return f"and {len(group) - 1} more alike: {', '.join(said)}"
