"""Friction observers: a generalized-momentum observer that measures the friction torque without
differentiating velocity, and a LuGre observer of the bristle state z corrected by that measured
residual (or by the tracking error, Canudas de Wit et al. 1995).

Units: rad, rad/s, N·m, A, s, kg·m²; L [rad/(N·m·s)], bandwidths [Hz] (ω = 2π·f [rad/s]).

Every step is a pure update with explicit ``dt_s``; the small objects only hold the state.

Choosing the gains ("observer faster than the mechanics, slower than the noise", BRIEF §5):

    momentum observer bandwidth  K/2π      well above the position loop, below the sensor noise
                                           (reference table: 100 Hz against a 20 Hz loop)
    residual correction          ω_L = L·sigma0,  L = 2π·bandwidth_hz / sigma0
                                 placed above the mechanical/position-loop bandwidth and below K:
                                 the correction then tracks real friction changes the model misses,
                                 while the residual it acts on is still averaged over the noise.

In steady sliding the bristle relaxation rate a = sigma0·|v|/g(v) (≈ 1300 1/s at v = vs on the
reference table) is far above ω_L, so the correction mostly acts around zero velocity, where the
open-loop integration of ẑ drifts; a persistent sliding residual is left for the Fc adapter.
"""

from __future__ import annotations

import math

from .friction import DirectionalParams, FrictionParams, LuGreParams, g

TWO_PI = 2.0 * math.pi
_MAX_GROWTH = 50.0  # bound on −(rate·dt) when a negative correction gain makes the update grow


def lugre_driven_step(p: LuGreParams, z: float, v: float, dt_s: float, u: float = 0.0,
                      c: float = 0.0, scale: float = 1.0) -> tuple[float, float]:
    """One exact exponential step of the LuGre bristle ODE with an extra held input and decay.

    Generalises :func:`controller.friction.lugre_step` (u = c = 0, scale = 1 is that step):

        dz/dt = (v + u) − (a + c)·z,    a = sigma0·|v| / (scale·g(v))     [1/s]

    with v, u [rad/s] and c [1/s] held over the step. Linear in z, so with x = (a + c)·dt

        z⁺ = z·exp(−x) + (v + u)·dt·φ(x),    φ(x) = (1 − exp(−x))/x,  φ(0) = 1,

    i.e. a convex combination of z and the step's equilibrium (v + u)/(a + c) for every dt > 0
    and every c >= 0: bounded whatever the stiffness, the correction gain or the step. ``scale``
    multiplies the Stribeck level g (Fc and Fs scaled together: the Fc adapter). Returns
    (z⁺, a); the model derivative at the end of the step is v − a·z⁺.
    """
    a = p.sigma0 * abs(v) / (scale * g(p, v)) if v != 0.0 else 0.0
    x = (a + c) * dt_s
    w = v + u
    if x == 0.0:
        return z + w * dt_s, a
    if x < -_MAX_GROWTH:  # only with c < 0 (fault injection); the caller projects z
        x = -_MAX_GROWTH
    return z * math.exp(-x) - w * dt_s * math.expm1(-x) / x, a


class MomentumObserver:
    """Generalized-momentum (disturbance) observer of the torque opposing the motor [N·m].

    With J·ω̇ = Kt·i − τ_f (τ_f: friction + cogging + load), the observer

        r = K·( ∫(Kt·i − r) dt − J·(ω − ω0) )        ⇒        ṙ = K·(τ_f − r)

    is a first-order lag of bandwidth K = 2π·bandwidth_hz on τ_f, built from the momentum J·ω
    instead of a differentiated velocity. (The sign matters: r = K·(J·ω − J·ω0 − ∫(Kt·i − r)dt)
    gives ṙ = K·(r − τ_f), unstable.)

    Discretisation, exact when Kt·i is held over the tick and τ_f is taken at its tick mean
    τ̄ = Kt·i − J·(ω⁺ − ω)/dt (the momentum balance over the tick):

        r⁺ = r + β·(τ̄ − r),    β = 1 − exp(−K·dt)

    It is the integral form above with the integral advanced by the zero-order-hold rule; only
    the momentum increment J·(ω⁺ − ω) enters, never an acceleration estimate.
    """

    __slots__ = ("J", "Kt", "bandwidth_hz", "r_nm", "_vel", "_dt", "_beta")

    def __init__(self, J: float, Kt: float, bandwidth_hz: float) -> None:
        if not (J > 0 and Kt > 0 and bandwidth_hz > 0):
            raise ValueError(f"MomentumObserver: J, Kt, bandwidth_hz must be > 0 "
                             f"(got {J}, {Kt}, {bandwidth_hz})")
        self.J = J  # [kg·m²]
        self.Kt = Kt  # [N·m/A]
        self.bandwidth_hz = bandwidth_hz  # [Hz]
        self._dt = -1.0
        self._beta = 0.0
        self.reset()

    def reset(self, vel_rad_s: float = 0.0, r_nm: float = 0.0) -> None:
        """Restart at velocity ``vel_rad_s`` with estimate ``r_nm`` (ω0 := vel)."""
        self._vel = vel_rad_s
        self.r_nm = r_nm

    def beta(self, dt_s: float) -> float:
        """The per-tick gain 1 − exp(−K·dt) (cached for a fixed period)."""
        if dt_s != self._dt:
            self._dt = dt_s
            self._beta = -math.expm1(-TWO_PI * self.bandwidth_hz * dt_s)
        return self._beta

    def step(self, current_a: float, vel_rad_s: float, dt_s: float) -> float:
        """Advance one tick with the measured current [A] and velocity [rad/s] at its end."""
        beta = self._beta if dt_s == self._dt else self.beta(dt_s)
        tau_mean = self.Kt * current_a - self.J * (vel_rad_s - self._vel) / dt_s
        self._vel = vel_rad_s
        self.r_nm += beta * (tau_mean - self.r_nm)
        return self.r_nm
