"""Crash-safe tick log of the control loop: one float64 row per tick, written in CRC'd chunks.

The loop thread calls :meth:`RunLogWriter.append` once per tick. ``append`` does no I/O: it packs
the row into a preallocated ring buffer (about 1 µs for 14 columns). A background thread polls
the ring every ``poll_s`` and writes the complete chunks with one ``write()`` system call.
A row is either in the ring, on disk, or refused with an exception; it is never dropped silently.
After SIGKILL everything the writer thread had written survives (it is in the kernel), so at most
the rows not yet written are lost: the current partial chunk plus up to one writer poll,
about ``chunk_rows`` ticks + ``poll_s`` (0.075 s as the runner sets them: 0.05 s chunks polled every 0.025 s). A power loss can
lose more unless ``fsync=True``.

File format (version 1; all integers little-endian; CRC-32 is ``zlib.crc32``)::

    offset  size   field
    0       9      magic b"FCTLLOG1\\n"
    9       4      u32  H, length of the header JSON in bytes
    13      H      header JSON, UTF-8: {"format": 1, "columns": [K names], "units": {name: unit},
                   "chunk_rows": C, "header": <the caller's dict>}
    13+H    4      u32  CRC-32 of the H header JSON bytes

    then zero or more chunk records, each (relative to the record start):
    +0      4      tag b"CHNK"
    +4      4      u32  n, rows in this chunk, 1 <= n <= C
    +8      4      u32  CRC-32 of the payload
    +12     8·n·K  payload: n rows of K float64, row-major (row 0 column 0, row 0 column 1, ...)

    then, only after a clean close, one end record:
    +0      4      tag b"END_"
    +4      8      u64  total rows in all chunks of the file
    +12     4      u32  CRC-32 of those 8 count bytes

Every chunk holds exactly C rows except the last one before the end record, which holds what was
left at close. The file is only ever appended to. The header JSON goes through Python's ``json``,
so tuples come back as lists and ``inf`` (this project's "no limit") as ``Infinity``.

:func:`read_log` recovers every intact chunk: a file cut anywhere (SIGKILL, full disk) gives the
rows before the cut with ``torn_tail``; a corrupt chunk (bad tag, row count or CRC) stops the read
there and keeps the rows before it; ``problem`` names the byte offset. Only a file whose magic or
header is unusable raises :class:`LogFormatError`, as there is nothing to recover from it.
"""

from __future__ import annotations

import json
import math
import os
import struct
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, Union

import numpy as np

from .log_errors import LogFormatError, LogOverflowError, LogWriteError, RunLogError
from .log_ring import LogRing

PathLike = Union[str, "os.PathLike[str]"]

MAGIC = b"FCTLLOG1\n"
FORMAT_VERSION = 1
CHUNK_TAG = b"CHNK"
END_TAG = b"END_"

_U32 = struct.Struct("<I")
_CHUNK_HEAD = struct.Struct("<4sII")  # tag, row count, payload CRC
_END = struct.Struct("<4sQI")  # tag, total rows, CRC of the count
_F64 = np.dtype("<f8")
_CRC_PIECE = 5 * 1024  # zlib.crc32 keeps the GIL up to this size (CPython zlibmodule.c)
_MAX_HEADER_BYTES = 64 * 1024 * 1024  # a sanity bound on a header length read from a file


# the errors live in their own module (the compiled ring raises them too); imported from here
__all__ = ["RunLogError", "LogOverflowError", "LogWriteError", "LogFormatError", "RunLogWriter",
           "RunLog", "read_log"]


# --- writer ---------------------------------------------------------------------------------------


