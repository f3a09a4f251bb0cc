"""Slow online correction of the Coulomb level, and the alarm for what must not be chased online.

Units: N·m, rad/s, s. The residual is measured minus estimated friction [N·m] (positive: the
plant rubs harder than the model believes).

:class:`FcAdapter` corrects Fc from the persistent sliding residual (BRIEF §5: bounded, gated to
sliding, slow next to the loop); Fs follows with the identified Fs/Fc ratio. :class:`DriftMonitor`
raises ``reidentify`` when the residual says the Stribeck region itself moved (vs, Fs/Fc): those
parameters are not adapted online, the operator re-identifies.
"""

from __future__ import annotations

import math

from .estimation_config import AdaptationConfig


def _require_resolved(cfg: AdaptationConfig) -> None:
    missing = [name for name in ("gate_velocity_rad_s", "fc_min_nm", "fc_max_nm",
                                 "rate_limit_nm_s", "drift_low_threshold_nm",
                                 "drift_high_threshold_nm") if getattr(cfg, name) is None]
    if missing:
        raise ValueError(f"adaptation: {', '.join(missing)} not resolved "
                         "(estimation_config.resolve_adaptation derives them from the set)")


def _resolved(value: float | None) -> float:
    """A threshold that :func:`_require_resolved` has checked (typed as a plain float)."""
    assert value is not None
    return value


class SlidingGate:
    """Sliding direction with a settling time: ``step`` returns sgn(v) once |v| has stayed in
    [lo, hi) with one sign for ``holdoff_s``, else 0. Entering the band or reversing restarts the
    holdoff (the transients after a reversal are not steady friction)."""

    __slots__ = ("lo", "hi", "holdoff_s", "direction", "settled_s")

    def __init__(self, lo_rad_s: float, hi_rad_s: float, holdoff_s: float) -> None:
        self.lo = lo_rad_s  # [rad/s]
        self.hi = hi_rad_s  # [rad/s]
        self.holdoff_s = holdoff_s  # [s]
        self.reset()

    def reset(self) -> None:
        self.direction = 0
        self.settled_s = 0.0

    def step(self, v: float, dt_s: float, lo_rad_s: float | None = None,
             hi_rad_s: float | None = None) -> int:
        lo = self.lo if lo_rad_s is None else lo_rad_s
        hi = self.hi if hi_rad_s is None else hi_rad_s
        speed = abs(v)
        direction = (1 if v > 0.0 else -1) if lo <= speed < hi else 0
        if direction != self.direction:
            self.direction = direction
            self.settled_s = 0.0
        else:
            self.settled_s += dt_s
        return direction if direction and self.settled_s >= self.holdoff_s else 0


class FcAdapter:
    """Integrator on the sliding residual, as a scale on the Stribeck level.

    While sliding (|v| >= gate_velocity_rad_s, settled reversal_holdoff_s) and not held
    (actuator saturated, drive faulted, observer contained):

        Fc_hat ← Fc_hat + (dt/τ)·residual·sgn(v)       [N·m] = [s]/[s]·[N·m]

    so a constant Coulomb error decays as exp(−t/τ) (in sliding, well above vs, the residual is
    Fc − Fc_hat). The step is rate-limited to |ΔFc_hat| <= rate_limit_nm_s·dt and Fc_hat projected
    to [fc_min_nm, fc_max_nm]. The state is kept as the scale k = Fc_hat/Fc of the parameter set in
    use (Fs_hat = k·Fs: the identified Fs/Fc ratio), so it composes with scheduled and
    directional sets; ``fc_hat_nm`` is k·Fc of the set last seen. ``at_bound`` says the
    projection is active.
    """

    __slots__ = ("cfg", "gate", "scale", "fc_nominal_nm", "direction", "active", "at_bound",
                 "_gain", "_rate_limit_nm_s", "_fc_min_nm", "_fc_max_nm")

    def __init__(self, cfg: AdaptationConfig, fc_nominal_nm: float) -> None:
        _require_resolved(cfg)
        self.cfg = cfg
        self.gate = SlidingGate(_resolved(cfg.gate_velocity_rad_s), math.inf, cfg.reversal_holdoff_s)
        self._rate_limit_nm_s = _resolved(cfg.rate_limit_nm_s)
        self._fc_min_nm = _resolved(cfg.fc_min_nm)
        self._fc_max_nm = _resolved(cfg.fc_max_nm)
        self.fc_nominal_nm = fc_nominal_nm
        self._gain = 1.0 / cfg.time_constant_s
        self.reset()

    def reset(self) -> None:
        """Back to the identified level (k = 1)."""
        self.scale = 1.0
        self.direction = 0  # settled sliding direction of the last step (0: not sliding)
        self.active = False
        self.at_bound = False
        self.gate.reset()

    @property
    def fc_hat_nm(self) -> float:
        return self.scale * self.fc_nominal_nm

    def step(self, residual_nm: float, vel_rad_s: float, dt_s: float, *, hold: bool = False,
             fc_nominal_nm: float | None = None) -> float:
        """One tick; ``fc_nominal_nm`` is the Fc of the set in use now [N·m]. Returns the scale."""
        if fc_nominal_nm is not None:
            self.fc_nominal_nm = fc_nominal_nm
        self.direction = direction = self.gate.step(vel_rad_s, dt_s)
        self.active = active = bool(direction) and not hold and self.cfg.enabled
        if not active:
            return self.scale
        fc_nom = self.fc_nominal_nm
        delta = dt_s * self._gain * residual_nm * direction  # [N·m]
        limit = self._rate_limit_nm_s * dt_s
        if delta > limit:
            delta = limit
        elif delta < -limit:
            delta = -limit
        fc = self.scale * fc_nom + delta
        fc_min, fc_max = self._fc_min_nm, self._fc_max_nm
        self.at_bound = not fc_min <= fc <= fc_max
        if self.at_bound:
            fc = fc_max if fc > fc_max else fc_min
        self.scale = fc / fc_nom
        return self.scale


