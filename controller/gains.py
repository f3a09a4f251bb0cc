"""PID gains: part of a parameter set (so they can be gain-scheduled)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .schema import require


@dataclass(frozen=True)
class PIDGains:
    kp: float  # [N·m/rad]
    ki: float  # [N·m/(rad·s)]
    kd: float  # [N·m·s/rad]
    derivative_cutoff_hz: float = 300.0  # first-order filter on the derivative [Hz]
    output_limit_nm: float = math.inf  # total command limit, feedforward included [N·m]

    def __post_init__(self) -> None:
        for name in ("kp", "ki", "kd"):
            require(getattr(self, name) >= 0, name, f"must be >= 0, got {getattr(self, name)}")
        require(self.derivative_cutoff_hz > 0, "derivative_cutoff_hz",
               f"must be > 0, got {self.derivative_cutoff_hz}")
        require(self.output_limit_nm > 0, "output_limit_nm", f"must be > 0, got {self.output_limit_nm}")

    @staticmethod
    def triple_pole(J: float, bandwidth_hz: float, **kw: float) -> "PIDGains":
        """The documented tuning rule: closed loop J·s³ + kd·s² + kp·s + ki with a triple pole at
        ω = 2π·bandwidth_hz: kd = 3Jω, kp = 3Jω², ki = Jω³."""
        w = 2.0 * math.pi * bandwidth_hz
        return PIDGains(kp=3 * J * w * w, ki=J * w**3, kd=3 * J * w, **kw)

    def position_bandwidth_hz(self, J: float) -> float:
        """Position-loop bandwidth [Hz] the gains stand for: ω = kd/(3J) of the triple-pole
        rule (sqrt(kp/J) when kd is 0); the scale the observer rules derive from."""
        w = self.kd / (3.0 * J) if self.kd > 0.0 else math.sqrt(self.kp / J)
        return w / (2.0 * math.pi)

    def corner_hz(self, J: float) -> float:
        """The PD corner kp/kd [Hz]: the triple-pole ω whatever J is believed (kp = 3Jω²,
        kd = 3Jω), so it does not move with an error in J; position_bandwidth_hz when kd is 0."""
        if self.kd > 0.0:
            return self.kp / self.kd / (2.0 * math.pi)
        return self.position_bandwidth_hz(J)
