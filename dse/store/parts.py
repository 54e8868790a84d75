"""Which parts a run committed: the manifest ``trials/_manifest.json``, and the checks made on resume and by
the report.

The manifest holds the run's identity (its space hash and seed, which every part's ``dse.*`` metadata also
carries) and, for every committed part, the sha256, size and row count of its file. A part is written
first (atomically), then its entry (the manifest rewritten atomically, :meth:`Manifest.record`), so a kill
between the two leaves a whole part without an entry: an unfinished write, set aside on resume and its
batch run again, not an error. The leading underscore keeps readers of the folder
(``pd.read_parquet("trials")``, Arrow datasets, Spark) from taking it for data, as they skip ``_SUCCESS``.

:func:`check_parts` compares the files with the manifest and refuses a part of another run (a different
space hash or seed) in one line. On resume :func:`settle` sets aside the first part that is not as
recorded (torn: shorter than written; corrupt: other bytes; unfinished: not recorded; or missing) and
every part after it, so their batches run again; the report reads the whole parts and says what it leaves
out (:func:`report_notes`). A run directory without a manifest (written before there was one) is read as
before, unchecked. :func:`check_journal` reads ``study.journal`` line by line before Optuna replays it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dse.errors import UserError
from dse.parquet import fsync_dir

__all__ = ["MANIFEST", "Manifest", "PartsCheck", "check_parts", "settle", "report_notes", "check_journal",
           "file_sha256", "part_index"]

MANIFEST = "_manifest.json"
_PART = re.compile(r"part-(\d+)\.parquet")


def part_index(path: Path) -> int | None:
    """The batch index in a part's name (``part-00012.parquet`` -> 12), None for another name."""
    m = _PART.fullmatch(path.name)
    return int(m.group(1)) if m else None


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, as hex."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _rel(path: Path) -> str:
    """A file of the run as its messages name it: ``trials/part-00012.parquet``."""
    return f"{path.parent.name}/{path.name}"


@dataclass
class Manifest:
    """``trials/_manifest.json``: the run's identity and its committed parts (name -> sha256, bytes, rows)."""

    path: Path
    space_hash: str | None
    seed: int | None
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def read(cls, trials_dir: Path) -> Manifest | None:
        """The manifest of a run's ``trials/`` folder; None where there is none (a run written before
        manifests); a UserError where it cannot be read."""
        path = Path(trials_dir) / MANIFEST
        try:
            text = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise UserError(f"cannot read the run's manifest of parts: {exc.strerror or exc}", where=str(path)) from None
        try:
            data = json.loads(text)
            parts = data["parts"]
            ok = isinstance(parts, dict) and all(
                isinstance(e, dict) and isinstance(e.get("sha256"), str) and isinstance(e.get("bytes"), int)
                and isinstance(e.get("rows"), int) for e in parts.values())
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            raise UserError("is not a manifest of the run's parts (damaged); move it away to read the run unchecked",
                            where=str(path))
        return cls(path, data.get("space_hash"), data.get("seed"), dict(parts))

    @classmethod
    def start(cls, trials_dir: Path, space_hash: str | None, seed: int | None) -> Manifest:
        """A new run's manifest, with no parts yet, written."""
        manifest = cls(Path(trials_dir) / MANIFEST, space_hash, seed)
        manifest.write()
        return manifest

    def write(self) -> None:
        """Replace the file atomically (temporary file, fsync, rename, the folder fsynced)."""
        body = {"format": 1, "space_hash": self.space_hash, "seed": self.seed,
                "parts": {k: self.parts[k] for k in sorted(self.parts)}}
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with open(tmp, "wb") as f:
            f.write((json.dumps(body) + "\n").encode())  # (no indent: Python's fast encoder, per batch)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)

    def record(self, part: Path, rows: int) -> None:
        """Add a part just written (its bytes as they are on disk now) and write the manifest."""
        self.parts[part.name] = {"sha256": file_sha256(part), "bytes": part.stat().st_size, "rows": int(rows)}
        self.write()

    def rows(self, part: Path) -> int:
        """The designs a recorded part holds (0 if it is not recorded)."""
        return int(self.parts.get(part.name, {}).get("rows", 0))


@dataclass
class PartsCheck:
    """The parts of a run with a manifest, as found: whole ones, and what is wrong with the others."""

    manifest: Manifest
    good: list[Path]  # recorded, present, the bytes recorded: in batch order
    damaged: list[tuple[Path, str, str]]  # (part, "torn" or "corrupt", why)
    unfinished: list[Path]  # present, not recorded: a write cut short between the part and its entry
    missing: list[Path]  # recorded, absent


