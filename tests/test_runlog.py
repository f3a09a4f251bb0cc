"""Run log: format pinned by golden bytes, round trips, crash recovery (real SIGKILL), corruption."""

from __future__ import annotations

import json
import math
import os
import select
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest

from controller.runlog import (
    LogFormatError,
    LogOverflowError,
    LogWriteError,
    RunLogWriter,
    export_csv,
    read_log,
)
from drivers.errors import FrictionctlError

REPO = Path(__file__).resolve().parents[1]
COLS = ("t_s", "pos_rad", "vel_rad_s", "torque_cmd_nm", "late_us", "fault")
UNITS = {"t_s": "s", "pos_rad": "rad", "vel_rad_s": "rad/s", "torque_cmd_nm": "N·m", "late_us": "µs"}
K = len(COLS)
END_BYTES = 16  # b"END_" + u64 + u32


def det_row(i: int) -> tuple[float, ...]:
    """Deterministic, exactly representable row i."""
    return tuple(float(i * (j + 1)) for j in range(K))


def write_log(path: Path, nrows: int, *, chunk_rows: int = 100, header: dict | None = None) -> Path:
    with RunLogWriter(path, COLS, header or {"run": "test"}, chunk_rows=chunk_rows,
                      capacity_rows=10 * chunk_rows, units=UNITS, wait_when_full_s=math.inf) as w:
        for i in range(nrows):
            w.append(det_row(i))
    return path


def det_data(nrows: int) -> np.ndarray:
    return np.array([det_row(i) for i in range(nrows)], dtype=np.float64).reshape(nrows, K)


def chunk_bytes(nrows: int) -> int:
    return 12 + nrows * K * 8


# --- format -----------------------------------------------------------------------------------


