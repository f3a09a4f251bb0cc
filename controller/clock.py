"""Clocks for the loop: simulated (lockstep) and real (monotonic, sleep-then-spin).

Ticks are scheduled at absolute times t0 + k·dt; a late tick is measured, never re-anchored.
"""

from __future__ import annotations

from controller.compile_hints import mypyc_attr
import time

from drivers.backend import Clock


@mypyc_attr(allow_interpreted_subclasses=True)
class SimClock(Clock):
    """Simulated time: ``sleep_until`` jumps straight to the deadline (lockstep)."""

    def __init__(self, t0_s: float = 0.0) -> None:
        self._t = t0_s

    def now(self) -> float:
        return self._t

    def sleep_until(self, t_s: float) -> None:
        if t_s > self._t:
            self._t = t_s

    def advance(self, dt_s: float) -> None:
        self._t += dt_s

    @property
    def simulated(self) -> bool:
        return True


@mypyc_attr(allow_interpreted_subclasses=True)
class RealClock(Clock):
    """Monotonic clock. ``sleep_until`` sleeps until ``spin_s`` before the deadline, then spins
    (the OS sleep overshoots by tens of µs to ms; the spin absorbs it).

    The spin is a busy wait that keeps the GIL: other threads (a bus Notifier, the log writer,
    in-process emulators) run during the sleep before it, and one that becomes runnable inside
    the window gets the GIL after the interpreter's switch interval (0.1 ms once
    :func:`controller.rt.realtime_setup` ran). Yielding in the spin (``time.sleep(0)``) cost
    10-20 µs per call under SCHED_FIFO and handed the GIL to whichever thread wanted it just
    before the deadline (``frictionctl bench loop``, README "Measured results")."""

    def __init__(self, spin_s: float = 0.0002, wake_log: list[float] | None = None) -> None:
        self.spin_s = spin_s
        #: if a list: each OS sleep's wake-up delay past ``deadline - spin_s`` [s] is appended
        #: (what the spin window must absorb; ``frictionctl bench loop`` prints it)
        self.wake_log = wake_log
        self._origin = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._origin

    def sleep_until(self, t_s: float) -> None:
        remaining = t_s - self.now()
        if remaining > self.spin_s:
            time.sleep(remaining - self.spin_s)
            if self.wake_log is not None:
                self.wake_log.append(self.now() - (t_s - self.spin_s))
        while self.now() < t_s:
            pass
