"""A scenario's ``faults:`` injected into a run: which backend takes which kind, what each kind
does there, and the trigger that fires them on the tick they are due.

Every kind acts where the real fault would: the simulated plant and drive (``sim``), or the
emulated drive at the protocol level — frames really dropped, error and remote frames really
sent on the python-can bus, the pseudo-terminal really closed. The drivers are never touched.
An ODrive's drive_fault is the drive-side fault bit of the firmware the emulator speaks
(``drive.emulated_firmware`` on the bench): 0x40 would be MISSING_INPUT on 0.6.

| kind | sim | cia402 | odrive_can | odrive_ascii |
|---|---|---|---|---|
| stale | feedback stops updating | | | |
| nan_current | current reads NaN | | | |
| drive_fault | FAULT with a code | EMCY 0x2310, FAULT | axis error (heartbeat): 0.5.6 MOTOR_FAILED 0x40, 0.6 DRV_FAULT 0x20 | axis error MOTOR_FAILED 0x40 |
| blocked_rotor, inverted_sign, load_step | the plant | | | |
| frame_loss | | TPDOs of ``frames`` SYNCs not sent (0: none from then on) | ``frames`` replies not sent | ``frames`` reply lines not sent |
| bus_off | | error frame, bus-off class | error frame, bus-off class | |
| error_frames | | ``frames`` error frames (protocol violation class) | the same | |
| rtr | | remote frame on 0x700 + node (node guarding) | | |
| idle_ignored | | the disable controlword is not obeyed | IDLE is not obeyed | IDLE is not obeyed |
| heartbeat_stop | | the drive's heartbeat stops | the axis heartbeat stops | |
| serial_unplug | | | | the pty closes |
| line_noise | | | | noise bytes ahead of the next reply |
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

from controller.config import ScenarioFault
from controller.schema import ConfigError
from drivers.backend import Clock
from drivers.cia402_protocol import CAN_ERR_BUSOFF, CAN_ERR_PROT
from drivers.odrive_codec import AxisError
from drivers.odrive_codec06 import ODriveError

from .sim_backend import FAULTS as SIM_FAULTS

_ALL_FRAMES = 1 << 30  # frame_loss with frames 0: every answer from then on
CIA402_DRIVE_FAULT = 0x2310  # EMCY error code
# an ODrive's drive_fault per firmware line (the emulated axis's dialect): a motor / gate-driver fault
ODRIVE_DRIVE_FAULT = {(0, 5): AxisError.MOTOR_FAILED, (0, 6): ODriveError.DRV_FAULT}
LINE_NOISE = b"\x13\x7f~#\xfe"  # not a reply: corrupts the next one

SUPPORTED: dict[str, tuple[str, ...]] = {
    "sim": SIM_FAULTS,
    "cia402": ("drive_fault", "frame_loss", "bus_off", "error_frames", "rtr", "idle_ignored",
               "heartbeat_stop"),
    "odrive_can": ("drive_fault", "frame_loss", "bus_off", "error_frames", "idle_ignored",
                   "heartbeat_stop"),
    "odrive_ascii": ("drive_fault", "frame_loss", "idle_ignored", "serial_unplug", "line_noise"),
}


def check_supported(scenario: str, faults: Sequence[ScenarioFault], backend: str) -> None:
    """Refuse (one-line ConfigError at the key path) a fault the backend cannot inject."""
    kinds = SUPPORTED[backend]
    for i, fault in enumerate(faults):
        if fault.kind not in kinds:
            raise ConfigError(f"scenarios.{scenario}.faults[{i}].kind",
                              f"{fault.kind} cannot be injected on {backend} (it takes: "
                              f"{', '.join(kinds)})")


def injector(backend: str, target: Any) -> Callable[[ScenarioFault], None]:
    """The function that injects one fault into ``target``: the SimBackend (``sim``) or the
    protocol's emulator."""
    if backend == "sim":
        return lambda f: target.inject(f.kind, torque_nm=f.torque_nm or 0.0)
    if backend == "cia402":
        return lambda f: _inject_cia402(target, f)
    if backend == "odrive_can":
        return lambda f: _inject_odrive_can(target, f)
    return lambda f: _inject_odrive_ascii(target, f)


def _frames(fault: ScenarioFault) -> int:
    return fault.frames or _ALL_FRAMES


def _inject_can_bus(emu: Any, f: ScenarioFault) -> bool:
    """What both CAN emulators take alike (frames lost, bus errors, a silent heartbeat); False
    for a kind that is the protocol's own."""
    kind = f.kind
    if kind == "frame_loss":
        emu.drop_next(_frames(f))
    elif kind == "bus_off":
        emu.send_error_frame(CAN_ERR_BUSOFF)
    elif kind == "error_frames":
        for _ in range(f.frames):
            emu.send_error_frame(CAN_ERR_PROT)
    elif kind == "heartbeat_stop":
        emu.stop_heartbeat()
    else:
        return False
    return True


