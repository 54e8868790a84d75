"""The rules a mapping breaks, in words: each row's first broken rule (objectives/training/divisibility.py) as
one 'kind: reason' line, the reason's template filled with the row's own values, formatted once per distinct
value, never per row."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from objectives.training.divisibility import RULES_BY_CODE, Job, number_text

__all__ = ["RowsOf", "join_text", "rule_reasons"]


def join_text(parts: list, n: int) -> np.ndarray:
    """n strings, each the concatenation of ``parts``: text, or columns (numbers as '%g', or text)."""
    out = np.full(n, "", dtype=object)
    for part in parts:
        if isinstance(part, str):
            out = out + part
        else:
            part = np.broadcast_to(np.asarray(part), (n,))
            out = out + (part.astype(object) if part.dtype.kind in "OUS" else number_text(part))
    return out


class RowsOf(Mapping):
    """``{name: np.broadcast_to(column, (n,))[rows]}`` over the 1-D columns of ``cols`` (``numbers``: the
    number columns alone), each cut when first read: a rule's reason reads the few columns it names, not
    the table's hundreds."""

    def __init__(self, cols: Mapping[str, np.ndarray], rows: np.ndarray, n: int, numbers: bool = False):
        self._cols, self._rows, self._n, self._numbers, self._cut = cols, rows, n, numbers, {}

    def _takes(self, value) -> bool:
        if self._numbers:
            return isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "fiub"
        return np.ndim(value) == 1

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._cut:
            value = self._cols[name]
            if not self._takes(value):
                raise KeyError(name)
            self._cut[name] = np.broadcast_to(value, (self._n,))[self._rows]
        return self._cut[name]

    def __iter__(self):
        return (name for name in self._cols if self._takes(self._cols[name]))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def rule_reasons(cols: Mapping[str, np.ndarray], codes: np.ndarray, lost: bool = False) -> np.ndarray:
    """'kind: reason' for rows whose first broken rule is ``codes`` (0: ''); ``lost``: the rule no candidate
    mapping of the row's search passed ("layout: no mapping passes '...'")."""
    codes = np.asarray(codes)
    out = np.full(len(codes), "", dtype=object)
    for code in np.unique(codes[codes > 0]).astype(int):
        rule = RULES_BY_CODE[code]
        rows = np.flatnonzero(codes == code)
        sub = RowsOf(cols, rows, len(codes))
        kind = "layout" if rule.kind == "search" else rule.kind
        if lost:  # the template's {column} pieces filled with the design's values
            pieces = re.split(r"\{(\w+)\}", rule.needs)
            parts = [f"{kind}: no mapping passes '"] + [sub[p] if i % 2 else p for i, p in enumerate(pieces)] + ["'"]
            out[rows] = join_text(parts, len(rows))
        else:
            out[rows] = join_text([f"{kind}: ", *rule.says(Job(sub))], len(rows))
    return out
