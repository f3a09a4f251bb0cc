"""The simulated turntable: a rigid inertia with true LuGre friction, cogging, load/unbalance,
a current loop, and quantized, noisy sensors.

Per internal substep h (the control period split so that h <= bristle period / 20, with at least
``min_substeps`` substeps), with the commanded current held over the control period:

    i      ← i_lim + (i − i_lim)·exp(−ωc·h)            current loop: exact first-order lag
    τ_m    = Kt·i
    τ_d    = Σ A_k·sin(k·θ + φ_k) + U·sin(θ + φ_U) + τ_load   cogging, unbalance, load (evaluated
             once per control period: at 1 rad/s the 36th cogging harmonic turns 0.036 rad in 1 ms)
    (z, F) = lugre_step(friction(t), z, ω, h)         exact exponential bristle update
    ω      ← ω + h·(τ_m − F − τ_d)/J                  symplectic Euler: velocity first,
    θ      ← θ + h·ω                                  then position with the new velocity

The exponential bristle update keeps z bounded for any stiffness; the substep bound keeps the
bristle spring–inertia oscillator (natural frequency sqrt(sigma0/J)) well resolved, so the
plant dissipates energy when unpowered (tests check it coasts down and stops).
Units: rad, rad/s, N·m, A, s, kg·m².
"""

from __future__ import annotations

import math
import numpy as np

from controller.config import PlantConfig
from controller.friction import DirectionalParams, FrictionParams, LuGreParams
from controller.friction_step import lugre_step, lugre_step_values
from controller.fastmath import isfinite


class PlantMeasurement:
    """What the drive's sensors report after a control period (quantized, noisy). A plain class,
    not a NamedTuple: in the compiled build it is a native object, built without a Python call."""

    __slots__ = ("position_rad", "position_counts", "current_a")

    def __init__(self, position_rad: float, position_counts: int, current_a: float) -> None:
        self.position_rad = position_rad  # encoder, quantized to counts
        self.position_counts = position_counts
        self.current_a = current_a  # measured motor current, noisy and quantized


def scale_friction(params: FrictionParams, scale: float) -> FrictionParams:
    """The same set with Fc and Fs multiplied by ``scale`` (temperature drift)."""
    if scale == 1.0:
        return params
    if isinstance(params, DirectionalParams):
        return DirectionalParams(params.forward.scaled(Fc=scale, Fs=scale),
                                 params.reverse.scaled(Fc=scale, Fs=scale))
    return params.scaled(Fc=scale, Fs=scale)


def profile_value(profile: tuple[tuple[float, float], ...], t_s: float, default: float = 1.0) -> float:
    """Piecewise-linear profile of (t, value) breakpoints, held outside its span."""
    if not profile:
        return default
    if t_s <= profile[0][0]:
        return profile[0][1]
    for (t0, v0), (t1, v1) in zip(profile, profile[1:]):
        if t_s <= t1:
            return v0 + (v1 - v0) * (t_s - t0) / (t1 - t0)
    return profile[-1][1]


def _stiffest(params: FrictionParams) -> float:
    if isinstance(params, DirectionalParams):
        return max(params.forward.sigma0, params.reverse.sigma0)
    return params.sigma0


