"""One emulated ODrive axis (firmware 0.5.6 semantics, or 0.6's) with the simulated turntable behind it.

Shared by the CAN Simple and the ASCII emulators: they differ only in how bytes reach this model.
The firmware line (a :class:`~drivers.odrive_dialect.Dialect`, 0.5.x unless given) decides the
error bits and the heartbeat. Emulated: axis states IDLE and CLOSED_LOOP_CONTROL (the axis is
taken as calibrated; any other requested state sets INVALID_STATE and leaves the axis in IDLE —
0.6: procedure result INVALID_STATE, no axis error), axis errors (any error drops the axis to
IDLE, 0.6: procedure result DISARMED and the error as disarm reason when it ended closed loop;
CLOSED_LOOP is refused while an error is latched; Clear_Errors clears all of it), control/input mode, input torque
→ current command ``torque / Kt`` (only in TORQUE_CONTROL with PASSTHROUGH input; anything else
commands zero current), the current limit, and the drive watchdog (checked only in CLOSED_LOOP;
expiry sets WATCHDOG_TIMER_EXPIRED and goes to IDLE; in LOCKSTEP on wall time only until the
first plant period in closed loop, see ``_watchdog_on_wall_time``). Not emulated: calibration, velocity
limiting in torque mode, the torque ramp input mode, motor/encoder sub-errors.

Not thread-safe: the owning emulator serialises every call under its lock.
:class:`ODriveEmulatorBase` holds what the two emulators share around the axis: the lock, the
service thread's lifecycle and timers, observation, the reply drop/delay injection, an axis
that ignores IDLE, and :meth:`ODriveEmulatorBase.coast` (the plant after the host went quiet).
Units: turns, turns/s, N·m, A, s (wall time for the watchdog).
"""

from __future__ import annotations

import enum
import heapq
import itertools
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from controller.config import PlantConfig
from drivers.odrive_codec import AxisState, ControlMode, Heartbeat, InputMode
from drivers.odrive_codec06 import ErrorStatus, Heartbeat06, ProcedureResult
from drivers.odrive_dialect import DIALECT_05, AnyHeartbeat, Dialect
from hil.plant import Turntable

TWO_PI = 2.0 * math.pi
# LOCKSTEP: the shortest wall-time watchdog before the loop's first plant period [s]
LOCKSTEP_WATCHDOG_FLOOR_S = 0.1
_Emu = TypeVar("_Emu", bound="ODriveEmulatorBase")


class EmuMode(enum.Enum):
    """How an emulator advances its plant.

    LOCKSTEP: one period ``dt_s`` per torque command received (CAN Set_Input_Torque, ASCII ``c``);
    deterministic, independent of wall time. REALTIME: a thread advances the plant by ``dt_s``
    against the wall clock; torque commands only set the input.
    """

    LOCKSTEP = "lockstep"
    REALTIME = "realtime"


@dataclass(frozen=True, slots=True)
class AxisFeedback:
    pos_turns: float  # encoder estimate (quantized to counts) [turns]
    vel_turns_s: float  # [turns/s]
    iq_setpoint_a: float  # current command [A]
    iq_measured_a: float  # measured current (noisy, quantized) [A]


