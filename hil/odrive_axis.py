"""One emulated ODrive axis (firmware 0.5.6 semantics) with the simulated turntable behind it.

Shared by the CAN Simple and the ASCII emulators: they differ only in how bytes reach this model.
Emulated: axis states IDLE and CLOSED_LOOP_CONTROL (the axis is taken as calibrated; any other
requested state sets INVALID_STATE and leaves the axis in IDLE), axis errors (any error drops the
axis to IDLE; CLOSED_LOOP is refused while an error is latched), control/input mode, input torque
→ current command ``torque / Kt`` (only in TORQUE_CONTROL with PASSTHROUGH input; anything else
commands zero current), the current limit, and the drive watchdog (checked only in CLOSED_LOOP;
expiry sets WATCHDOG_TIMER_EXPIRED and goes to IDLE). Not emulated: calibration, velocity
limiting in torque mode, the torque ramp input mode, motor/encoder sub-errors.

Not thread-safe: the owning emulator serialises every call under its lock.
Units: turns, turns/s, N·m, A, s (wall time for the watchdog).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from controller.config import PlantConfig
from drivers.odrive_codec import AxisError, AxisState, ControlMode, Heartbeat, InputMode
from hil.plant import Turntable

TWO_PI = 2.0 * math.pi


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
                 watchdog_timeout_s: float | None = None, bus_voltage_v: float = 24.0) -> None:
        if dt_s <= 0:
            raise ValueError(f"dt_s must be > 0, got {dt_s}")
        self.plant = Turntable(plant, seed=seed)
        self.dt_s = dt_s
        self.state = AxisState.IDLE
        self.error = 0  # AxisError bits
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
        self._last_feed_s = -math.inf

    # --- host commands ---------------------------------------------------------------------------
    def feed_watchdog(self, now_s: float) -> None:
        self._last_feed_s = now_s

    def request_state(self, requested: int, now_s: float) -> None:
        """Set_Axis_State / ``w axisN.requested_state``."""
        if requested == AxisState.IDLE:
            self.state = AxisState.IDLE
        elif requested == AxisState.CLOSED_LOOP_CONTROL:
            if self.error == 0:
                self.state = AxisState.CLOSED_LOOP_CONTROL
                self._last_feed_s = now_s  # the watchdog counts from entering closed loop
        else:
            self.fail(AxisError.INVALID_STATE)

    def set_controller_mode(self, control_mode: int, input_mode: int) -> None:
        try:
            self.control_mode = ControlMode(control_mode)
            self.input_mode = InputMode(input_mode)
        except ValueError:
            self.fail(AxisError.CONTROLLER_FAILED)

    def set_input_torque(self, torque_nm: float) -> None:
        self.input_torque_nm = torque_nm

    def set_limits(self, vel_limit_turns_s: float, current_limit_a: float) -> None:
        self.vel_limit_turns_s = vel_limit_turns_s
        self.current_limit_a = abs(current_limit_a)

    def clear_errors(self) -> None:
        self.error = 0
        self.motor_error = 0

    def estop(self) -> None:
        self.fail(AxisError.ESTOP_REQUESTED)

    def fail(self, code: int) -> None:
        """Latch axis error bits and disarm (as the firmware does on any axis error)."""
        self.error |= int(code)
        self.state = AxisState.IDLE

    def check_watchdog(self, now_s: float) -> bool:
        """Expire the watchdog if due; True when it expired now."""
        if (self.watchdog_enabled and self.state == AxisState.CLOSED_LOOP_CONTROL
                and now_s - self._last_feed_s > self.watchdog_timeout_s):
            self.fail(AxisError.WATCHDOG_TIMER_EXPIRED)
            return True
        return False

    def watchdog_deadline_s(self) -> float:
        """Wall time at which the watchdog expires; inf when it cannot."""
        if self.watchdog_enabled and self.state == AxisState.CLOSED_LOOP_CONTROL:
            return self._last_feed_s + self.watchdog_timeout_s
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

    def feedback(self) -> AxisFeedback:
        m = self.plant.measure()
        return AxisFeedback(m.position_rad / TWO_PI, self.plant.omega_rad_s / TWO_PI,
                            self.current_command_a(), m.current_a)

    def bus_current_a(self) -> float:
        """DC bus current from mechanical power, losses ignored [A]."""
        return self.plant.Kt * self.plant.current_a * self.plant.omega_rad_s / self.bus_voltage_v

    def heartbeat(self) -> Heartbeat:
        return Heartbeat(self.error, self.state, motor_error=self.motor_error != 0)
