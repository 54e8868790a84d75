"""A validated space: its dimensions, objectives, constraints and search settings (:class:`Spec`)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike

__all__ = ["Dimension", "Objective", "Constraint", "SearchSettings", "Spec", "SAMPLERS", "SCALES", "TOP_KEYS",
           "SEARCH_KEYS", "RANGE_KEYS", "DEFAULT_SEARCH"]

SAMPLERS = ("nsga2", "tpe", "random", "grid")
SCALES = ("linear", "log", "pow2")
TOP_KEYS = ("name", "description", "workload", "cluster", "mapping", "objectives", "constraints", "search", "calibration",
            "prices", "facility_mw", "rack_kw_max")
SEARCH_KEYS = ("sampler", "trials", "batch_size", "seed")
RANGE_KEYS = ("min", "max", "scale", "step", "type")
DEFAULT_SEARCH = {"sampler": "nsga2", "trials": 2048, "batch_size": 512, "seed": 0}


@dataclass(frozen=True)
class Dimension:
    """One design-table column of the outer (cluster) level.

    ``kind`` is ``choice`` (``values`` lists the choices), ``int`` or ``float`` (a range from ``low`` to
    ``high``, optionally ``log`` and with a ``step``; int for whole-number columns unless ``type`` says),
    ``pow2`` (the powers of two from ``low`` to ``high``) or ``fixed`` (``values`` holds the one value).
    """

    name: str
    kind: str
    values: tuple = ()
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None

    @property
    def searched(self) -> bool:
        return self.kind != "fixed" and not (self.kind == "choice" and len(self.values) == 1)


@dataclass(frozen=True)
class Objective:
    """A metric column to minimize or maximize."""

    metric: str
    direction: str  # "min" or "max"


#: a space's constraint: ``COLUMN <= NUMBER`` (or >=, <, >)
CONSTRAINT_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|<|>)\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)\s*$")

@dataclass(frozen=True)
class Constraint:
    """``column op bound``; :meth:`violation` is > 0 where violated, relative to the bound's size."""

    column: str
    op: str
    bound: float

    @property
    def text(self) -> str:
        return f"{self.column} {self.op} {self.bound:g}"

    @classmethod
    def from_text(cls, text: object) -> Constraint | None:
        """``COLUMN OP NUMBER`` as a space writes it (and run.json ``spec.constraints`` stores it, :attr:`text`);
        None for anything else."""
        m = CONSTRAINT_RE.match(text) if isinstance(text, str) else None
        return cls(m.group(1), m.group(2), float(m.group(3))) if m else None

    def violation(self, values: ArrayLike) -> np.ndarray:
        """Signed violation (<= 0 satisfied), scaled by ``|bound|`` so constraints add up fairly."""
        import numpy as np

        scale = abs(self.bound) if self.bound != 0 else 1.0
        v = np.asarray(values, dtype=np.float64)
        out = (v - self.bound) / scale if self.op in ("<=", "<") else (self.bound - v) / scale
        return np.where(np.isnan(out), np.inf, out)


@dataclass(frozen=True)
class SearchSettings:
    """How Optuna searches: sampler, total trials, designs per ask (an NSGA-II generation), seed."""

    sampler: str = "nsga2"
    trials: int = 2048
    batch_size: int = 512
    seed: int = 0


@dataclass(frozen=True)
class Spec:
    """A validated space. ``raw`` is the mapping as given; :meth:`resolved` the normalized form."""

    name: str
    source: str
    workload: Mapping[str, Any]
    dimensions: tuple[Dimension, ...]
    mapping: Mapping[str, tuple]
    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...]
    search: SearchSettings
    description: str = ""
    #: a calibration file (``dse calibrate``) the designs are scored with, as a path from the working directory
    #: (the space gives it relative to the space file), and its sha256; "" for the shipped calibration
    calibration: str = ""
    calibration_sha256: str = ""
    #: a price file (dse.spec.prices) overriding the catalog's prices, as a path from the working directory, its
    #: sha256 and its prices ({"instances": {id: {pricing: USD}}, "gpus": {id: USD}}); "" and {} for none
    prices: str = ""
    prices_sha256: str = ""
    price_overrides: Mapping[str, Any] = field(default_factory=dict)
    #: the facility's power (MW) and rack limit (kW) every design table carries (dse.spec.facility); None: none
    facility_mw: float | None = None
    rack_kw_max: float | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)
    text: str = field(default="", compare=False)

    def resolved(self) -> dict[str, Any]:
        """The space with every default filled in, as plain JSON-able data (for run.json)."""
        out = {
            "name": self.name,
            "description": self.description,
            "workload": dict(self.workload),
            "cluster": {d.name: _dimension_json(d) for d in self.dimensions},
            "mapping": {k: list(v) for k, v in self.mapping.items()} or "auto",
            "objectives": [asdict(o) for o in self.objectives],
            "constraints": [c.text for c in self.constraints],
            "search": asdict(self.search),
        }
        if self.calibration:  # (absent otherwise, so that a space without one keeps its hash)
            out["calibration"] = {"path": self.calibration, "sha256": self.calibration_sha256}
        if self.prices:  # (likewise)
            out["prices"] = {"path": self.prices, "sha256": self.prices_sha256,
                             "usd_per_gpu_hr": json.loads(json.dumps(self.price_overrides))}
        for key in ("facility_mw", "rack_kw_max"):  # (likewise)
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @property
    def space_hash(self) -> str:
        """Hash of everything that decides which designs are proposed and how they score.

        Excludes the name, the description and ``search.trials``, so a run can be resumed with more trials.
        """
        r = self.resolved()
        r.pop("name"), r.pop("description")
        r["search"] = {k: v for k, v in r["search"].items() if k != "trials"}
        blob = json.dumps(r, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def directions(self) -> list[str]:
        return [o.direction for o in self.objectives]

    def with_search(self, **changes: Any) -> Spec:
        """A copy with some search settings changed (``trials``, ``seed``, ...), as the CLI flags ask."""
        from dataclasses import replace

        return replace(self, search=replace(self.search, **changes))


def _dimension_json(d: Dimension) -> Any:
    if d.kind == "fixed":
        return d.values[0]
    if d.kind == "choice":
        return list(d.values)
    out: dict[str, Any] = {"min": d.low, "max": d.high}
    if d.kind == "pow2":
        out["scale"] = "pow2"
    else:
        out["type"] = d.kind
        if d.log:
            out["scale"] = "log"
        if d.step is not None:
            out["step"] = d.step
    return out
