"""Friction compensators: what the loop adds to the PID as friction feedforward.

Every mode implements :class:`Compensator`. The loop fills one reusable :class:`TickSignals`
per tick (no allocation in the tick) and calls ``step(signals, dt_s)``, which returns the
friction feedforward torque [N·m] and updates the diagnostic attributes that are logged.

Modes: ``off`` (none), ``coulomb`` and ``stribeck`` (static curves of the reference velocity),
``lugre`` and ``lugre_adaptive`` (observer; in :mod:`controller.lugre_compensator`), ``oracle``
(simulation only: the plant's true friction torque, the ceiling of any compensator).
"""

from __future__ import annotations

import abc
import math
from typing import TYPE_CHECKING, Final

from .friction import DirectionalParams, FrictionParams, LuGreParams, g
from .gains import PIDGains
from .fastmath import isfinite, tanh

if TYPE_CHECKING:
    from .config import ControllerConfig

NAN: Final = float("nan")


class TickSignals:
    """The measured and reference signals of one tick, as the compensator sees them (SI)."""

    __slots__ = (
        "t_s", "pos_rad", "vel_rad_s", "pos_ref_rad", "vel_ref_rad_s", "acc_ref_rad_s2",
        "current_a", "torque_cmd_prev_nm", "saturated", "faulted", "temperature_c",
        "payload_kg", "true_friction_nm",
    )

    def __init__(self) -> None:
        self.t_s = 0.0
        self.pos_rad = 0.0
        self.vel_rad_s = 0.0  # estimated velocity
        self.pos_ref_rad = 0.0
        self.vel_ref_rad_s = 0.0
        self.acc_ref_rad_s2 = 0.0
        self.current_a = 0.0  # measured motor current
        self.torque_cmd_prev_nm = 0.0  # total torque commanded on the previous tick
        self.saturated = False  # PID output at its limit on the previous tick
        self.faulted = False
        self.temperature_c = NAN  # drive-reported or configured
        self.payload_kg = 0.0  # operator-declared payload (scheduling variable)
        self.true_friction_nm = NAN  # simulation only (oracle)


class Compensator(abc.ABC):
    """Friction feedforward. Attributes after each step are logged by the loop."""

    mode = "abstract"

    def __init__(self) -> None:
        self.friction_hat_nm = 0.0  # estimated friction torque [N·m]
        self.z_hat = NAN  # estimated bristle deflection [rad] (observers only)
        self.fc_hat_nm = NAN  # current Coulomb level estimate [N·m]
        self.residual_nm = NAN  # measured-minus-estimated friction [N·m] (observers only)
        self.reidentify = False  # the Stribeck region moved: re-identify
        self.pid_gains: PIDGains | None = None  # scheduled gains (None: keep the configured)
        self.param_step_nm = 0.0  # feedforward change caused by a parameter switch this tick [N·m]
        self.fallback = False  # the observer was judged inconsistent: fallback feedforward
        self.learned_nm = 0.0  # feedforward learned from the residual this tick [N·m]
        self.reidentify_reason = ""  # why reidentify was raised

    def reset(self) -> None:
        """Forget state (on disable / re-enable)."""
        self.friction_hat_nm = 0.0

    def warnings(self, rate_hz: float) -> list[str]:
        """What the operator should know about this compensation at loop rate ``rate_hz``
        (in the run's summary, printed): none here."""
        return []

    @abc.abstractmethod
    def step(self, s: TickSignals, dt_s: float) -> float:
        """Return the friction feedforward torque for this tick [N·m]."""


def _fc(params: FrictionParams) -> float:
    return params.forward.Fc if isinstance(params, DirectionalParams) else params.Fc


def _select(params: FrictionParams, v: float) -> LuGreParams:
    return params.for_velocity(v) if isinstance(params, DirectionalParams) else params


class NoCompensation(Compensator):
    mode = "off"

    def step(self, s: TickSignals, dt_s: float) -> float:
        return 0.0


class StaticCompensator(Compensator):
    """Static curve of the reference velocity: ``coulomb`` (Fc·sgn + sigma2·v) or ``stribeck``.

    Driven by the reference, not the measurement: the measured velocity at creep speed is mostly
    quantization noise, and a feedforward must not close a positive feedback loop through it."""

    def __init__(self, params: FrictionParams, mode: str, v_eps: float = 0.0) -> None:
        super().__init__()
        self.params = params
        self.mode = mode
        self.v_eps = v_eps  # tanh width of the sign [rad/s]; 0 = sgn
        self._with_stribeck = mode == "stribeck"
        self.fc_hat_nm = _fc(params)

    def step(self, s: TickSignals, dt_s: float) -> float:
        v = s.vel_ref_rad_s
        p = _select(self.params, v)
        level = g(p, v) if self._with_stribeck else p.Fc
        if self.v_eps > 0.0:
            sign = tanh(v / self.v_eps)
        else:
            sign = 0.0 if v == 0.0 else math.copysign(1.0, v)
        ff = level * sign + p.sigma2 * v
        self.friction_hat_nm = ff
        return ff


class OracleCompensator(Compensator):
    """Simulation only: feed forward the plant's true friction torque of the last tick."""

    mode = "oracle"

    def step(self, s: TickSignals, dt_s: float) -> float:
        f = s.true_friction_nm
        if not isfinite(f):
            raise ValueError("compensation 'oracle' needs the simulated plant's true friction "
                             "(simulation only)")
        self.friction_hat_nm = f
        return f


def make_compensator(cfg: "ControllerConfig", mode: str | None = None,
                     rate_hz: float | None = None) -> Compensator:
    """The compensator for ``mode`` (default: the config's ``compensation``) in a loop at
    ``rate_hz`` (loop.rate_hz: the observer rules that depend on it; None: a fast loop)."""
    mode = mode or cfg.compensation
    if mode == "off":
        return NoCompensation()
    if mode in ("coulomb", "stribeck"):
        return StaticCompensator(cfg.friction, mode, cfg.feedforward_v_eps)
    if mode == "oracle":
        return OracleCompensator()
    if mode in ("lugre", "lugre_adaptive"):
        from .lugre_compensator import make_lugre_compensator

        return make_lugre_compensator(cfg, adaptive=(mode == "lugre_adaptive"), rate_hz=rate_hz)
    raise ValueError(f"compensation: unknown mode {mode!r} "
                     "(known: off, coulomb, stribeck, lugre, lugre_adaptive, oracle)")
