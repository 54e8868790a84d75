"""The run's Optuna journal (``study.journal``): a ``JournalStorage`` file written one batch at a time.

The file opens with ``optuna.load_study(study_name="dse", storage=JournalStorage(JournalFileBackend(path)))``
for any Optuna tool (dashboard, plots). :class:`JournalMirror` creates it and its study at the start of a
run; each committed batch is appended from its record (:mod:`dse.study.records`) by the sweep's writer,
right after the batch's Parquet part (:class:`JournalTarget` travels to it); on resume the file is made to
agree with the parts' records (:meth:`JournalMirror.agree`). The lines are the records Optuna's own
``JournalStorage`` writes for the same trials (compact JSON, same keys), appended with one write and one
fsync under the lock ``JournalFileBackend`` takes.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from optuna.distributions import BaseDistribution, distribution_to_json
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from dse.errors import UserError
from dse.study.internals import JournalOperation
from dse.study.records import ENCODER, RECORD_ENCODER, STUDY_NAME, EncodedRecord, study_attrs_of

__all__ = ["clear_stale_lock", "JournalMirror", "JournalTarget", "journal_lines", "append_journal"]

_NUMBERS = {int, float}


@dataclass(frozen=True)
class JournalTarget:
    """Where and how the next committed batch is appended to the run's journal: picklable, so that the
    sweep's writer appends it right after the batch's part (:func:`dse.sweep.writer.write_batch`).

    ``offset`` is the journal's size once the batches before this one were appended. Appending truncates
    the file back to it first, so an append that runs again (the driver writing the batch itself after
    losing the writer, which may have appended part of it) leaves the batch in the journal once.
    """

    path: str
    offset: int
    worker_id: str
    study_id: int
    #: JSON of the run's distributions, the same for every trial (encoded once per run)
    distributions_json: str

    def append(self, record: Mapping[str, Any] | EncodedRecord) -> int:
        """Append one batch from its record (:func:`dse.study.records.batch_record`); returns the new size."""
        lines = journal_lines(record, self.worker_id, self.study_id, self.distributions_json)
        return append_journal(self.path, self.offset, lines)



def journal_lines(record: Mapping[str, Any] | EncodedRecord, worker_id: str, study_id: int,
                  distributions_json: str) -> list[str]:
    """The journal records of one committed batch, built from its record's columns: a
    SET_STUDY_SYSTEM_ATTR line per study attribute new in the batch (NSGA-II's parents), then one
    CREATE_TRIAL line per finished trial, as ``JournalStorage.set_study_system_attr`` and
    ``JournalStorage.create_new_trial(template_trial=trial)`` write them (compact JSON, same keys).

    The numbers come from the record's column texts (:class:`EncodedRecord`), cut into one token per
    trial; only a system attribute that is not a number (or is missing for some trials) is encoded trial
    by trial.
    """
    encoded = record if isinstance(record, EncodedRecord) else EncodedRecord(record)
    record = encoded.record
    head = f'"worker_id":{ENCODER.encode(worker_id)},"study_id":{int(study_id)}'
    lines = [f'{{"op_code":{int(JournalOperation.SET_STUDY_SYSTEM_ATTR)},{head},"system_attr":{RECORD_ENCODER.encode({k: v})}}}'
             for k, v in (record.get("study_system_attrs") or {}).items()]
    n = len(record["number"])
    if n == 0:
        return lines
    multi = len(record["values"][0]) > 1
    value_rows = encoded.values[2:-2].split("],[")  # numbers only (Infinity included)
    if len(value_rows) != n:
        raise ValueError("every told trial of a batch has the same number of objective values")
    iso = functools.lru_cache(maxsize=16)(lambda text: ENCODER.encode(_iso(datetime.fromisoformat(text)) if text else None))
    starts = record.get("datetime_starts") or [record.get("datetime_start")] * n
    params = {k: _tokens(record["params"][k], text) for k, text in encoded.params.items()}
    columns = [value_rows, [iso(s) for s in starts], *params.values()]
    attrs = record.get("system_attrs") or {}
    if all(len(col) == n and _numbers(col) for col in attrs.values()):  # their tokens fill placeholders too
        columns += [_split(text) for text in encoded.system_attrs.values()]
        attrs_fmt = "{" + ",".join(_literal(ENCODER.encode(k)) + ":%s" for k in attrs) + "}"
    else:  # text, lists or missing values: each trial's attributes on their own (None: not set)
        columns.append([RECORD_ENCODER.encode({k: col[i] for k, col in attrs.items() if col[i] is not None})
                        for i in range(n)])
        attrs_fmt = "%s"
    complete = record.get("datetime_complete")
    if record.get("datetime_completes"):  # told one by one: each trial's own end
        columns.append([iso(c) for c in record["datetime_completes"]])
        complete_fmt = ',"datetime_complete":%s'
    else:  # the batch's one end (or none)
        complete_fmt = _literal(f',"datetime_complete":{iso(complete)}') if complete else ""
    fmt = (_literal(f'{{"op_code":{int(JournalOperation.CREATE_TRIAL)},{head},"state":{int(TrialState.COMPLETE)},')
           + ('"value":null,"values":[%s]' if multi else '"value":%s,"values":null')
           + ',"datetime_start":%s,"params":{' + ",".join(_literal(ENCODER.encode(k)) + ":%s" for k in params)
           + '},"user_attrs":{},"system_attrs":' + attrs_fmt + ',"intermediate_values":{}'
           + complete_fmt
           + _literal(f',"distributions":{distributions_json}}}'))
    lines += [fmt % row for row in zip(*columns)]
    return lines


def _literal(text: str) -> str:
    """``text`` inside a %-format, as itself."""
    return text.replace("%", "%%")


def _numbers(column: Sequence[Any]) -> bool:
    return set(map(type, column)) <= _NUMBERS


def _split(text: str) -> list[str]:
    """The items of a JSON list of numbers, as text: ``"[1.5,2]"`` -> ``["1.5", "2"]``."""
    return text[1:-1].split(",") if len(text) > 2 else []


def _tokens(column: Sequence[Any], text: str) -> list[str]:
    """The JSON text of each number of a column (a parameter's internal values), cut from the column's
    JSON ``text``."""
    if not _numbers(column):
        raise ValueError(f"journal columns hold numbers only, not {sorted({type(v).__name__ for v in column})}")
    return _split(text)


def clear_stale_lock(path: str | Path) -> bool:
    """Remove the journal's lock (``<journal>.lock``, Optuna's symlink lock) if one is left; True if it was.
    Called on resume only: a run killed while appending leaves it, and nothing else writes the journal."""
    lock = Path(f"{path}.lock")
    if not os.path.lexists(lock):
        return False
    lock.unlink()
    print(f"dse sweep: removed {lock.name}, a journal lock left by a killed run", file=sys.stderr)
    return True


def append_journal(path: str | Path, offset: int, lines: Sequence[str]) -> int:
    """Append ``lines`` to the journal at ``path`` after its first ``offset`` bytes (dropping what lies
    beyond them: a batch appended again replaces its first append), with one write and one fsync under
    the file's lock, as ``JournalFileBackend.append_logs`` writes; returns the journal's new size.
    A journal shorter than ``offset`` (changed behind the run's back) is appended to at its end."""
    data = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
    lock = JournalFileSymlinkLock(str(path))
    lock.acquire()
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size > offset:
                os.ftruncate(fd, offset)
                size = offset
            os.lseek(fd, size, os.SEEK_SET)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        lock.release()
    return size + len(data)



class JournalMirror:
    """The run's Optuna journal (``study.journal``): a ``JournalStorage`` file, one append per batch.

    Its study is created with the file, at the first batch (:meth:`target`); each committed batch is
    appended from its record (:meth:`JournalTarget.append`, on the sweep's writer, after the batch's part),
    and the file is rewritten from the parts' records on resume if a crash left it behind them
    (:meth:`agree`).
    """

    def __init__(self, path: str | Path, directions: Sequence[StudyDirection],
                 distributions: Mapping[str, BaseDistribution]) -> None:
        # absolute: Optuna's lock is a symlink to this path, and its stale-lock check (a 30 s grace period)
        # stats the link; a relative target resolves against the run directory and never exists, so a lock
        # left by a killed run made the next append spin forever
        self.path = Path(path).absolute()
        self._directions = list(directions)
        self._worker_id = f"dse-{uuid.uuid4()}-0"
        self._distributions = dict(distributions)
        self._dists_json = json.dumps({k: distribution_to_json(d) for k, d in distributions.items()},
                                      separators=(",", ":"))
        self._journal_study_id: int | None = None
        self.offset = 0  # the file's size after the last batch appended

    def target(self) -> JournalTarget:
        """Where the next batch goes; creates the file and its study on the first call."""
        if self._journal_study_id is None:
            storage = JournalStorage(JournalFileBackend(str(self.path)))
            try:
                self._journal_study_id = storage.get_study_id_from_name(STUDY_NAME)
            except KeyError:
                self._journal_study_id = storage.create_new_study(self._directions, STUDY_NAME)
            self.offset = self.path.stat().st_size
        return JournalTarget(str(self.path), self.offset, self._worker_id, self._journal_study_id, self._dists_json)

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one committed batch here and now (the writer's work, done in this process)."""
        self.offset = self.target().append(record)

    def appended(self, offset: int | None) -> None:
        """Called once per committed batch with the journal's size after it (None: not appended)."""
        if offset is not None:
            self.offset = offset

    def agree(self, records: Sequence[Mapping[str, Any]], trials: Sequence[FrozenTrial]) -> None:
        """Make the file hold exactly the batches of these records, whose finished ``trials`` the study
        holds (resume): rewritten when it holds other trials or other study attributes. A lock left by a
        killed run (the resumed run is the directory's only writer) is removed, with a line on stderr."""
        clear_stale_lock(self.path)
        stored, stored_attrs = self.load()
        same = len(stored) == len(trials) and all(
            a.number == b.number and a.params == b.params and a.values == b.values for a, b in zip(stored, trials))
        if not same or stored_attrs != study_attrs_of(records):
            self.rewrite(records)

    def load(self) -> tuple[list[FrozenTrial], dict[str, Any]]:
        """Finished trials and study system attributes as stored (called on resume)."""
        if not self.path.exists():
            return [], {}
        try:
            storage = JournalStorage(JournalFileBackend(str(self.path)))
            try:
                study_id = storage.get_study_id_from_name(STUDY_NAME)
            except KeyError:
                return [], {}
            trials = storage.get_all_trials(study_id, deepcopy=False, states=(TrialState.COMPLETE,))
            return list(trials), dict(storage.get_study_system_attrs(study_id))
        except (AssertionError, KeyError, TypeError, ValueError, IndexError) as exc:  # Optuna's replay of a damaged file
            raise UserError(f"cannot replay the run's Optuna journal ({type(exc).__name__}: {str(exc)[:80]}): the file "
                            "is damaged; move it away and resume again (the journal is rebuilt from the parts)",
                            where=str(self.path)) from None

    def rewrite(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Replace the file with exactly the batches of these records (resume, when the journal and the
        parts disagree)."""
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.unlink(missing_ok=True)
        other = JournalMirror(tmp, self._directions, self._distributions)
        for record in records:
            other.append(record)
        other.target()  # the study, even without batches
        tmp.replace(self.path)
        self._journal_study_id = None



def _iso(dt: datetime | None) -> str | None:
    """A naive local timestamp as Optuna's journal stores it (UTC, microseconds)."""
    return dt.astimezone(UTC).isoformat(timespec="microseconds") if dt else None
