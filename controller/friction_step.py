"""The scalar per-step friction functions of the hot path: the Stribeck level ``g`` and the exact
LuGre bristle step ``lugre_step`` (units and model in :mod:`controller.friction`, which
re-exports both). In a module of their own so that they are compiled with the hot modules while
the parameter dataclasses, with their field-named validation, stay interpreted."""

from __future__ import annotations

import math

from .friction import DirectionalParams, FrictionParams, LuGreParams
from .fastmath import expm1


def g(params: LuGreParams, v: float) -> float:
    """Stribeck level g(v) = Fc + (Fs − Fc)·exp(−|v/vs|^delta) [N·m], scalar v."""
    r = abs(v / params.vs)
    if r > 1e100:  # far beyond vs: g = Fc (and r**delta would overflow)
        return params.Fc
    return params.Fc + (params.Fs - params.Fc) * math.exp(-(r * r if params.delta == 2.0 else r**params.delta))


def static_curve(params: LuGreParams, v: float, scale: float = 1.0) -> float:
    """The steady-state friction scale·g(v)·sgn(v) + sigma2·v [N·m] (0 sign at v = 0),
    scalar v: the static curve the watchdogs and the load estimate compare the measurement
    with."""
    level = scale * g(params, v)
    return (level if v > 0.0 else (-level if v < 0.0 else 0.0)) + params.sigma2 * v


def sliding_damping(params: LuGreParams, speed: float) -> float:
    """Damping of the LuGre friction in steady sliding at ``speed`` > 0 for motion faster than
    the bristle relaxation rate a = sigma0·v/g(v) [N·m·s/rad]:

        c = sigma2 + sigma1·v·g'(v)/g(v),   v·g'/g = −(Fs − Fc)·delta·r·exp(−r)/g(v),  r = (v/vs)^delta

    Linearised about sliding (z = g/sigma0), dz/dt = v − a(v)·z gives δż = (v·g'/g)·δv − a·δz:
    a faster motion also relaxes the bristles faster, so above a (δz ≈ 0) the sigma1 term
    weakens with speed wherever the Stribeck curve falls. Below a the response tends to the
    static slope g'(v) + sigma2. Independent of a common scale of Fc and Fs."""
    r = speed / params.vs
    if r > 1e100:
        return params.sigma2
    r = r * r if params.delta == 2.0 else r**params.delta
    e = math.exp(-r)
    gv = params.Fc + (params.Fs - params.Fc) * e
    return params.sigma2 - params.sigma1 * (params.Fs - params.Fc) * params.delta * r * e / gv


def lugre_step(params: FrictionParams, z: float, v: float, dt_s: float) -> tuple[float, float]:
    """Advance the bristle state one step with v held constant; return (z_next, force).

    Discretisation (exact for held v): with a = sigma0·|v|/g(v) [1/s] and z_ss = v/a =
    g(v)·sgn(v)/sigma0, the ODE dz/dt = v − a·z is linear over the step, so

        z⁺ = z·exp(−a·dt) + v·dt·φ(a·dt),    φ(x) = (1 − exp(−x))/x  (φ(0) = 1),

    evaluated with expm1 so that a·dt → 0 gives z⁺ = z + v·dt without cancellation and a·dt → ∞
    gives z⁺ = z_ss without overflow. z⁺ is a convex combination of z and z_ss, hence finite and
    within [−Fs/sigma0, Fs/sigma0] whenever z starts there, for every dt_s > 0 and sigma0.

    The force is taken at the end of the step: F = sigma0·z⁺ + sigma1·ż⁺ + sigma2·v with the exact
    end-of-step derivative ż⁺ = v − a·z⁺.
    """
    p = params.for_velocity(v, z) if isinstance(params, DirectionalParams) else params
    return lugre_step_values(p.Fc, p.Fs, p.vs, p.delta, p.sigma0, p.sigma1, p.sigma2, z, v, dt_s)


def lugre_step_values(fc: float, fs: float, vs: float, delta: float, sigma0: float, sigma1: float,
                      sigma2: float, z: float, v: float, dt_s: float) -> tuple[float, float]:
    """:func:`lugre_step` of one parameter set given as plain floats: the kernel the plant's
    substep loop calls with its parameters held in locals (in the compiled build, a native call
    with unboxed floats instead of an attribute lookup per parameter per substep)."""
    if v == 0.0:
        return z, sigma0 * z
    r = abs(v / vs)  # g(v) inlined: this runs several times per tick in the plant
    gv = fc if r > 1e100 else fc + (fs - fc) * math.exp(-(r * r if delta == 2.0 else r**delta))
    a = sigma0 * abs(v) / gv
    x = a * dt_s
    decay = math.exp(-x)
    z_next = z * decay + (v * dt_s * (-expm1(-x) / x) if x > 0.0 else v * dt_s)
    zdot = v - a * z_next
    return z_next, sigma0 * z_next + sigma1 * zdot + sigma2 * v