class ODriveAxis:
    """The drive-side state machine of one axis, moving a :class:`Turntable`."""

    def __init__(self, plant: PlantConfig, seed: int = 0, *, dt_s: float = 0.001,
                 watchdog_timeout_s: float | None = None, bus_voltage_v: float = 24.0,
                 dialect: Dialect = DIALECT_05) -> None:
        if dt_s <= 0:
            raise ValueError(f"dt_s must be > 0, got {dt_s}")
        self.plant = Turntable(plant, seed=seed)
        self.dt_s = dt_s
        self.dialect = dialect
        self.state = AxisState.IDLE
        self.error = 0  # axis error bits of the dialect (0.6: the active errors)
        self.disarm_reason = 0  # 0.6: the error that ended closed loop
        self.procedure_result = ProcedureResult.SUCCESS  # 0.6: outcome of the last state request
        self.control_mode = ControlMode.POSITION_CONTROL  # firmware default
        self.input_mode = InputMode.PASSTHROUGH
        self.input_torque_nm = 0.0
        self.current_limit_a = plant.current_loop.limit_a
        self.vel_limit_turns_s = math.inf  # stored, not enforced
        self.watchdog_enabled = watchdog_timeout_s is not None
        self.watchdog_timeout_s = watchdog_timeout_s if watchdog_timeout_s is not None else 0.0
        self.bus_voltage_v = bus_voltage_v
        self.motor_error = 0
        self.steps = 0  # plant periods advanced
        self.ignore_idle = False  # fault injection: IDLE requests are ignored (the axis stays armed)
        self.stepped_in_closed_loop = False  # a plant period ran since entering CLOSED_LOOP
        self._last_feed_s = -math.inf

    # --- host commands ---------------------------------------------------------------------------
    def feed_watchdog(self, now_s: float) -> None:
        self._last_feed_s = now_s

    def request_state(self, requested: int, now_s: float) -> None:
        """Set_Axis_State / ``w axisN.requested_state``."""
        if requested == AxisState.IDLE:
            if not self.ignore_idle:
                self.state = AxisState.IDLE
        elif requested == AxisState.CLOSED_LOOP_CONTROL:
            if self.error == 0:
                if self.state != AxisState.CLOSED_LOOP_CONTROL:
                    self.stepped_in_closed_loop = False
                self.state = AxisState.CLOSED_LOOP_CONTROL
                self._last_feed_s = now_s  # the watchdog counts from entering closed loop
        elif self.dialect.invalid_state:
            self.fail(self.dialect.invalid_state)
        else:
            self.procedure_result = ProcedureResult.INVALID_STATE

    def set_controller_mode(self, control_mode: int, input_mode: int) -> None:
        try:
            self.control_mode = ControlMode(control_mode)
            self.input_mode = InputMode(input_mode)
        except ValueError:
            self.fail(self.dialect.bad_controller_mode)

    def set_input_torque(self, torque_nm: float) -> None:
        self.input_torque_nm = torque_nm

    def set_limits(self, vel_limit_turns_s: float, current_limit_a: float) -> None:
        self.vel_limit_turns_s = vel_limit_turns_s
        self.current_limit_a = abs(current_limit_a)

    def clear_errors(self) -> None:
        self.error = 0
        self.motor_error = 0
        self.disarm_reason = 0
        self.procedure_result = ProcedureResult.SUCCESS

    def estop(self) -> None:
        self.fail(self.dialect.estop_requested)

    def fail(self, code: int) -> None:
        """Latch axis error bits and disarm (as the firmware does on any axis error)."""
        self.error |= int(code)
        if self.state == AxisState.CLOSED_LOOP_CONTROL:
            self.disarm_reason = int(code)
            self.procedure_result = ProcedureResult.DISARMED
        self.state = AxisState.IDLE

    def check_watchdog(self, now_s: float, floor_s: float = 0.0) -> bool:
        """Expire the watchdog if due (timeout at least ``floor_s``); True when it expired now."""
        return self.expire_if_starved(now_s - self._last_feed_s, floor_s)

    def expire_if_starved(self, starved_s: float, floor_s: float = 0.0) -> bool:
        """Expire the watchdog when nothing fed it for ``starved_s`` (timeout at least
        ``floor_s``); True when it expired now."""
        if (self.watchdog_enabled and self.state == AxisState.CLOSED_LOOP_CONTROL
                and starved_s > max(self.watchdog_timeout_s, floor_s)):
            self.fail(self.dialect.watchdog_expired)
            return True
        return False

    def watchdog_deadline_s(self, floor_s: float = 0.0) -> float:
        """Wall time at which the watchdog expires; inf when it cannot."""
        if self.watchdog_enabled and self.state == AxisState.CLOSED_LOOP_CONTROL:
            return self._last_feed_s + max(self.watchdog_timeout_s, floor_s)
        return math.inf

    # --- the plant ---------------------------------------------------------------------------------
    def current_command_a(self) -> float:
        """Iq setpoint [A]: torque/Kt in CLOSED_LOOP + TORQUE_CONTROL + PASSTHROUGH, else 0."""
        if (self.state != AxisState.CLOSED_LOOP_CONTROL
                or self.control_mode != ControlMode.TORQUE_CONTROL
                or self.input_mode != InputMode.PASSTHROUGH):
            return 0.0
        i = self.input_torque_nm / self.plant.Kt
        lim = self.current_limit_a
        return max(-lim, min(lim, i))

    def step(self) -> None:
        """Advance the plant one period ``dt_s`` with the current command held."""
        self.plant.advance(self.current_command_a(), self.dt_s)
        self.steps += 1
        if self.state == AxisState.CLOSED_LOOP_CONTROL:
            self.stepped_in_closed_loop = True

    def feedback(self) -> AxisFeedback:
        m = self.plant.measure()
        return AxisFeedback(m.position_rad / TWO_PI, self.plant.omega_rad_s / TWO_PI,
                            self.current_command_a(), m.current_a)

    def bus_current_a(self) -> float:
        """DC bus current from mechanical power, losses ignored [A]."""
        return self.plant.Kt * self.plant.current_a * self.plant.omega_rad_s / self.bus_voltage_v

    def heartbeat(self) -> AnyHeartbeat:
        """In the dialect's layout (0.6: Axis_Error carries the active errors)."""
        if self.dialect.line >= (0, 6):
            return Heartbeat06(self.error, self.state, int(self.procedure_result))
        return Heartbeat(self.error, self.state, motor_error=self.motor_error != 0)

    def error_status(self) -> ErrorStatus:
        """0.6's Get_Error: active errors and the disarm reason."""
        return ErrorStatus(self.error, self.disarm_reason)


