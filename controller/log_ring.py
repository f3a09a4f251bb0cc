"""The loop side of the run log: rows packed into a ring of fixed-size slots.

:meth:`LogRing.append` is what the loop calls once per tick: no I/O, no lock, no wake-up call.
:class:`controller.runlog.RunLogWriter` derives from it and adds the file and the writer thread
that drains the ring (the file format and the threading contract are described there). A hot
module: in the compiled build logging a row costs the loop one native call.

Shared between the two threads (single producer, single consumer; each counter has exactly one
thread that writes it): ``_appended`` (rows accepted by append, written by the loop) and
``_written`` (rows on disk, written by the writer thread).
"""

from __future__ import annotations

import struct
import threading
import time
from typing import Sequence

from .compile_hints import mypyc_attr
from .log_errors import LogOverflowError, LogWriteError


@mypyc_attr(allow_interpreted_subclasses=True)  # RunLogWriter derives from it
class LogRing:
    """``capacity_rows`` slots of ``n_columns`` little-endian float64. ``wait_when_full_s``: how
    long ``append`` waits for the writer when the ring is full (0: raise at once; ``inf``:
    forever — for loops without deadlines)."""

    def __init__(self, path: str, n_columns: int, capacity_rows: int,
                 wait_when_full_s: float) -> None:
        self.path = path  # named in the errors
        self._capacity = capacity_rows
        self._row = struct.Struct(f"<{n_columns}d")
        self._row_bytes = self._row.size
        self._pack_into = self._row.pack_into  # bound once: no method lookup per row
        self._ring = bytearray(capacity_rows * self._row_bytes)
        self._wait_when_full_s = wait_when_full_s
        self._space = threading.Event()  # set by the writer after a write, if someone waits
        self._space_waiters = False
        self._wake = threading.Event()  # wakes the writer (close, a waiting append)
        self._appended = 0
        self._written = 0
        self._writer_error: BaseException | None = None
        self._refusing = False  # set on close or writer failure; append checks only this flag

    def append(self, row: Sequence[float]) -> None:
        """Log one tick: pack the row into the ring. No I/O, no lock, no wake-up call.

        Raises :class:`LogOverflowError` if the ring is full (the row is not logged) and
        :class:`LogWriteError` if the writer thread has failed or the log is closed.
        """
        if self._refusing:
            self._raise_refusal()
        n = self._appended
        if n - self._written >= self._capacity and not self._wait_for_space(n):
            raise LogOverflowError(
                f"{self.path}: run log ring full ({self._capacity} rows, writer has "
                f"{self._written} rows on disk); row {n} not logged"
            )
        try:
            self._pack_into(self._ring, (n % self._capacity) * self._row_bytes, *row)
        except struct.error as err:
            raise _caused(ValueError(f"run log row {n}: expected {self._row.size // 8} floats: "
                                     f"{err}"), err)
        self._appended = n + 1  # the writer polls; waking it from here costs tens of µs

    def latest(self) -> tuple[int, tuple[float, ...]] | None:
        """(index, row) of the last row ``append`` accepted, or None before the first.

        For readers in other threads (the live view): no lock and nothing for the loop to do.
        The slot read is not the one ``append`` fills next, and it is reused only ``capacity``
        rows later, after the writer thread has drained it; ``unpack_from`` runs under the
        GIL, so the row comes back whole.
        """
        n = self._appended
        if n == 0:
            return None
        k = n - 1
        return k, self._row.unpack_from(self._ring, (k % self._capacity) * self._row_bytes)

    @property
    def rows_appended(self) -> int:
        """Rows accepted by ``append``."""
        return self._appended

    @property
    def rows_written(self) -> int:
        """Rows handed to the kernel (they survive a kill of this process)."""
        return self._written

    @property
    def writer_error(self) -> BaseException | None:
        """The exception that stopped the writer thread, or None."""
        return self._writer_error

    def _wait_for_space(self, n: int) -> bool:
        """Ring full: wait up to ``wait_when_full_s`` for the writer (0 in real time: no wait)."""
        if self._wait_when_full_s <= 0.0:
            return False
        deadline = time.monotonic() + self._wait_when_full_s
        self._space_waiters = True
        try:
            while n - self._written >= self._capacity:
                if self._refusing:
                    self._raise_refusal()
                self._space.clear()  # then re-check, so a set() in between is not lost
                if n - self._written < self._capacity:
                    break
                self._wake.set()  # no need to wait for the writer's next poll
                remaining = deadline - time.monotonic()
                if remaining <= 0.0:
                    return False
                self._space.wait(min(remaining, 0.1))  # wakes to notice a dead writer
        finally:
            self._space_waiters = False
        return True

    def _raise_refusal(self) -> None:
        err = self._writer_error
        if err is not None:
            raise _caused(LogWriteError(
                f"{self.path}: run log writer failed after {self._written} rows: {err!r}"), err)
        raise LogWriteError(f"{self.path}: run log is closed")


def _caused(error: Exception, cause: BaseException) -> Exception:
    """``error`` with ``cause`` as its ``__cause__``: what ``raise error from cause`` does, said
    explicitly because the compiled build drops the cause of a ``raise … from``."""
    error.__cause__ = cause
    return error
