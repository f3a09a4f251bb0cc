"""What the ODrive CAN and ASCII tests share: factory fixtures that clean up, a PD loop, and the
driver-against-emulator checks whose steps are the same on both links."""

from __future__ import annotations

import time
from typing import Callable, Iterator, TypeVar

import pytest

from controller.clock import RealClock, SimClock
from drivers.backend import Backend, Feedback
from drivers.odrive_codec import AxisState
from hil.odrive_axis import ODriveEmulatorBase

DT = 0.001  # emulator plant period and test loop period [s]

T = TypeVar("T")


def made_by(build: Callable[..., T], close: Callable[[T], None]) -> Iterator[Callable[..., T]]:
    """The body of a factory fixture (``yield from made_by(...)``): yields ``make``, which builds
    with ``build`` and remembers; at teardown ``close`` is called on everything made."""
    made: list[T] = []

    def make(*args, **kw) -> T:
        item = build(*args, **kw)
        made.append(item)
        return item

    yield make
    for item in made:
        close(item)


def pd_ticks(backend: Backend, clock: SimClock, n: int, target_rad: float) -> list[Feedback]:
    """A simple PD position loop (ω ≈ 125 rad/s, ζ ≈ 0.7), torque limited to 3 N·m."""
    samples = []
    for _ in range(n):
        fb = backend.read()
        samples.append(fb)
        u = 1250.0 * (target_rad - fb.position_rad) - 14.0 * fb.velocity_rad_s
        backend.write(max(-3.0, min(3.0, u)))
        clock.advance(DT)
    return samples


def check_realtime_pd(emu: ODriveEmulatorBase, backend: Backend, clock: RealClock) -> None:
    """A gentle PD (ω ≈ 50 rad/s) at 500 Hz of wall time, tolerant of a loaded machine, moves the
    REALTIME plant to the target and holds it there (within the friction band)."""
    target = 0.01
    with backend:
        backend.enable()
        t0 = clock.now()
        for k in range(200):  # 0.4 s at 500 Hz
            clock.sleep_until(t0 + k * 0.002)
            fb = backend.read()
            u = 200.0 * (target - fb.position_rad) - 6.0 * fb.velocity_rad_s
            backend.write(max(-1.0, min(1.0, u)))
    assert emu.wait_for(lambda e: e.axis_state == AxisState.IDLE, 1.0)
    assert 0.5 * target < emu.plant.theta_rad < 1.5 * target


def check_idle_after_close_and_after_exception(emu: ODriveEmulatorBase, backend: Backend) -> None:
    """Closing an enabled backend, and an exception inside ``with backend``, both leave the axis
    IDLE with zero torque input."""
    backend.open()
    backend.enable()
    assert emu.axis_state == AxisState.CLOSED_LOOP_CONTROL  # enable returned once it was
    backend.close()
    assert emu.wait_for(lambda e: e.axis_state == AxisState.IDLE, 1.0)
    with pytest.raises(RuntimeError, match="boom"):
        with backend:
            backend.enable()
            backend.write(0.2)
            raise RuntimeError("boom")
    assert not backend.is_open
    assert emu.wait_for(lambda e: e.axis_state == AxisState.IDLE, 1.0)
    assert emu.axis.input_torque_nm == 0.0  # safe_stop wrote zero before disabling
    backend.close()  # twice is fine


def read_through_dropped_reply(emu: ODriveEmulatorBase, backend: Backend,
                               timeout_s: float) -> Feedback:
    """On an enabled backend: one reply is dropped, so the read waits its ``timeout_s`` and
    returns the previous sample again (stale). Returns that sample."""
    first = backend.read()
    emu.drop_next(1)  # the (first) reply of the next tick
    t0 = time.monotonic()
    stale = backend.read()
    waited = time.monotonic() - t0
    assert stale.sequence == first.sequence
    assert stale.position_rad == first.position_rad
    assert timeout_s <= waited < 0.5
    return first


def run_then_go_silent(emu: ODriveEmulatorBase, backend: Backend, clock: SimClock,
                       n_ticks: int) -> None:
    """Enable, run ``n_ticks`` of the PD loop (each feeds the drive watchdog), then send nothing
    until the drive watchdog has expired."""
    backend.enable()
    pd_ticks(backend, clock, n_ticks, 0.001)
    assert emu.axis_error == 0  # fed by every tick
    # the loop dies: nothing is sent any more (the firmware's bit: 0.5.6 0x800, 0.6 0x1000000)
    assert emu.wait_for(lambda e: e.axis_error & e.axis.dialect.watchdog_expired, 1.0)