class RunLogWriter(LogRing):
    """Append-only tick log: cheap, non-blocking ``append`` in the loop, I/O in a thread.

    ``append`` and ``close`` belong to the loop thread (one producer). The file is created
    exclusively (an existing file is never overwritten) and the header is written before the
    constructor returns. ``capacity_rows`` (the ring) must be a multiple of ``chunk_rows`` and at
    least two chunks, so the loop fills one chunk while the writer writes another. With
    ``fsync=True`` every chunk and the end record are fsync'ed (survives power loss, slower).

    The writer thread looks for complete chunks every ``poll_s`` and writes all of them at once.
    It is not woken per chunk: ``Event.set`` from the loop cost ~50 µs per chunk on a loaded
    machine, and every wake-up is one more moment the writer holds the GIL the loop needs.

    ``wait_when_full_s`` is for loops without deadlines (simulated clock, replay): a full ring
    then makes ``append`` wait up to that long (``inf``: forever) for the writer instead of
    raising. A free-running loop outpaces the writer thread, which gets the GIL only every few
    ms. Keep the default 0 on a real-time clock: ``append`` never blocks, a full ring raises.
    """

    def __init__(
        self,
        path: PathLike,
        columns: Sequence[str],
        header: dict[str, Any],
        *,
        chunk_rows: int = 100,
        capacity_rows: int = 2000,
        units: dict[str, str] | None = None,
        fsync: bool = False,
        wait_when_full_s: float = 0.0,
        poll_s: float = 0.05,
    ) -> None:
        columns = tuple(columns)
        units = dict(units or {})
        _check_columns(columns)
        unknown = sorted(set(units) - set(columns))
        if unknown:
            raise ValueError(f"units given for unknown columns {unknown}")
        for name, unit in units.items():
            if not isinstance(unit, str):
                raise ValueError(f"unit of column {name!r} must be a string, got {unit!r}")
        if not isinstance(header, dict):
            raise TypeError(f"header must be a dict, got {type(header).__name__}")
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
        if not 0.0 < poll_s < math.inf:
            raise ValueError(f"poll_s must be > 0 and finite, got {poll_s}")
        if not wait_when_full_s >= 0.0:
            raise ValueError(f"wait_when_full_s must be >= 0 (inf: wait forever), got {wait_when_full_s}")
        if capacity_rows < 2 * chunk_rows or capacity_rows % chunk_rows:
            raise ValueError(
                f"capacity_rows must be a multiple of chunk_rows ({chunk_rows}) and at least "
                f"two chunks, got {capacity_rows}"
            )
        meta = {
            "format": FORMAT_VERSION,
            "columns": list(columns),
            "units": units,
            "chunk_rows": chunk_rows,
            "header": header,
        }
        try:
            header_json = json.dumps(meta).encode("utf-8")
        except (TypeError, ValueError) as err:
            raise TypeError(f"run log header is not JSON-serialisable: {err}") from err

        super().__init__(os.fspath(path), len(columns), capacity_rows, wait_when_full_s)
        self.columns = columns
        self.units = units
        self._chunk_rows = chunk_rows
        self._ring_view = memoryview(self._ring)
        self._fsync = fsync
        self._poll_s = poll_s
        self._closing = False
        self._close_called = False

        self._file = open(self.path, "xb", buffering=0)  # raw: every write is one os.write
        try:
            self._write_record(MAGIC + _U32.pack(len(header_json)) + header_json
                               + _U32.pack(zlib.crc32(header_json)))
        except BaseException:
            self._file.close()
            raise
        self._thread = threading.Thread(target=self._run, name="runlog-writer", daemon=True)
        self._thread.start()

    # -- loop thread: append (and latest, rows_appended, rows_written, writer_error) are
    # LogRing's, compiled with the loop in the compiled build -------------------------------

    def close(self) -> None:
        """Write what is left (partial last chunk), the end record; join the writer thread.

        Idempotent. Raises :class:`LogWriteError` (once) if the writer thread failed, as the
        log then lacks rows that ``append`` accepted.
        """
        if self._close_called:
            return
        self._close_called = True
        self._refusing = True
        self._closing = True
        self._wake.set()
        self._thread.join()
        if self._writer_error is not None:
            raise LogWriteError(
                f"{self.path}: run log writer failed after {self._written} of {self._appended} "
                f"rows: {self._writer_error!r}"
            ) from self._writer_error

    def __enter__(self) -> RunLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writer thread -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                closing = self._closing
                self._drain(final=closing)
                if closing:
                    count = struct.pack("<Q", self._written)
                    self._write_record(_END.pack(END_TAG, self._written, zlib.crc32(count)))
                    return
                self._wake.wait(self._poll_s)  # set by close() and by a waiting append
                self._wake.clear()  # before re-reading the flags, so no wake-up is lost
        except BaseException as err:  # noqa: BLE001 - handed to the loop via append/close
            self._writer_error = err
            self._refusing = True
        finally:
            try:
                self._file.close()
            except OSError as err:
                if self._writer_error is None:
                    self._writer_error = err
                    self._refusing = True

    def _drain(self, *, final: bool) -> None:
        """Write every complete chunk in the ring; with ``final`` also the partial rest.

        All chunks pending up to the end of the ring go out in one ``write``: the writer gets the
        GIL only every few ms while the loop thread computes, so one chunk per wake-up would
        cap it far below what a free-running (simulated-clock) loop produces.
        """
        c, cap, rb = self._chunk_rows, self._capacity, self._row_bytes
        while True:
            pending = self._appended - self._written
            slot = self._written % cap  # a multiple of c, as is cap: chunks never wrap
            if pending >= c:
                n = min(pending // c * c, cap - slot)
            elif final and pending > 0:
                n = pending
            else:
                return
            records: list[bytes | memoryview] = []
            for first in range(slot, slot + n, c):
                rows = min(c, slot + n - first)
                payload = self._ring_view[first * rb:(first + rows) * rb]
                records += [_CHUNK_HEAD.pack(CHUNK_TAG, rows, _crc32_holding_gil(payload)), payload]
            self._write_record(b"".join(records))
            self._written += n  # frees the slots for append
            if self._space_waiters:
                self._space.set()

    def _write_record(self, data: bytes) -> None:
        """One record, one ``write`` (looped only for a short write)."""
        view = memoryview(data)
        while view:
            view = view[self._file.write(view):]
        if self._fsync:
            os.fsync(self._file.fileno())


def _crc32_holding_gil(data: memoryview) -> int:
    """``zlib.crc32`` in pieces of at most 5 KiB: on larger buffers it releases the GIL, and
    getting it back from a busy loop thread costs the writer a whole switch interval (5 ms)."""
    crc = 0
    for i in range(0, len(data), _CRC_PIECE):
        crc = zlib.crc32(data[i:i + _CRC_PIECE], crc)
    return crc


def _check_columns(columns: tuple[str, ...]) -> None:
    if not columns:
        raise ValueError("a run log needs at least one column")
    for name in columns:
        # Identifiers become CSV headers and numpy field names unchanged.
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"column name {name!r} is not an identifier")
    if len(set(columns)) != len(columns):
        dup = sorted({c for c in columns if columns.count(c) > 1})
        raise ValueError(f"duplicate column names {dup}")