def _inject_cia402(emu: Any, f: ScenarioFault) -> None:
    kind = f.kind
    if _inject_can_bus(emu, f):
        return
    if kind == "drive_fault":
        emu.inject_fault(CIA402_DRIVE_FAULT)
    elif kind == "rtr":
        emu.send_remote_frame(emu.ids.heartbeat)
    elif kind == "idle_ignored":
        emu.ignore_disable()
    else:  # pragma: no cover - check_supported ran first
        raise ValueError(kind)


def odrive_drive_fault(emu: Any) -> int:
    """The axis error bit drive_fault latches on an emulated ODrive, in its firmware's table."""
    return int(ODRIVE_DRIVE_FAULT[emu.axis.dialect.line])


def _inject_odrive_can(emu: Any, f: ScenarioFault) -> None:
    kind = f.kind
    if _inject_can_bus(emu, f):
        return
    if kind == "drive_fault":
        emu.inject_axis_error(odrive_drive_fault(emu))
    elif kind == "idle_ignored":
        emu.ignore_idle()
    else:  # pragma: no cover
        raise ValueError(kind)


def _inject_odrive_ascii(emu: Any, f: ScenarioFault) -> None:
    kind = f.kind
    if kind == "drive_fault":
        emu.inject_axis_error(odrive_drive_fault(emu))
    elif kind == "frame_loss":
        emu.drop_next(_frames(f))
    elif kind == "idle_ignored":
        emu.ignore_idle()
    elif kind == "serial_unplug":
        emu.close_port()
    elif kind == "line_noise":
        emu.inject_garbage(LINE_NOISE)
    else:  # pragma: no cover
        raise ValueError(kind)


class FaultTrigger(Clock):
    """The loop's clock, firing the scenario's faults: each on the first tick whose time
    ``k·dt`` is at or after its ``at_s``, once the tick's deadline is reached and before the
    tick reads. The tick is known exactly from the deadline the loop waits for (tick 0 is the
    first wait), so :attr:`fired` says on which tick each fault went in."""

    def __init__(self, clock: Clock, dt_s: float, faults: Sequence[ScenarioFault],
                 inject: Callable[[ScenarioFault], None]) -> None:
        self._clock = clock
        self._dt = dt_s
        self.pending = sorted(faults, key=lambda f: f.at_s)
        self._inject = inject
        self._t0: float | None = None
        self.fired: list[tuple[int, ScenarioFault]] = []
        # wall time at which each tick's wait ended [s, perf_counter]: a fault supervised in
        # wall time (a lost heartbeat) is judged in wall time even when the ticks run lockstep
        self.wall_s: dict[int, float] = {}

    def now(self) -> float:
        return self._clock.now()

    def sleep_until(self, t_s: float) -> None:
        self._clock.sleep_until(t_s)
        if self._t0 is None:
            self._t0 = t_s
        k = round((t_s - self._t0) / self._dt)
        self.wall_s[k] = time.perf_counter()
        if self.pending:
            while self.pending and self.pending[0].at_s <= k * self._dt + 1e-9:
                fault = self.pending.pop(0)
                self._inject(fault)
                self.fired.append((k, fault))

    @property
    def simulated(self) -> bool:
        return self._clock.simulated

    @property
    def loop_clock(self) -> Clock:
        """The clock to give the loop: this trigger, or the wrapped clock itself when there is
        no fault to fire (a scenario without faults pays nothing per tick for the trigger)."""
        return self if self.pending else self._clock

    def report(self) -> list[dict[str, Any]]:
        """The faults that went in, for summary.json: kind, at_s, the tick."""
        return [{"kind": f.kind, "at_s": f.at_s, "tick": k,
                 **({"torque_nm": f.torque_nm} if f.torque_nm is not None else {}),
                 **({"frames": f.frames} if f.frames else {})} for k, f in self.fired]


def arm(scenario: str, faults: Sequence[ScenarioFault], backend: str, target: Any, clock: Clock,
        dt_s: float) -> FaultTrigger:
    """Check the faults against the backend and return the loop clock that fires them."""
    check_supported(scenario, faults, backend)
    return FaultTrigger(clock, dt_s, faults, injector(backend, target))


def record_injected(out: Path, summary: dict[str, Any], trigger: FaultTrigger) -> dict[str, Any]:
    """Add the faults that went in (``injected``) to the summary and its summary.json."""
    if trigger.fired or trigger.pending:
        from controller.runner import write_summary

        summary["injected"] = trigger.report()
        write_summary(out, {k: v for k, v in summary.items() if k != "report"})
    return summary
