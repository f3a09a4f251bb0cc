"""Run-log benchmark (``frictionctl bench log``): what the crash-safe log costs the loop per tick,
beside baselines measured in the same run. A command that prints figures, not a test.

1. ``RunLogWriter.append`` of one row of the loop's 31 columns (the loop thread's whole cost:
   pack into the ring; the writer thread does the I/O), best of N.
2. Baselines: ``struct.pack_into`` of the same row alone (the floor under any binary format),
   and a plain buffered ``file.write(struct.pack(row))`` per tick (the simplest writer: no
   ring, no thread, but I/O in the loop's thread and no CRC).
3. The writer thread's share: wall time of appending N rows and closing (all on disk) against
   the append time alone.
4. Reading back: rows per second of ``read_log``, and ``to_numpy``.
"""

from __future__ import annotations

import argparse
import struct
import tempfile
import time
from pathlib import Path

from controller.loop import COLUMN_NAMES, LOG_COLUMNS
from controller.runlog import RunLogWriter, read_log


def _row(i: int) -> tuple[float, ...]:
    return tuple(float(i) * 1e-3 + j for j in range(len(COLUMN_NAMES)))


def _time_append(path: Path, rows: list, chunk_rows: int) -> tuple[float, float]:
    """(append seconds, append + close seconds) for ``rows``."""
    with RunLogWriter(path, COLUMN_NAMES, {"bench": True}, units=dict(LOG_COLUMNS),
                      chunk_rows=chunk_rows, capacity_rows=20 * chunk_rows,
                      wait_when_full_s=float("inf")) as w:
        t0 = time.perf_counter()
        append = w.append
        for r in rows:
            append(r)
        t1 = time.perf_counter()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t0


def _time_pack(rows: list) -> float:
    packer = struct.Struct(f"<{len(COLUMN_NAMES)}d")
    ring = bytearray(packer.size * 2000)
    size = packer.size
    t0 = time.perf_counter()
    for i, r in enumerate(rows):
        packer.pack_into(ring, (i % 2000) * size, *r)
    return time.perf_counter() - t0


def _time_plain_write(path: Path, rows: list) -> float:
    packer = struct.Struct(f"<{len(COLUMN_NAMES)}d")
    with open(path, "wb") as f:
        t0 = time.perf_counter()
        for r in rows:
            f.write(packer.pack(*r))
        f.flush()
        return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="frictionctl bench log", description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000, help="rows per measurement (200 s at 1 kHz)")
    p.add_argument("--repeat", type=int, default=5, help="best of N")
    p.add_argument("--chunk-rows", type=int, default=100, help="rows per chunk (0.1 s at 1 kHz)")
    args = p.parse_args(argv)
    rows = [_row(i) for i in range(args.rows)]
    n = args.rows
    best = {"append": 1e9, "close": 1e9, "pack": 1e9, "plain": 1e9, "read": 1e9, "numpy": 1e9}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            path = Path(tmp) / f"b{i}.fctl"
            a, c = _time_append(path, rows, args.chunk_rows)
            best["append"] = min(best["append"], a)
            best["close"] = min(best["close"], c)
            best["pack"] = min(best["pack"], _time_pack(rows))
            best["plain"] = min(best["plain"], _time_plain_write(Path(tmp) / f"p{i}.bin", rows))
            t0 = time.perf_counter()
            log = read_log(path)
            best["read"] = min(best["read"], time.perf_counter() - t0)
            t0 = time.perf_counter()
            log.to_numpy()
            best["numpy"] = min(best["numpy"], time.perf_counter() - t0)
            size = path.stat().st_size
            path.unlink()
    us = {k: v / n * 1e6 for k, v in best.items()}
    print(f"run log, {n} rows x {len(COLUMN_NAMES)} columns, chunks of {args.chunk_rows}, best of {args.repeat}")
    print(f"  RunLogWriter.append (the loop's cost)   {us['append']:.2f} us/row")
    print(f"  baseline struct.pack_into alone         {us['pack']:.2f} us/row  "
          f"(append = {us['append'] / us['pack']:.2f}x the floor)")
    print(f"  baseline plain file.write per row       {us['plain']:.2f} us/row  "
          f"(I/O in the loop thread, no CRC, no recovery)")
    print(f"  append + close (on disk, writer thread) {us['close']:.2f} us/row")
    print(f"  file size {size / n:.1f} bytes/row ({size / 1e6:.1f} MB)")
    print(f"  read_log {n / best['read'] / 1e6:.1f} M rows/s, to_numpy {n / best['numpy'] / 1e6:.1f} M rows/s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