# --- reader ---------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RunLog:
    """A run log as read back. ``data`` is rows × columns float64."""

    header: dict[str, Any]
    columns: tuple[str, ...]
    units: dict[str, str]
    data: np.ndarray
    complete: bool  # end record seen, its row count agrees, nothing after it
    torn_tail: bool  # the file ends inside a record (writer killed mid-write, disk full)
    problem: str | None  # one line naming the byte offset, or None for a complete log

    def column(self, name: str) -> np.ndarray:
        """One column (a view into ``data``)."""
        try:
            j = self.columns.index(name)
        except ValueError:
            raise KeyError(f"no column {name!r} (columns: {', '.join(self.columns)})") from None
        return self.data[:, j]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.column(name)

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def to_numpy(self) -> np.ndarray:
        """A structured array with one float64 field per column (``a["t_s"]``)."""
        from .log_data import to_numpy

        return to_numpy(self)

    def to_pandas(self, *, named_codes: bool = True):
        """A pandas DataFrame (pandas is optional: a clear ImportError without it). With
        ``named_codes`` fault / drive_state are categoricals of names; ``df.attrs`` holds
        ``units`` and ``header``."""
        from .log_data import to_pandas

        return to_pandas(self, named_codes=named_codes)


def read_log(path: PathLike, *, strict: bool = False) -> RunLog:
    """Read a run log, recovering the intact prefix of a torn or corrupt file.

    With ``strict`` anything short of a complete log raises :class:`LogFormatError`.
    """
    name = os.fspath(path)
    blob = Path(path).read_bytes()
    meta, off = _parse_header(blob, name)
    columns = tuple(meta["columns"])
    parts, complete, torn, problem = _scan_records(blob, off, name, len(columns), meta["chunk_rows"])
    if strict and problem is not None:
        raise LogFormatError(problem)
    data = np.concatenate(parts) if parts else np.empty((0, len(columns)), dtype=_F64)
    return RunLog(
        header=meta["header"],
        columns=columns,
        units=meta["units"],
        data=data.astype(np.float64, copy=False),  # native order (a copy only on big-endian)
        complete=complete,
        torn_tail=torn,
        problem=problem,
    )