class ODriveEmulatorBase:
    """What the CAN and the ASCII emulators share: one :class:`ODriveAxis` guarded by ``_lock``
    (``_changed`` is notified after every event), the service thread (subclasses provide
    ``_run`` and may override ``_wake``), its timers (REALTIME plant steps, the watchdog, sends
    queued for later: subclasses provide ``_send_queued`` and may hook ``_on_realtime_step`` and
    ``_periodic``), observation, and drop/delay injection state (the subclass's reply path
    consumes ``_drop_remaining`` / ``_delay_remaining`` / ``_delay_s``)."""

    def __init__(self, plant: PlantConfig, *, seed: int, mode: EmuMode | str, dt_s: float,
                 watchdog_timeout_s: float | None, bus_voltage_v: float,
                 clock: Callable[[], float] = time.monotonic, dialect: Dialect = DIALECT_05) -> None:
        self.mode = EmuMode(mode)
        self.axis = ODriveAxis(plant, seed, dt_s=dt_s, watchdog_timeout_s=watchdog_timeout_s,
                               bus_voltage_v=bus_voltage_v, dialect=dialect)
        self._clock = clock
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_step = 0.0  # wall time of the next REALTIME plant step; set by start()
        self._queued: list[tuple[float, int, Any]] = []  # (due, seq, item) sends held back
        self._seq = itertools.count()
        self._drop_remaining = 0
        self._delay_remaining = 0
        self._delay_s = 0.0

    # --- lifecycle ---------------------------------------------------------------------------------
    def _run(self) -> None:
        raise NotImplementedError

    def _wake(self) -> None:
        """Interrupt the service thread's wait (nothing to do when it polls)."""

    def _start_thread(self, name: str) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _join_thread(self) -> None:
        """Stop the service thread, if running. Safe to call twice."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            self._wake()
            thread.join(timeout=2.0)

    def start(self: _Emu) -> _Emu:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Emu) -> _Emu:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- timers (service thread, under the lock) ------------------------------------------------------
    def _watchdog_on_wall_time(self) -> bool:
        """REALTIME: always. LOCKSTEP: until the first plant period in closed loop — through
        enable and a driver's watchdog check the watchdog runs on wall time as on the drive
        (with at least LOCKSTEP_WATCHDOG_FLOOR_S, so a loaded machine's pause between enable
        and the first tick does not trip it); once the loop steps the plant, the plant waits
        for each command and a wall-time watchdog would trip with nothing wrong."""
        return self.mode is EmuMode.REALTIME or not self.axis.stepped_in_closed_loop

    def _watchdog_floor_s(self) -> float:
        return LOCKSTEP_WATCHDOG_FLOOR_S if self.mode is EmuMode.LOCKSTEP else 0.0

    def _next_event(self) -> float:
        """Wall time of the next timed event: watchdog expiry, REALTIME step, queued send."""
        with self._lock:
            t = self.axis.watchdog_deadline_s(self._watchdog_floor_s()) if self._watchdog_on_wall_time() else math.inf
            if self.mode is EmuMode.REALTIME:
                t = min(t, self._next_step)
            if self._queued:
                t = min(t, self._queued[0][0])
            return t

    def _timers(self, now: float) -> None:
        """Step the plant up to ``now`` (REALTIME), check the watchdog, run ``_periodic``, then
        send the queued items that are due."""
        axis = self.axis
        if self.mode is EmuMode.REALTIME:
            while self._next_step <= now:
                axis.step()
                self._next_step += axis.dt_s
                self._on_realtime_step()
        if self._watchdog_on_wall_time():
            axis.check_watchdog(now, self._watchdog_floor_s())
        self._periodic(now)
        while self._queued and self._queued[0][0] <= now:
            _, _, item = heapq.heappop(self._queued)
            self._send_queued(item, now)

    def _queue(self, due: float, item: Any) -> None:
        """Hold ``item`` back until wall time ``due``; then ``_send_queued`` sends it."""
        heapq.heappush(self._queued, (due, next(self._seq), item))

    def _send_queued(self, item: Any, now: float) -> None:
        raise NotImplementedError

    def _on_realtime_step(self) -> None:
        """After each REALTIME plant step."""

    def _periodic(self, now: float) -> None:
        """Timed work of the subclass, after the watchdog check."""

    # --- observation -------------------------------------------------------------------------------
    @property
    def plant(self) -> Turntable:
        return self.axis.plant

    def sampled_friction_nm(self) -> float:
        """The plant's true friction now: a lockstep ODrive steps on a torque command and is
        sampled between commands, so this is the state the last feedback described."""
        with self._lock:
            return self.axis.plant.friction_nm

    @property
    def axis_state(self) -> AxisState:
        with self._lock:
            return self.axis.state

    @property
    def axis_error(self) -> int:
        with self._lock:
            return self.axis.error

    def wait_for(self: _Emu, predicate: Callable[[_Emu], bool], timeout_s: float) -> bool:
        """Block until ``predicate(self)`` holds (checked after every event) or the timeout [s]."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout=timeout_s)

    # --- fault injection ---------------------------------------------------------------------------
    def drop_next(self, n: int = 1) -> None:
        """Drop the next ``n`` replies."""
        with self._lock:
            self._drop_remaining += n

    def delay_next(self, n: int, delay_s: float) -> None:
        """Send the next ``n`` replies ``delay_s`` seconds late."""
        with self._lock:
            self._delay_remaining = n
            self._delay_s = delay_s

    def inject_axis_error(self, code: int) -> None:
        """Latch axis error bits (the axis drops to IDLE)."""
        with self._changed:
            self.axis.fail(code)
            self._changed.notify_all()

    def ignore_idle(self) -> None:
        """From now on the axis ignores requests to go IDLE: it stays armed and keeps applying
        its input torque (a drive that does not obey the disable)."""
        with self._lock:
            self.axis.ignore_idle = True

    def coast(self, periods: int) -> tuple[float, float]:
        """Advance the plant ``periods`` periods as the axis now drives it, with no host traffic
        (after a run: the current it still applies, or none when IDLE); (|speed| at the start,
        peak |speed| on the way) [rad/s]."""
        with self._changed:
            start = peak = abs(self.plant.omega_rad_s)
            axis = self.axis
            for k in range(1, periods + 1):
                axis.step()
                peak = max(peak, abs(self.plant.omega_rad_s))
                # the time left to itself is plant time here, and the drive watchdog counts it
                # (in lockstep it otherwise waits with the plant, which stood still until now)
                axis.expire_if_starved(k * axis.dt_s)
            self._changed.notify_all()
        return start, peak
