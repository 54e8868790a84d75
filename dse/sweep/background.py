"""A child process of the driver that runs function calls one at a time, in order: the sweep's writer.

The sweep hands each told batch's Parquet part and journal records to it (:mod:`dse.sweep.writer`) and
goes on asking the next batch; the child writes them on the core the ask leaves idle, off the driver's
GIL, and the driver waits for the result when it commits the batch.

Why a plain child process and not a Ray actor: it always runs on the driver's machine, where the run's
files are (also for a ``ray://`` client), and a call reaches it through a pipe, without Ray's object store
and task scheduling on the way (docs/performance.md has what that saves). The child is started with
``python -c`` importing this module (no re-import of the caller's ``__main__``, as ``multiprocessing``'s
spawn would do) and talks over two pipes with ``multiprocessing.connection`` framing (pickle, numpy
buffers out of band).

When each method is called: the constructor once per run (it starts the child, which imports the writing
code while the workers start), :meth:`BackgroundProcess.call` once per batch, the function it returns once
per call (calls finish in order), :meth:`BackgroundProcess.close` at the end of the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

__all__ = ["BackgroundProcess", "BackgroundError"]


class BackgroundError(RuntimeError):
    """A call failed in the child, or the child is gone (the caller then does the work itself)."""


class BackgroundProcess:
    """A child process that runs ``fn(*args)`` calls in the order they are made (see the module doc)."""

    def __init__(self, preload: str = "dse.sweep.writer") -> None:
        from_driver, to_child = os.pipe()  # (read end, write end)
        from_child, to_driver = os.pipe()
        package_root = str(Path(__file__).resolve().parents[2])  # dse importable in the child
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(from_driver), str(to_driver), preload],
            pass_fds=(from_driver, to_driver), stdin=subprocess.DEVNULL, env=env)
        os.close(from_driver)
        os.close(to_driver)
        try:  # room for a whole batch in the pipe: a call returns without waiting for the child to read it
            import fcntl

            fcntl.fcntl(to_child, fcntl.F_SETPIPE_SZ, 1 << 20)
        except (ImportError, AttributeError, OSError):  # not Linux, or above the system's pipe-max-size
            pass
        self._send = Connection(to_child, readable=False)
        self._recv = Connection(from_child, writable=False)
        self._sent = 0  # calls made
        self._read = 0  # results read from the pipe
        self._results: dict[int, tuple[bool, Any]] = {}  # read, not yet claimed by their caller
        self._lost: str | None = None

    @property
    def pid(self) -> int:
        return self._proc.pid

    def call(self, fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        """Send ``fn(*args)`` (both picklable) to the child and return at once; the returned function waits
        for its result and returns it, or raises :class:`BackgroundError`."""
        index = self._sent
        try:
            if self._lost is not None:
                raise BackgroundError(self._lost)
            self._send.send((fn, args))
        except (OSError, ValueError, BackgroundError) as exc:  # the child is gone (a broken pipe)
            self._lost = self._lost or f"the writer process is gone ({type(exc).__name__})"
            message = self._lost
            return lambda: _raise(message)
        self._sent += 1
        return lambda: self._wait(index)

    def _wait(self, index: int) -> Any:
        while index not in self._results:
            if self._lost is not None:
                raise BackgroundError(self._lost)
            try:
                self._results[self._read] = self._recv.recv()
            except (EOFError, OSError) as exc:
                self._lost = f"the writer process is gone ({type(exc).__name__}, exit status {self._proc.poll()})"
                raise BackgroundError(self._lost) from None
            self._read += 1
        ok, value = self._results.pop(index)
        if not ok:
            raise BackgroundError(value)
        return value

    def close(self, timeout_s: float = 30.0) -> None:
        """Let the child finish the calls it has and exit (called once, at the end of the run)."""
        try:
            self._send.send(None)
        except (OSError, ValueError):
            pass
        for conn in (self._send, self._recv):
            conn.close()
        try:
            self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _raise(message: str) -> Any:
    raise BackgroundError(message)


def _serve(from_driver: int, to_driver: int, preload: str) -> int:
    """The child's loop: run each call and send back (True, result) or (False, "Error: message"). Once a
    call has failed, every later call fails unrun: the calls are a sequence (a run's parts, in order) and
    the caller takes over from the first failure. Calls already sent still run after the driver is gone
    (they are finished batches); then the child exits."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the driver, which then closes the pipe
    calls = Connection(from_driver, writable=False)
    results = Connection(to_driver, readable=False)
    if preload:
        __import__(preload)  # load the writing code (Parquet, Optuna) now, not at the first call
    failed: str | None = None
    while True:
        try:
            message = calls.recv()
        except (EOFError, OSError):  # the driver is gone, and every call it sent has run
            return 0
        if message is None:
            return 0
        fn, args = message
        if failed is not None:
            out: tuple[bool, Any] = (False, f"not run: an earlier call failed ({failed})")
        else:
            try:
                out = (True, fn(*args))
            except Exception as exc:  # reported to the caller, which writes the batch itself
                failed = f"{type(exc).__name__}: {exc}"
                out = (False, failed)
        try:
            results.send(out)
        except (OSError, ValueError):  # the driver is gone: run what it sent, unanswered
            continue


def _main(argv: list[str]) -> int:
    """The child's entry point (:data:`_CHILD`): ``FROM_DRIVER TO_DRIVER [PRELOAD]``."""
    return _serve(int(argv[0]), int(argv[1]), argv[2] if len(argv) > 2 else "")


#: the child's program (``python -c``): this module's :func:`_main` on its arguments
_CHILD = "import sys; from dse.sweep.background import _main; sys.exit(_main(sys.argv[1:]))"