def _scan_records(
    blob: bytes, off: int, name: str, ncols: int, chunk_rows: int
) -> tuple[list[np.ndarray], bool, bool, str | None]:
    """Chunk and end records from ``off``: (row blocks, complete, torn_tail, problem)."""
    parts: list[np.ndarray] = []
    rows = 0
    size = len(blob)

    def torn(what: str, need: int) -> tuple[list[np.ndarray], bool, bool, str]:
        return parts, False, True, (f"{name}: {what} at byte offset {off} torn (file ends after "
                                    f"{size - off} of {need} bytes); recovered {rows} rows before it")

    def corrupt(what: str) -> tuple[list[np.ndarray], bool, bool, str]:
        return parts, False, False, f"{name}: {what}; recovered {rows} rows before it"

    while off < size:
        tag = blob[off:off + 4]
        if tag == CHUNK_TAG:
            if size - off < _CHUNK_HEAD.size:
                return torn("chunk", _CHUNK_HEAD.size)
            _, n, crc = _CHUNK_HEAD.unpack_from(blob, off)
            if not 1 <= n <= chunk_rows:
                return corrupt(f"chunk at byte offset {off}: bad row count {n} (chunk_rows {chunk_rows})")
            need = _CHUNK_HEAD.size + n * ncols * 8
            if size - off < need:
                return torn("chunk", need)
            start = off + _CHUNK_HEAD.size
            if zlib.crc32(memoryview(blob)[start:off + need]) != crc:
                return corrupt(f"chunk at byte offset {off}: CRC mismatch")
            parts.append(np.frombuffer(blob, _F64, n * ncols, start).reshape(n, ncols))
            rows += n
            off += need
        elif tag == END_TAG:
            if size - off < _END.size:
                return torn("end record", _END.size)
            _, total, crc = _END.unpack_from(blob, off)
            if zlib.crc32(blob[off + 4:off + 12]) != crc:
                return corrupt(f"end record at byte offset {off}: CRC mismatch")
            if total != rows:
                return parts, False, False, (f"{name}: end record at byte offset {off} says {total} "
                                             f"rows but the chunks before it hold {rows}")
            if off + _END.size != size:
                return parts, False, False, (f"{name}: {size - off - _END.size} unexpected bytes "
                                             f"after the end record at byte offset {off}")
            return parts, True, False, None
        elif not blob[off:].strip(b"\0"):
            return parts, False, True, (f"{name}: zero-filled tail from byte offset {off} (as after "
                                        f"a power loss); recovered {rows} rows before it")
        elif len(tag) < 4 and (CHUNK_TAG.startswith(tag) or END_TAG.startswith(tag)):
            return torn("record", 4)
        else:
            return corrupt(f"record at byte offset {off}: bad tag {tag!r}")
    return parts, False, False, (f"{name}: no end record at byte offset {off} (writer killed, "
                                 f"crashed or still running); recovered {rows} rows")


def _parse_header(blob: bytes, name: str) -> tuple[dict[str, Any], int]:
    """Magic and header record; returns the header JSON and the offset of the first chunk."""
    def bad(offset: int, what: str) -> LogFormatError:
        return LogFormatError(f"{name}: byte offset {offset}: {what}")

    if blob[:len(MAGIC)] != MAGIC:
        raise bad(0, f"not a frictionctl run log (magic {blob[:len(MAGIC)]!r}, expected {MAGIC!r})")
    off = len(MAGIC)
    if len(blob) < off + 4:
        raise bad(off, "header length truncated")
    (length,) = _U32.unpack_from(blob, off)
    if length > _MAX_HEADER_BYTES or off + 4 + length + 4 > len(blob):
        raise bad(off, f"header length {length} runs past the end of the file ({len(blob)} bytes)")
    text = blob[off + 4:off + 4 + length]
    (crc,) = _U32.unpack_from(blob, off + 4 + length)
    if zlib.crc32(text) != crc:
        raise bad(off, "header CRC mismatch")
    try:
        meta = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise bad(off + 4, f"header is not UTF-8 JSON: {err}") from err
    except RecursionError:  # a crafted header nested thousands deep: garbage, not a crash
        raise bad(off + 4, "header JSON nested too deep") from None
    ok = (
        isinstance(meta, dict)
        and meta.get("format") == FORMAT_VERSION
        and isinstance(meta.get("columns"), list)
        and len(meta["columns"]) > 0
        and all(isinstance(c, str) for c in meta["columns"])
        and isinstance(meta.get("units"), dict)
        and isinstance(meta.get("chunk_rows"), int)
        and meta["chunk_rows"] >= 1
        and isinstance(meta.get("header"), dict)
    )
    if not ok:
        raise bad(off + 4, "header JSON lacks format 1, columns, units, chunk_rows or header")
    return meta, off + 4 + length + 4


# --- export ---------------------------------------------------------------------------------------


def export_csv(log: RunLog, path: PathLike, columns: Sequence[str] | None = None, *,
               named_codes: bool = True, units: str = "sidecar") -> list[str]:
    """CSV export: see :func:`controller.log_data.export_csv` (column names, then '%.17g'
    values; fault / drive_state by name; units in a ``<path>.json`` sidecar or a second row)."""
    from .log_data import export_csv as _export

    return _export(log, path, columns, named_codes=named_codes, units=units)