class Turntable:
    """Simulated turntable. ``advance(i_cmd_a, dt_s)`` moves it one control period.

    State (public, read-only by convention): t_s, theta_rad, omega_rad_s, current_a, z_rad,
    friction_nm (true friction torque at the end of the last step), fc_scale.
    """

    def __init__(self, cfg: PlantConfig, seed: int = 0, fc_profile=None) -> None:
        self.cfg = cfg
        self._rng = np.random.default_rng(seed)
        self._noise: list[float] = []  # a block of standard normal draws, used from the end
        # one current-sensor sample per plant instant: reading again before the plant moves
        # (a drive answering several requests in one period) gives the same sample, so the
        # noise sequence does not depend on how often, or how soon in wall time, it is read
        self._noise_t = math.nan
        self._noise_sample = 0.0
        self._noise_std_a = cfg.current_sensor.noise_std_a
        self._resolution_a = cfg.current_sensor.resolution_a
        self._fc_profile = cfg.fc_profile if fc_profile is None else fc_profile
        self.J = cfg.J
        self.Kt = cfg.Kt
        self.temperature_c = cfg.temperature_c
        self.extra_fc_scale = 1.0  # step changes (schedule scenario) on top of the profile
        self.blocked = False  # rotor mechanically blocked (fault injection)
        self.extra_load_nm = 0.0  # load torque added by a load step (fault injection) [N·m]
        self._base_friction = cfg.friction
        # the configuration read on every period, held as plain floats (the config is frozen:
        # in the compiled build an attribute of an interpreted dataclass is a dictionary lookup)
        self._limit_a = cfg.current_loop.limit_a
        self._load_nm = cfg.load_torque_nm
        self._unbalance_nm = cfg.unbalance_nm
        self._unbalance_phase_rad = cfg.unbalance_phase_rad
        self._cog = tuple((h.harmonic, h.amplitude_nm, h.phase_rad) for h in cfg.cogging)
        self.fc_scale = profile_value(self._fc_profile, 0.0)
        self._friction: FrictionParams = self._base_friction
        self._one_set = True
        self._fc = self._fs = self._vs = self._delta = 0.0
        self._s0 = self._s1 = self._s2 = 0.0
        self.friction = scale_friction(self._base_friction, self.fc_scale)
        self._rad_per_count = cfg.encoder.rad_per_count
        self.t_s = 0.0
        self.theta_rad = 0.0
        self.omega_rad_s = 0.0
        self.current_a = 0.0
        self.z_rad = 0.0
        self.friction_nm = 0.0
        self._substeps: dict[float, tuple[int, float, float]] = {}

    @property
    def friction(self) -> FrictionParams:
        """The true friction set now (the configured one times the drift scale)."""
        return self._friction

    @friction.setter
    def friction(self, params: FrictionParams) -> None:
        self._friction = params
        # one set: its values held as floats for the substeps; directional: chosen per substep
        self._one_set = isinstance(params, LuGreParams)
        p = params if isinstance(params, LuGreParams) else params.forward
        self._fc, self._fs, self._vs, self._delta = p.Fc, p.Fs, p.vs, p.delta
        self._s0, self._s1, self._s2 = p.sigma0, p.sigma1, p.sigma2

    def substeps(self, dt_s: float) -> int:
        """Substeps for a control period: h <= bristle period / 20, at least min_substeps."""
        period = 2.0 * math.pi * math.sqrt(self.J / _stiffest(self._base_friction))
        return max(self.cfg.min_substeps, math.ceil(dt_s / (period / 20.0)))

    def disturbance_nm(self, theta: float) -> float:
        """Cogging + unbalance + constant load torque at angle theta [N·m]."""
        tau = self._load_nm + self.extra_load_nm
        if self._unbalance_nm:
            tau += self._unbalance_nm * math.sin(theta + self._unbalance_phase_rad)
        for k, amp, phase in self._cog:
            tau += amp * math.sin(k * theta + phase)
        return tau

    def _update_friction_scale(self) -> None:
        if not self._fc_profile and self.extra_fc_scale == self.fc_scale:
            return  # nothing drifts: the common case, kept cheap
        scale = profile_value(self._fc_profile, self.t_s) * self.extra_fc_scale
        if abs(scale - self.fc_scale) > 1e-9 * self.fc_scale:
            self.fc_scale = scale
            self.friction = scale_friction(self._base_friction, scale)

    def _steps(self, dt_s: float) -> tuple[int, float, float]:
        """(substeps, substep h [s], current-loop decay per substep) for a control period."""
        cached = self._substeps.get(dt_s)
        if cached is None:
            n = self.substeps(dt_s)
            h = dt_s / n
            lag = math.exp(-2.0 * math.pi * self.cfg.current_loop.bandwidth_hz * h)
            cached = self._substeps[dt_s] = (n, h, lag)
        return cached

    def advance(self, i_cmd_a: float, dt_s: float) -> None:
        """Move the plant one control period with the current command held [A, s]."""
        self._update_friction_scale()
        n, h, lag = self._steps(dt_s)
        limit = self._limit_a
        i_target = limit if i_cmd_a > limit else (-limit if i_cmd_a < -limit else i_cmd_a)
        if not isfinite(i_target):
            i_target = 0.0
        params = self._friction
        blocked = self.blocked
        h_inv_j = h / self.J
        kt = self.Kt
        i, z, w, th = self.current_a, self.z_rad, self.omega_rad_s, self.theta_rad
        f = self.friction_nm
        tau_d = self.disturbance_nm(th)
        one_set = self._one_set  # else direction-dependent: chosen per substep
        fc, fs, vs, delta = self._fc, self._fs, self._vs, self._delta
        s0, s1, s2 = self._s0, self._s1, self._s2
        for _ in range(n):
            i = i_target + (i - i_target) * lag
            if one_set:
                z, f = lugre_step_values(fc, fs, vs, delta, s0, s1, s2, z, w, h)
            else:
                z, f = lugre_step(params, z, w, h)
            if blocked:
                w = 0.0
                continue
            w += (kt * i - f - tau_d) * h_inv_j
            th += h * w
        self.current_a, self.z_rad, self.omega_rad_s, self.theta_rad = i, z, w, th
        self.friction_nm = f
        self.t_s += dt_s

    def measure(self) -> PlantMeasurement:
        """Sensor readings now: encoder counts (floor) and noisy, quantized current."""
        counts = math.floor(self.theta_rad / self._rad_per_count)
        i = self.current_a
        noise_std = self._noise_std_a
        if noise_std:
            if self.t_s != self._noise_t:
                noise = self._noise
                if not noise:  # draw in blocks: one numpy call per 4096 samples, not one per tick
                    noise.extend(self._rng.standard_normal(4096).tolist())
                self._noise_sample = noise.pop()
                self._noise_t = self.t_s
            i += noise_std * self._noise_sample
        resolution = self._resolution_a
        if resolution:
            i = round(i / resolution) * resolution
        return PlantMeasurement(counts * self._rad_per_count, counts, i)

    def energy_j(self) -> float:
        """Kinetic plus bristle-spring energy ½Jω² + ½sigma0·z² [J]."""
        p = self.friction
        if not isinstance(p, LuGreParams):
            p = p.for_velocity(self.omega_rad_s, self.z_rad)
        return 0.5 * self.J * self.omega_rad_s**2 + 0.5 * p.sigma0 * self.z_rad**2