def _identity(part: Path) -> tuple[Any, Any] | None:
    """(space hash, seed) from a part's ``dse.*`` metadata; None where it cannot be read."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(part).metadata or {}
        return tuple(json.loads(meta[k]) if k in meta else None for k in (b"dse.space_hash", b"dse.seed"))
    except Exception:
        return None


def _foreign(what: str, found: tuple[Any, Any] | None, space_hash: Any, seed: Any) -> str | None:
    """Why ``what`` (a file of another run: its space hash or seed not this run's) is refused, or None."""
    h, s = found or (None, None)
    if (space_hash is None or h is None or h == space_hash) and (seed is None or s is None or s == seed):
        return None
    return (f"{what} belongs to another run (space {h}, seed {s}; this run: space {space_hash}, seed {seed}); "
            "move it out of the run directory")


def check_parts(root: Path, manifest: Manifest, space_hash: str | None, seed: int | None) -> PartsCheck:
    """Compare the parts in ``root/trials`` with the manifest. A part whose bytes are the recorded ones is
    whole; any other is looked at for the run it belongs to: another run's (space hash or seed, from its
    metadata, not this run's, or the manifest's own) is a UserError, one line naming the file."""
    where = str(root)
    refusal = _foreign(_rel(manifest.path), (manifest.space_hash, manifest.seed), space_hash, seed)
    if refusal is not None:
        raise UserError(refusal, where=where)
    trials = manifest.path.parent
    on_disk = sorted(p for p in trials.glob("part-*.parquet") if part_index(p) is not None)
    check = PartsCheck(manifest, [], [], [], [])
    for part in list(on_disk):
        entry = manifest.parts.get(part.name)
        try:
            size = part.stat().st_size
            whole = entry is not None and size == entry["bytes"] and file_sha256(part) == entry["sha256"]
        except FileNotFoundError:  # gone since the listing (a resume setting it aside): as if never there
            on_disk.remove(part)
            continue
        if whole:
            check.good.append(part)
            continue
        refusal = _foreign(_rel(part), _identity(part), space_hash, seed)
        if refusal is not None:
            raise UserError(refusal, where=where)
        if entry is None:
            check.unfinished.append(part)
        elif size < entry["bytes"]:
            check.damaged.append((part, "torn", f"{size:,} of the {entry['bytes']:,} bytes written"))
        else:
            check.damaged.append((part, "corrupt", "its bytes are not those written: the checksum differs"))
    present = {p.name for p in on_disk}
    check.missing = [trials / name for name in sorted(manifest.parts) if name not in present]
    return check


def settle(check: PartsCheck, part_path: Callable[[int], Path],
           set_aside: Callable[[Sequence[Path], str], list[Path]]) -> list[str]:
    """On resume: keep the whole parts from batch 0 on; set aside (``set_aside(parts, suffix)``) the first
    part that is not, and every part after it, whose batches run again (same seed: the same trials), drop
    them from the manifest. Returns one warning line, or none where every part is whole."""
    good = {p.name for p in check.good}
    cut = 0
    while part_path(cut).name in good:
        cut += 1
    first = part_path(cut)
    indexed = {p: part_index(p) for p in first.parent.glob("part-*.parquet")}
    later = sorted((p for p, i in indexed.items() if i is not None and i >= cut), key=part_index)
    stale = [n for n in check.manifest.parts if (part_index(Path(n)) or 0) >= cut]
    damaged = {p.name: (kind, why) for p, kind, why in check.damaged}
    if first.name in damaged:
        kind, why = damaged[first.name]
        said = f"is {kind} ({why})"
    elif first in check.unfinished:
        kind, said = "unfinished", f"was written but not recorded in {_rel(check.manifest.path)} (a stop between the two)"
    elif later or stale:
        rows = check.manifest.rows(first)
        kind = "set-aside"
        said = f"is missing ({_rel(check.manifest.path)} {f'lists it: {rows:,} designs' if rows else 'lists parts after it'})"
    else:
        return []  # every part is whole
    rest = [p for p in later if p != first]
    moved = set_aside([first], kind) if first in later else []
    set_aside(rest, "set-aside")  # whole, but asked after the batch that runs again: they run again too
    for name in stale:
        del check.manifest.parts[name]
    check.manifest.write()
    aside = f"; set aside as {_rel(moved[0])}" if moved else ""
    if rest:
        aside += (", the" if moved else "; the") + f" {len(rest)} part(s) after it" + ("" if moved else " set aside") \
            + " as .part-*.parquet.set-aside"
    again = "its batch runs again" if len(later) + (first not in later) == 1 else "their batches run again"
    return [f"{_rel(first)} {said}{aside}, and {again}"]


def report_notes(check: PartsCheck) -> list[str]:
    """What a report on these parts leaves out, one line per kind: the missing parts and the damaged ones,
    with the designs they held (parts written but not recorded yet are a batch in flight: not said)."""
    notes = []
    for what, parts, extra in (("missing", check.missing, {}),
                               ("damaged", [p for p, _, _ in check.damaged], {p.name: why for p, _, why in check.damaged})):
        if not parts:
            continue
        rows = sum(check.manifest.rows(p) for p in parts)
        named = ", ".join(_rel(p) + (f": {extra[p.name]}" if p.name in extra else "") for p in parts)
        hint = "; dse sweep --resume sets them aside and runs their batches again" if what == "damaged" else ""
        notes.append(f"{len(parts)} part{'s' if len(parts) > 1 else ''} {what} ({named}): "
                     f"{rows:,} design{'s' if rows != 1 else ''} not shown{hint}")
    return notes


def check_journal(path: Path) -> None:
    """Read the Optuna journal line by line before Optuna replays it: a whole line that is not a journal
    record (garbled bytes, text that is not JSON) is a UserError naming the file and the line. A last line
    without its line break is an append cut short: Optuna skips it and resume rewrites the file."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UserError(f"cannot read the run's Optuna journal: {exc.strerror or exc}", where=str(path)) from None
    with f:
        for n, line in enumerate(f, start=1):
            if not line.endswith(b"\n"):
                break
            try:
                record = json.loads(line)
                ok = isinstance(record, dict) and isinstance(record.get("op_code"), int)
            except ValueError:  # not UTF-8 or not JSON
                ok = False
            if not ok:
                raise UserError(f"line {n} is not an Optuna journal record: the file is damaged; move it away and "
                                "resume again (the journal is rebuilt from the parts)", where=str(path))