def test_golden_bytes(tmp_path):
    path = tmp_path / "g.fctl"
    with RunLogWriter(path, ("a", "b"), {"x": 1}, chunk_rows=2, capacity_rows=4) as w:
        for row in [(1.0, -2.0), (0.5, 3.0), (7.0, 8.0)]:
            w.append(row)
    hdr = json.dumps({"format": 1, "columns": ["a", "b"], "units": {}, "chunk_rows": 2,
                      "header": {"x": 1}}).encode()

    def chunk(*values: float) -> bytes:
        payload = struct.pack(f"<{len(values)}d", *values)
        return b"CHNK" + struct.pack("<II", len(values) // 2, zlib.crc32(payload)) + payload

    count = struct.pack("<Q", 3)
    expected = (b"FCTLLOG1\n" + struct.pack("<I", len(hdr)) + hdr + struct.pack("<I", zlib.crc32(hdr))
                + chunk(1.0, -2.0, 0.5, 3.0) + chunk(7.0, 8.0)
                + b"END_" + count + struct.pack("<I", zlib.crc32(count)))
    assert path.read_bytes() == expected


def test_round_trip_many_rows_and_header(tmp_path):
    rng = np.random.default_rng(1)
    data = rng.standard_normal((12_345, K)) * 10.0 ** rng.integers(-300, 300, size=(12_345, K))
    data[0] = [math.inf, -math.inf, -0.0, 5e-324, math.nan, 1.0]
    header = {"config": {"limit_a": math.inf, "gains": [1.0, 0.25]}, "versions": {"numpy": np.__version__}}
    path = tmp_path / "run.fctl"
    # A free-running producer (like a simulated-clock loop) needs wait_when_full_s.
    with RunLogWriter(path, COLS, header, units=UNITS, chunk_rows=100, capacity_rows=300,
                      wait_when_full_s=math.inf) as w:
        for row in data:
            w.append(tuple(row))
    assert (w.rows_appended, w.rows_written) == (12_345, 12_345)

    log = read_log(path, strict=True)
    assert log.complete and not log.torn_tail and log.problem is None
    assert log.columns == COLS and log.units == UNITS and log.header == header
    assert log.data.dtype == np.float64 and log.data.shape == data.shape
    assert log.data.tobytes() == data.tobytes()  # bit-exact, -0.0 and nan included
    assert np.array_equal(log["vel_rad_s"], data[:, 2]) and log.column("t_s") is not None
    with pytest.raises(KeyError, match="no column 'nope'"):
        log["nope"]


@pytest.mark.parametrize("nrows", [0, 1, 99, 100, 101, 250])
def test_chunk_boundaries(tmp_path, nrows):
    path = write_log(tmp_path / "b.fctl", nrows, chunk_rows=100)
    log = read_log(path, strict=True)
    assert log.complete and log.data.shape == (nrows, K)
    assert np.array_equal(log.data, det_data(nrows))
    full, rest = divmod(nrows, 100)
    blob = path.read_bytes()
    (hlen,) = struct.unpack_from("<I", blob, 9)
    body = full * chunk_bytes(100) + (chunk_bytes(rest) if rest else 0) + END_BYTES
    assert len(blob) == 9 + 4 + hlen + 4 + body  # full chunks, one short chunk, end record


# --- writer behaviour ---------------------------------------------------------------------------


def test_close_is_idempotent_and_append_after_close_raises(tmp_path):
    w = RunLogWriter(tmp_path / "c.fctl", COLS, {})
    w.append(det_row(0))
    w.close()
    w.close()
    with pytest.raises(LogWriteError, match="closed"):
        w.append(det_row(1))
    assert read_log(tmp_path / "c.fctl").complete


def test_refuses_bad_arguments(tmp_path):
    (tmp_path / "exists.fctl").write_bytes(b"")
    with pytest.raises(FileExistsError):
        RunLogWriter(tmp_path / "exists.fctl", COLS, {})
    with pytest.raises(ValueError, match="duplicate"):
        RunLogWriter(tmp_path / "a.fctl", ("x", "x"), {})
    with pytest.raises(ValueError, match="identifier"):
        RunLogWriter(tmp_path / "a.fctl", ("x,y",), {})
    with pytest.raises(ValueError, match="unknown columns"):
        RunLogWriter(tmp_path / "a.fctl", ("x",), {}, units={"y": "m"})
    with pytest.raises(ValueError, match="multiple of chunk_rows"):
        RunLogWriter(tmp_path / "a.fctl", ("x",), {}, chunk_rows=100, capacity_rows=150)
    with pytest.raises(TypeError, match="JSON"):
        RunLogWriter(tmp_path / "a.fctl", ("x",), {"obj": object()})
    assert not (tmp_path / "a.fctl").exists()
    with RunLogWriter(tmp_path / "b.fctl", ("x", "y"), {}) as w:
        with pytest.raises(ValueError, match="expected 2 floats"):
            w.append((1.0,))  # would broadcast silently into a numpy row


def _block_writes(w: RunLogWriter, monkeypatch) -> tuple[threading.Event, threading.Event]:
    entered, release = threading.Event(), threading.Event()
    real = w._write_record

    def blocked(data):
        entered.set()
        release.wait()
        real(data)

    monkeypatch.setattr(w, "_write_record", blocked)
    return entered, release


def test_overflow_raises_and_drops_nothing(tmp_path, monkeypatch):
    path = tmp_path / "o.fctl"
    w = RunLogWriter(path, COLS, {}, chunk_rows=10, capacity_rows=30)
    entered, release = _block_writes(w, monkeypatch)
    for i in range(30):  # exactly the capacity fits while the writer is stuck
        w.append(det_row(i))
    assert entered.wait(5.0)
    with pytest.raises(LogOverflowError, match="ring full"):
        w.append(det_row(30))
    assert isinstance(LogOverflowError("x"), FrictionctlError)
    release.set()
    w.close()
    log = read_log(path, strict=True)
    assert np.array_equal(log.data, det_data(30))  # the refused row is absent, none other


def test_wait_when_full_waits_then_raises(tmp_path, monkeypatch):
    w = RunLogWriter(tmp_path / "o.fctl", COLS, {}, chunk_rows=10, capacity_rows=20,
                     wait_when_full_s=0.2)
    entered, release = _block_writes(w, monkeypatch)
    for i in range(20):
        w.append(det_row(i))
    with pytest.raises(LogOverflowError):
        w.append(det_row(20))  # waited 0.2 s for a writer that does not come back
    release.set()
    w.append(det_row(20))  # the writer frees space within the wait
    w.close()
    assert np.array_equal(read_log(tmp_path / "o.fctl", strict=True).data, det_data(21))


def test_writer_failure_faults_append_and_close(tmp_path, monkeypatch):
    w = RunLogWriter(tmp_path / "f.fctl", COLS, {}, chunk_rows=10, capacity_rows=100)

    def disk_full(data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(w, "_write_record", disk_full)
    for i in range(10):
        w.append(det_row(i))
    w._thread.join(5.0)  # the writer thread ends on its error
    assert isinstance(w.writer_error, OSError) and w.rows_written == 0
    with pytest.raises(LogWriteError, match="No space left") as exc:
        w.append(det_row(10))
    assert isinstance(exc.value.__cause__, OSError)
    with pytest.raises(LogWriteError, match="after 0 of 10 rows"):
        w.close()
    w.close()  # the second close is quiet


# --- crash recovery ------------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {repo!r})
    from controller.runlog import RunLogWriter
    K = {k}
    w = RunLogWriter({path!r}, [f"c{{j}}" for j in range(K)], {{"child": True}},
                     chunk_rows={chunk}, capacity_rows={chunk} * 20, poll_s=0.01)
    i = 0
    while True:
        w.append(tuple(float(i * (j + 1)) for j in range(K)))
        i += 1
        if i == {n}:
            print("appended", i, w.rows_written, flush=True)
        time.sleep(0.001)
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_loses_at_most_the_unwritten_chunks(tmp_path):
    path, n, chunk = tmp_path / "killed.fctl", 300, 50
    code = CHILD.format(repo=str(REPO), k=K, path=str(path), chunk=chunk, n=n)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 20.0)
        assert ready, "child did not report"
        line = proc.stdout.readline().split()
        assert line[:2] == ["appended", str(n)], line
        written_at_report = int(line[2])
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    log = read_log(path)
    assert not log.complete and log.problem is not None
    assert log.header == {"child": True}
    got = log.data.shape[0]
    assert got >= written_at_report  # what the writer had handed to the kernel survives
    assert got >= n - 2 * chunk  # lost: at most one chunk + one 10 ms poll, with slack
    assert got % chunk == 0  # only whole chunks, never a partial row
    assert np.array_equal(log.data, det_data(got))
    with pytest.raises(LogFormatError, match="byte offset"):
        read_log(path, strict=True)


def test_truncation_anywhere_in_the_last_chunk_recovers_the_prefix(tmp_path):
    whole = write_log(tmp_path / "w.fctl", 250, chunk_rows=100).read_bytes()
    last = len(whole) - END_BYTES - chunk_bytes(50)  # byte offset of the final (50-row) chunk
    cut_path = tmp_path / "cut.fctl"
    for cut in [last + 1, last + 3, last + 4, last + 11, last + 12, last + 13, last + 400,
                len(whole) - END_BYTES - 1]:
        cut_path.write_bytes(whole[:cut])
        log = read_log(cut_path)
        assert log.torn_tail and not log.complete, cut
        assert np.array_equal(log.data, det_data(200)), cut
        assert f"byte offset {last} torn" in log.problem and "recovered 200 rows" in log.problem
        with pytest.raises(LogFormatError, match=f"byte offset {last}"):
            read_log(cut_path, strict=True)

    cut_path.write_bytes(whole[:last])  # cut exactly at a record boundary: not torn, no end
    log = read_log(cut_path)
    assert not log.torn_tail and not log.complete and f"no end record at byte offset {last}" in log.problem
    assert log.data.shape == (200, K)

    for cut in range(len(whole) - END_BYTES, len(whole)):  # inside the end record: all rows
        cut_path.write_bytes(whole[:cut])
        log = read_log(cut_path)
        assert not log.complete and np.array_equal(log.data, det_data(250)), cut
        assert log.torn_tail == (cut > len(whole) - END_BYTES), cut


def test_zero_filled_tail_counts_as_torn(tmp_path):
    whole = write_log(tmp_path / "w.fctl", 150, chunk_rows=100).read_bytes()
    path = tmp_path / "z.fctl"
    path.write_bytes(whole[:len(whole) - END_BYTES - chunk_bytes(50)] + bytes(4096))
    log = read_log(path)
    assert log.torn_tail and "zero-filled" in log.problem and log.data.shape == (100, K)


@pytest.mark.parametrize("where", ["payload", "tag", "row_count", "crc"])
def test_corrupt_chunk_stops_there_and_keeps_the_prefix(tmp_path, where):
    whole = bytearray(write_log(tmp_path / "w.fctl", 400, chunk_rows=100).read_bytes())
    second = len(whole) - END_BYTES - 3 * chunk_bytes(100)  # offset of the second chunk
    assert whole[second:second + 4] == b"CHNK"
    whole[second + {"payload": 12 + 555, "tag": 1, "row_count": 5, "crc": 9}[where]] ^= 0x40
    path = tmp_path / "bad.fctl"
    path.write_bytes(bytes(whole))

    log = read_log(path)
    assert not log.complete and not log.torn_tail
    assert f"at byte offset {second}:" in log.problem and "recovered 100 rows before it" in log.problem
    assert np.array_equal(log.data, det_data(100))
    with pytest.raises(LogFormatError, match=f"byte offset {second}"):
        read_log(path, strict=True)


def test_end_record_with_wrong_count_is_not_complete(tmp_path):
    whole = bytearray(write_log(tmp_path / "w.fctl", 120, chunk_rows=100).read_bytes())
    count = struct.pack("<Q", 999)
    whole[-END_BYTES:] = b"END_" + count + struct.pack("<I", zlib.crc32(count))
    (tmp_path / "e.fctl").write_bytes(bytes(whole))
    log = read_log(tmp_path / "e.fctl")
    assert not log.complete and "says 999 rows" in log.problem and log.data.shape == (120, K)


@pytest.mark.parametrize("content, offset", [
    (b"", 0),
    (b"time,pos\n0,1\n", 0),
    (b"FCTLLOG1\n\x05", 9),
    (b"FCTLLOG1\n" + struct.pack("<I", 10**6) + b"{}", 9),
])
def test_not_a_log_raises_format_error(tmp_path, content, offset):
    path = tmp_path / "garbage.fctl"
    path.write_bytes(content)
    with pytest.raises(LogFormatError, match=f"garbage.fctl: byte offset {offset}:"):
        read_log(path)


def test_corrupt_header_raises_format_error(tmp_path):
    whole = bytearray(write_log(tmp_path / "w.fctl", 10).read_bytes())
    whole[20] ^= 0x01  # inside the header JSON
    (tmp_path / "h.fctl").write_bytes(bytes(whole))
    with pytest.raises(LogFormatError, match="byte offset 9: header CRC mismatch"):
        read_log(tmp_path / "h.fctl")


# --- export --------------------------------------------------------------------------------------


def test_export_csv_loads_with_genfromtxt_and_round_trips(tmp_path):
    path = tmp_path / "x.fctl"
    values = np.array([[0.1, 1 / 3, -0.0, 5e-324, 1.7976931348623157e308, math.pi],
                       [-1e-300, 2.0 ** 0.5, math.inf, -math.inf, 123456789.123456789, 1e22]])
    with RunLogWriter(path, COLS, {}) as w:
        for row in values:
            w.append(tuple(row))
    log = read_log(path)

    export_csv(log, tmp_path / "x.csv", named_codes=False)  # named codes: test_log_data.py
    first = (tmp_path / "x.csv").read_text().splitlines()[0]
    assert first == ",".join(COLS)
    table = np.genfromtxt(tmp_path / "x.csv", delimiter=",", names=True)
    assert table.dtype.names == COLS
    for j, name in enumerate(COLS):
        assert table[name].tobytes() == values[:, j].tobytes(), name

    export_csv(log, tmp_path / "sub.csv", columns=["late_us", "t_s"], named_codes=False)
    sub = np.genfromtxt(tmp_path / "sub.csv", delimiter=",", names=True)
    assert sub.dtype.names == ("late_us", "t_s") and np.array_equal(sub["t_s"], values[:, 0])
    with pytest.raises(KeyError):
        export_csv(log, tmp_path / "bad.csv", columns=["nope"])