class DriftMonitor:
    """Raises ``reidentify`` when the Stribeck region moved rather than the Coulomb level.

    Two bands of the measured |v|, each with its own settling (reversal_holdoff_s): the low band
    [lo·vs, hi·vs) (drift_low_band_vs) and the high band |v| >= gate_velocity_rad_s (where Fc
    is adapted). In each band the residual·sgn(v) is averaged (first-order, time constant
    drift_time_constant_s of in-band time). The region moved when the low-band mean is large
    (|·| > drift_low_threshold_nm: consistent sign, noise averages out) while the high band is
    well explained (|·| < drift_high_threshold_nm, i.e. after Fc adaptation has converged). That
    condition must hold for drift_persist_s of low-band time to raise the alarm; it clears after
    the same time below drift_clear_ratio·drift_low_threshold_nm (hysteresis). A pure Fc change
    moves both bands together and is absorbed by the adapter: no alarm.
    """

    __slots__ = ("cfg", "low_gate", "high_gate", "low_mean_nm", "high_mean_nm", "high_seen_s",
                 "evidence_s", "reidentify", "_low_threshold_nm", "_high_threshold_nm")

    def __init__(self, cfg: AdaptationConfig) -> None:
        _require_resolved(cfg)
        self.cfg = cfg
        lo, hi = cfg.drift_low_band_vs
        self.low_gate = SlidingGate(lo, hi, cfg.reversal_holdoff_s)  # bounds set per step from vs
        self.high_gate = SlidingGate(_resolved(cfg.gate_velocity_rad_s), math.inf,
                                     cfg.reversal_holdoff_s)
        self._low_threshold_nm = _resolved(cfg.drift_low_threshold_nm)
        self._high_threshold_nm = _resolved(cfg.drift_high_threshold_nm)
        self.reset()

    def reset(self) -> None:
        self.low_mean_nm = 0.0
        self.high_mean_nm = 0.0
        self.high_seen_s = 0.0
        self.evidence_s = 0.0
        self.reidentify = False
        self.low_gate.reset()
        self.high_gate.reset()

    def step(self, residual_nm: float, vel_rad_s: float, vs_rad_s: float, dt_s: float,
             hold: bool = False, sliding: int | None = None) -> bool:
        """One tick with the Stribeck velocity of the set in use [rad/s]; returns the alarm.
        ``sliding``: the high-band direction when an :class:`FcAdapter` with the same gate
        already computed it (its ``direction``); None: computed here."""
        cfg = self.cfg
        lo, hi = cfg.drift_low_band_vs
        low = self.low_gate.step(vel_rad_s, dt_s, lo * vs_rad_s, hi * vs_rad_s)
        high = self.high_gate.step(vel_rad_s, dt_s) if sliding is None else sliding
        if hold or not (low or high):
            return self.reidentify
        k = dt_s / cfg.drift_time_constant_s
        k = 1.0 if k > 1.0 else k
        if high:
            self.high_mean_nm += k * (residual_nm * high - self.high_mean_nm)
            self.high_seen_s += dt_s
            return self.reidentify
        self.low_mean_nm += k * (residual_nm * low - self.low_mean_nm)
        low_abs = abs(self.low_mean_nm)
        if not self.reidentify:
            moved = (low_abs > self._low_threshold_nm
                     and abs(self.high_mean_nm) < self._high_threshold_nm
                     and self.high_seen_s >= cfg.drift_time_constant_s)
            self.evidence_s = self.evidence_s + dt_s if moved else max(0.0, self.evidence_s - dt_s)
            if self.evidence_s >= cfg.drift_persist_s:
                self.reidentify = True
                self.evidence_s = 0.0
        else:
            cleared = low_abs < cfg.drift_clear_ratio * self._low_threshold_nm
            self.evidence_s = self.evidence_s + dt_s if cleared else max(0.0, self.evidence_s - dt_s)
            if self.evidence_s >= cfg.drift_persist_s:
                self.reidentify = False
                self.evidence_s = 0.0
        return self.reidentify
