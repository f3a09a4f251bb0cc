"""Configuration of the friction observer, the online Fc adaptation and gain scheduling.

Frozen dataclasses loaded strictly by :mod:`controller.schema`; every unit is stated once, in the
field comment; ``inf`` means "no limit". ``ControllerConfig`` holds them as ``observer``,
``adaptation`` and ``schedule`` (None: one parameter set, no scheduling).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, Optional

from .friction import FrictionParams
from .gains import PIDGains
from .schema import require

Correction = Literal["residual", "tracking_error", "none"]


@dataclass(frozen=True)
class ObserverConfig:
    """LuGre observer, momentum observer and containment (see :mod:`controller.observer`).

    Rule for the gains: momentum_bandwidth_hz above the position-loop bandwidth and below the
    noise; bandwidth_hz (the ẑ correction, L = 2π·bandwidth_hz/sigma0) between the position-loop
    bandwidth and momentum_bandwidth_hz: faster than the mechanics, slower than the noise.
    """

    correction: Correction = "residual"  # what corrects ẑ: measured-friction residual (momentum
    #   observer), the position tracking error (Canudas de Wit et al. 1995), or nothing
    bandwidth_hz: float = 30.0  # residual correction ω_L/2π, ω_L = L·sigma0 [Hz]
    momentum_bandwidth_hz: float = 100.0  # momentum observer bandwidth K/2π [Hz]
    tracking_gain_per_s: float = 20.0  # k in ẑ' = v − sigma0·|v|/g·ẑ − k·(θ − θ_ref) [1/s]
    velocity_source: Literal["encoder", "estimate"] = "encoder"  # velocity driving the estimation
    #   observer: the raw encoder difference (integrates exactly to the measured position, no
    #   filter lag) or the loop's filtered velocity estimate
    feedforward: Literal["reference", "estimate"] = "reference"  # feedforward from a second
    #   corrected model driven by the reference velocity (no measurement delay), or F̂ itself
    clamp_margin_nm: float = 0.05  # |F̂| <= scale·Fs + sigma2·|v| + this [N·m]
    residual_limit_nm: float = 0.1  # watchdog: |measured − estimated friction| above this is
    #   inconsistent [N·m]
    wrong_sign_velocity_rad_s: float = 0.03  # watchdog: sliding faster than this, F̂ must have
    #   the sign of v [rad/s]
    watchdog_s: float = 0.2  # inconsistency accumulated this long => fallback [s]
    recover_s: float = 2.0  # consistent this long => leave fallback; inf = latch until reset [s]
    fallback: Literal["stribeck", "off"] = "stribeck"  # feedforward while contained: static
    #   Stribeck curve of the reference velocity, or none
    fade_s: float = 0.05  # crossfade between observer and fallback feedforward [s]

    def __post_init__(self) -> None:
        require(self.momentum_bandwidth_hz > 0, "momentum_bandwidth_hz",
                f"must be > 0, got {self.momentum_bandwidth_hz}")
        require(self.bandwidth_hz >= 0, "bandwidth_hz", f"must be >= 0, got {self.bandwidth_hz}")
        if self.correction == "residual":
            require(0 < self.bandwidth_hz < self.momentum_bandwidth_hz, "bandwidth_hz",
                    f"must be in (0, momentum_bandwidth_hz = {self.momentum_bandwidth_hz}) for "
                    f"residual correction (slower than the residual it acts on), got {self.bandwidth_hz}")
        require(self.tracking_gain_per_s >= 0, "tracking_gain_per_s",
                f"must be >= 0, got {self.tracking_gain_per_s}")
        for name in ("clamp_margin_nm", "residual_limit_nm", "wrong_sign_velocity_rad_s",
                     "watchdog_s", "recover_s"):
            require(getattr(self, name) > 0, name, f"must be > 0, got {getattr(self, name)}")
        require(self.fade_s >= 0, "fade_s", f"must be >= 0, got {self.fade_s}")

    @property
    def correction_rate_per_s(self) -> float:
        """ω_L = 2π·bandwidth_hz [rad/s]; the gain is L = ω_L/sigma0 [rad/(N·m·s)]."""
        return 2.0 * math.pi * self.bandwidth_hz


@dataclass(frozen=True)
class AdaptationConfig:
    """Online Fc adaptation and the drift (re-identify) monitor (:mod:`controller.adaptation`)."""

    enabled: bool = True  # adapt Fc in mode lugre_adaptive
    gate_velocity_rad_s: float = 0.03  # adapt only while |v| >= this (>= ~3·vs: outside the
    #   Stribeck region) [rad/s]
    reversal_holdoff_s: float = 0.3  # and this long after entering sliding or reversing [s]
    time_constant_s: float = 2.0  # τ in Fc_hat += dt/τ·residual·sgn(v) [s]
    fc_min_nm: float = 0.05  # projection of Fc_hat [N·m]
    fc_max_nm: float = 1.0  # [N·m]
    rate_limit_nm_s: float = 0.05  # |dFc_hat/dt| bound [N·m/s]
    drift_low_band_vs: tuple[float, float] = (0.5, 3.0)  # low-speed band of |v|, multiples of vs [-]
    drift_time_constant_s: float = 1.0  # averaging of each band's residual, in-band time [s]
    drift_low_threshold_nm: float = 0.02  # low-band mean residual above this: region moved [N·m]
    drift_high_threshold_nm: float = 0.01  # high band counts as explained below this [N·m]
    drift_persist_s: float = 3.0  # in-band time the condition must hold to raise/clear [s]
    drift_clear_ratio: float = 0.5  # clear below ratio·drift_low_threshold_nm (hysteresis) [-]

    def __post_init__(self) -> None:
        for name in ("gate_velocity_rad_s", "time_constant_s", "rate_limit_nm_s", "fc_min_nm",
                     "drift_time_constant_s", "drift_low_threshold_nm", "drift_high_threshold_nm",
                     "drift_persist_s"):
            require(getattr(self, name) > 0, name, f"must be > 0, got {getattr(self, name)}")
        require(self.reversal_holdoff_s >= 0, "reversal_holdoff_s",
                f"must be >= 0, got {self.reversal_holdoff_s}")
        require(self.fc_max_nm > self.fc_min_nm, "fc_max_nm",
                f"must be > fc_min_nm ({self.fc_max_nm} <= {self.fc_min_nm})")
        lo, hi = self.drift_low_band_vs
        require(0 <= lo < hi, "drift_low_band_vs", f"must be 0 <= lo < hi, got [{lo}, {hi}]")
        require(0 < self.drift_clear_ratio < 1, "drift_clear_ratio",
                f"must be in (0, 1), got {self.drift_clear_ratio}")


@dataclass(frozen=True)
class Widths:
    """One width per continuous scheduling variable (blend widths, hysteresis)."""

    temperature_c: float = 0.0  # [°C]
    payload_kg: float = 0.0  # [kg]
    speed_rad_s: float = 0.0  # [rad/s]

    def __post_init__(self) -> None:
        for name in ("temperature_c", "payload_kg", "speed_rad_s"):
            value = getattr(self, name)
            require(0 <= value < math.inf, name, f"must be finite and >= 0, got {value}")


Range = Optional[tuple[float, float]]


@dataclass(frozen=True)
class Region:
    """Where a parameter set applies: a closed [lo, hi] per variable (null: any value; ±inf for
    an open side). speed_rad_s is a band of |v_ref|; direction the sign of v_ref."""

    temperature_c: Range = None  # [°C]
    payload_kg: Range = None  # [kg]
    speed_rad_s: Range = None  # [rad/s]
    direction: Literal["forward", "reverse", "any"] = "any"

    def __post_init__(self) -> None:
        for name in ("temperature_c", "payload_kg", "speed_rad_s"):
            rng = getattr(self, name)
            if rng is not None:
                require(rng[0] <= rng[1], name, f"must be [lo, hi] with lo <= hi, got {list(rng)}")


@dataclass(frozen=True)
class ParameterSetConfig:
    name: str
    friction: FrictionParams  # identified LuGre set (flat or forward/reverse)
    pid: Optional[PIDGains] = None  # null: the controller's configured gains
    region: Region = field(default_factory=Region)

    def __post_init__(self) -> None:
        require(bool(self.name), "name", "must not be empty")


@dataclass(frozen=True)
class ScheduleConfig:
    """Gain-scheduled parameter sets, blended smoothly (:mod:`controller.schedule`). The first set
    is the default when no region covers the operating point at start."""

    sets: tuple[ParameterSetConfig, ...]
    blend_width: Widths = field(default_factory=lambda: Widths(2.0, 0.5, 0.005))  # membership
    #   falls from 1 to 0 over this distance outside a region (0: hard edge)
    hysteresis: Widths = field(default_factory=lambda: Widths(1.0, 0.2, 0.002))  # play of each
    #   variable: dithering within it changes nothing
    weight_rate_per_s: float = 2.0  # weights move at most this much per second [1/s]
    max_ff_step_nm: float = math.inf  # bound on the feedforward change per tick [N·m]

    def __post_init__(self) -> None:
        require(len(self.sets) >= 1, "sets", "at least one parameter set is needed")
        names = [s.name for s in self.sets]
        for i, name in enumerate(names):
            require(name not in names[:i], f"sets[{i}].name", f"duplicate set name {name!r}")
        require(self.weight_rate_per_s > 0, "weight_rate_per_s",
                f"must be > 0, got {self.weight_rate_per_s}")
        require(self.max_ff_step_nm > 0, "max_ff_step_nm", f"must be > 0, got {self.max_ff_step_nm}")
