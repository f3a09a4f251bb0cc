"""A live status line for real-clock runs, refreshed a few times a second by its own thread
(it only reads the loop's status fields: nothing is added to the tick's hot path)."""

from __future__ import annotations

import sys
import threading

REFRESH_S = 0.25


class StatusLine:
    def __init__(self, loop, stream=None) -> None:
        self.loop = loop
        self.stream = stream or sys.stderr
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="status-line", daemon=True)

    @classmethod
    def start_for(cls, loop) -> "StatusLine":
        line = cls(loop)
        line._thread.start()
        return line

    def render(self) -> str:
        s = self.loop.status
        axis = self.loop.cfg.axis  # µrad and N·m, or µm and N on a linear axis
        rate = (s.tick / s.t_s) if s.t_s > 0 else 0.0
        return (f"t {s.t_s:7.2f} s  rate {rate:7.1f} Hz  late {s.late_us:7.1f} µs  "
                f"err {s.error_rad * 1e6:9.2f} {axis.micro_length}  "
                f"{axis.force_name} {s.torque_nm:+.3f} {axis.force}  "
                f"overruns {s.overruns}  fault {s.fault or '-'}")

    def _run(self) -> None:
        while not self._stop.wait(REFRESH_S):
            print("\r" + self.render(), end="", file=self.stream, flush=True)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
        print("\r" + self.render(), file=self.stream, flush=True)
