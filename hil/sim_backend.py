"""The backend interface over the simulated turntable.

Time: ``read()`` first advances the plant, with the last command held, to the clock's ``now``
in whole control periods, then samples the sensors. With a :class:`~controller.clock.SimClock`
(lockstep) each tick advances exactly one period, far faster than real time; with the real
clock (paced) the plant follows wall time.

Fault injection (tests, demos, a scenario's ``faults:``): :meth:`inject` with ``stale`` (feedback
stops updating), ``nan_current``, ``drive_fault``, ``blocked_rotor``, ``inverted_sign`` (motor
wired backwards), ``load_step`` (a load torque added to the plant, ``torque_nm``).
"""

from __future__ import annotations

import math
from typing import Final

from controller.compile_hints import mypyc_attr
from controller.config import Config, ScenarioConfig
from drivers.backend import NAN, Backend, Clock, DriveState, Feedback
from drivers.errors import EnableError

from .plant import Turntable

_ENABLED: Final = DriveState.ENABLED
FAULTS = ("stale", "nan_current", "drive_fault", "blocked_rotor", "inverted_sign", "load_step")
SIM_FAULT_CODE: Final = 0x5441  # arbitrary drive-side code for an injected fault


@mypyc_attr(allow_interpreted_subclasses=True)  # tests derive variants of the sim drive
class SimBackend(Backend):
    name = "sim"

    def __init__(self, cfg: Config, clock: Clock, seed: int = 0,
                 scenario: ScenarioConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.clock = clock
        self.dt_s = cfg.loop.dt_s
        fc_profile = scenario.fc_profile if scenario and scenario.fc_profile is not None else None
        self.plant = Turntable(cfg.plant, seed=seed, fc_profile=fc_profile)
        self._changes = sorted(scenario.changes, key=lambda c: c.at_s) if scenario else []
        self._base_J = cfg.plant.J
        self._i_cmd = 0.0
        self._state = DriveState.CLOSED
        self._fault_code = 0
        self._sequence = 0
        self._last: Feedback | None = None
        self._prev_pos = math.nan
        self._faults: set[str] = set()
        self._scheduled: list[tuple[float, str]] = []

    @classmethod
    def from_config(cls, cfg: Config, clock: Clock, seed: int = 0,
                    scenario: ScenarioConfig | None = None) -> "SimBackend":
        return cls(cfg, clock, seed=seed, scenario=scenario)

    # --- fault injection ---------------------------------------------------------------------
    def inject(self, fault: str, torque_nm: float = 0.0) -> None:
        """``torque_nm``: the load torque a ``load_step`` adds [N·m] (opposes +rad)."""
        if fault not in FAULTS:
            raise ValueError(f"unknown sim fault {fault!r} (known: {', '.join(FAULTS)})")
        self._faults.add(fault)
        if fault == "load_step":
            self.plant.extra_load_nm += torque_nm
        if fault == "drive_fault":
            self._fault_code = SIM_FAULT_CODE
            self._state = DriveState.FAULT
            self._enabled = self._writable = False
            self._i_cmd = 0.0
        if fault == "blocked_rotor":
            self.plant.blocked = True

    def inject_at(self, t_s: float, fault: str) -> None:
        """Inject ``fault`` at the first read at or after ``t_s`` on the backend's clock."""
        if fault not in FAULTS:
            raise ValueError(f"unknown sim fault {fault!r} (known: {', '.join(FAULTS)})")
        self._scheduled.append((t_s, fault))
        self._scheduled.sort()

    def clear_injected(self, fault: str) -> None:
        self._faults.discard(fault)
        if fault == "blocked_rotor":
            self.plant.blocked = False

    # --- hooks -------------------------------------------------------------------------------
    def _open(self) -> None:
        self._state = DriveState.DISABLED if not self._fault_code else DriveState.FAULT

    def _close(self) -> None:
        self._state = DriveState.CLOSED

    def _enable(self, timeout_s: float) -> None:
        if self._fault_code:
            raise EnableError(f"sim: drive fault 0x{self._fault_code:X} latched: reset it first")
        self._state = DriveState.ENABLED

    def _disable(self) -> None:
        self._i_cmd = 0.0
        if self._state is DriveState.ENABLED:
            self._state = DriveState.DISABLED

    def _reset_fault(self) -> None:
        self._faults.discard("drive_fault")
        self._fault_code = 0
        if self._state is DriveState.FAULT:
            self._state = DriveState.DISABLED

    def _write(self, torque_nm: float) -> None:
        i = torque_nm / self.plant.Kt
        self._i_cmd = -i if "inverted_sign" in self._faults else i

    def _apply_changes(self) -> None:
        plant = self.plant
        while self._changes and self._changes[0].at_s <= plant.t_s + 1e-12:
            ch = self._changes.pop(0)
            if ch.payload_kg is not None:
                self.payload_kg = ch.payload_kg
                plant.J = self._base_J + ch.added_inertia(self.cfg.units)
            if ch.temperature_c is not None:
                plant.temperature_c = ch.temperature_c
            if ch.fc_scale is not None:
                plant.extra_fc_scale = ch.fc_scale

    def _read(self) -> Feedback:
        plant = self.plant
        now = self.clock.now()
        dt = self.dt_s
        while self._scheduled and self._scheduled[0][0] <= now:
            self.inject(self._scheduled.pop(0)[1])
        while plant.t_s + 0.5 * dt <= now:
            if self._changes:
                self._apply_changes()
            plant.advance(self._i_cmd if self._state is _ENABLED else 0.0, dt)
        if "stale" in self._faults and self._last is not None:
            return self._last
        m = plant.measure()
        pos = m.position_rad
        vel = (pos - self._prev_pos) / dt if self._prev_pos == self._prev_pos else 0.0
        self._prev_pos = pos
        self._sequence += 1
        current = NAN if "nan_current" in self._faults else m.current_a
        # positional (the field order of Feedback): twice as fast as keywords, once per tick
        fb = Feedback(plant.t_s, pos, vel, current, NAN, self._state, self._fault_code,
                      "injected drive fault" if self._fault_code else "", plant.temperature_c,
                      self._sequence, 0.0)
        self._last = fb
        return fb

    # --- simulation-only facts ---------------------------------------------------------------
    def coast(self, periods: int) -> tuple[float, float]:
        """Advance the plant ``periods`` control periods with no host traffic (what the axis does
        after the run: the drive applies its last current only while it is still enabled);
        (|speed| at the start, peak |speed| on the way) [rad/s]."""
        start = peak = abs(self.plant.omega_rad_s)
        for _ in range(periods):
            self.plant.advance(self._i_cmd if self._state is _ENABLED else 0.0, self.dt_s)
            peak = max(peak, abs(self.plant.omega_rad_s))
        return start, peak

    def true_friction_nm(self) -> float:
        return self.plant.friction_nm

    @property
    def drive_state(self) -> DriveState:
        return self._state
