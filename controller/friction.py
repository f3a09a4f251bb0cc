"""Friction models: LuGre (dynamic) and the static Coulomb(+viscous) and Stribeck curves.

Units (rotary SI): velocity v [rad/s], bristle deflection z [rad], force/torque [N·m],
Fc, Fs [N·m], vs [rad/s], sigma0 [N·m/rad], sigma1, sigma2 [N·m·s/rad], delta [-].

LuGre (Canudas de Wit, Olsson, Åström, Lischinsky 1995):

    dz/dt = v − sigma0·|v|·z / g(v)
    g(v)  = Fc + (Fs − Fc)·exp(−|v/vs|^delta)
    F     = sigma0·z + sigma1·dz/dt + sigma2·v

Every function that takes a parameter set also accepts a :class:`DirectionalParams` pair; the set
is chosen by the sign of the velocity (forward for v > 0, reverse for v < 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from .schema import require


@dataclass(frozen=True, slots=True)
class LuGreParams:
    """One LuGre parameter set (units in the module docstring). Validated on construction."""

    Fc: float
    Fs: float
    vs: float
    sigma0: float
    sigma1: float
    sigma2: float
    delta: float = 2.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{f.name}: must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"{f.name}: must be finite, got {value!r}")
            object.__setattr__(self, f.name, float(value))
        require(self.Fc > 0, "Fc", f"must be > 0, got {self.Fc!r}")
        require(self.Fs >= self.Fc, "Fs", f"must be >= Fc ({self.Fs!r} < {self.Fc!r})")
        require(self.vs > 0, "vs", f"must be > 0, got {self.vs!r}")
        require(self.sigma0 > 0, "sigma0", f"must be > 0, got {self.sigma0!r}")
        require(self.sigma1 >= 0, "sigma1", f"must be >= 0, got {self.sigma1!r}")
        require(self.sigma2 >= 0, "sigma2", f"must be >= 0, got {self.sigma2!r}")
        require(self.delta > 0, "delta", f"must be > 0, got {self.delta!r}")

    @property
    def passivity_margin(self) -> float:
        """sigma2 − sigma1·(Fs − Fc)/Fc [N·m·s/rad]; >= 0 makes the model dissipative
        (Åström & Canudas de Wit 2008). Negative is a warning-level fact, not an error."""
        return self.sigma2 - self.sigma1 * (self.Fs - self.Fc) / self.Fc

    @property
    def z_max(self) -> float:
        """Largest steady bristle deflection Fs/sigma0 [rad]: |z| stays within it."""
        return self.Fs / self.sigma0

    def scaled(self, **factors: float) -> "LuGreParams":
        """A copy with named fields multiplied by factors (``scaled(Fc=1.2)``)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, factor in factors.items():
            if name not in values:
                raise ValueError(f"{name}: not a LuGre parameter")
            values[name] *= factor
        if "Fc" in factors and "Fs" not in factors:
            values["Fs"] = max(values["Fs"], values["Fc"])
        return LuGreParams(**values)

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class DirectionalParams:
    """A pair of LuGre sets, one per direction of motion (preload or assembly asymmetry)."""

    forward: LuGreParams
    reverse: LuGreParams

    def for_velocity(self, v: float, z: float = 0.0) -> LuGreParams:
        """The set for velocity v; at v == 0 the sign of the bristle deflection z decides."""
        if v > 0.0 or (v == 0.0 and z >= 0.0):
            return self.forward
        return self.reverse

    @property
    def passivity_margin(self) -> float:
        return min(self.forward.passivity_margin, self.reverse.passivity_margin)

    @property
    def z_max(self) -> float:
        return max(self.forward.z_max, self.reverse.z_max)


FrictionParams = Union[LuGreParams, DirectionalParams]


@dataclass(frozen=True, slots=True)
class FrictionUncertainty:
    """Standard errors of a believed LuGre set and its J, as ``identify`` states them
    (params.yaml ``uncertainty:``), same keys and units. None: not measured; 0: held fixed
    (taken from the prior, so not measured either)."""

    Fc: Optional[float] = None  # [N·m]
    Fs: Optional[float] = None  # [N·m]
    vs: Optional[float] = None  # [rad/s]
    sigma0: Optional[float] = None  # [N·m/rad]
    sigma1: Optional[float] = None  # [N·m·s/rad]
    sigma2: Optional[float] = None  # [N·m·s/rad]
    delta: Optional[float] = None  # [-]
    J: Optional[float] = None  # [kg·m²]

    def __post_init__(self) -> None:
        for f in fields(self):
            se = getattr(self, f.name)
            require(se is None or (math.isfinite(se) and se >= 0.0), f.name,
                    f"must be a standard error (>= 0 and finite) or null, got {se}")

    def relative(self, name: str, value: float) -> float:
        """se/|value| of one parameter; inf where it was not measured (None or 0) or the value
        is 0."""
        se = getattr(self, name)
        if se is None or se == 0.0 or value == 0.0:
            return math.inf
        return se / abs(value)

# The per-step functions g and lugre_step run several times per tick (plant substeps, observers):
# they live in controller.friction_step, compiled with the hot modules, and are re-exported here
# on first use (that module imports the parameter classes above, so not at import time).
if TYPE_CHECKING:
    from .friction_step import g, lugre_step


def __getattr__(name: str) -> Any:
    if name in ("g", "lugre_step"):
        from . import friction_step

        value = getattr(friction_step, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def passivity_warning(params: FrictionParams) -> str | None:
    """A one-line warning when a passivity margin is negative, else None."""
    sets: tuple[tuple[str, LuGreParams], ...]
    if isinstance(params, DirectionalParams):
        sets = (("forward ", params.forward), ("reverse ", params.reverse))
    else:
        sets = (("", params),)
    for label, p in sets:
        margin = p.passivity_margin
        if margin < 0:
            return (
                f"{label}passivity margin sigma2 - sigma1*(Fs-Fc)/Fc = {margin:.4g} N·m·s/rad < 0: "
                "the model is not dissipative for all motions (Astrom & Canudas de Wit 2008)"
            )
    return None


# --- steady-state (static) curves -------------------------------------------------------------


def _sign(v, v_eps: float):
    if v_eps > 0.0:
        return np.tanh(np.asarray(v, dtype=float) / v_eps)
    return np.sign(v)


def _static(params: FrictionParams, v, v_eps: float, with_stribeck: bool):
    v_arr = np.asarray(v, dtype=float)
    if isinstance(params, DirectionalParams):
        fwd = _static(params.forward, v_arr, v_eps, with_stribeck)
        rev = _static(params.reverse, v_arr, v_eps, with_stribeck)
        out = np.where(v_arr >= 0.0, fwd, rev)
        return float(out) if out.ndim == 0 else out
    p = params
    level: float | np.ndarray = p.Fc
    if with_stribeck:
        level = p.Fc + (p.Fs - p.Fc) * np.exp(-(np.abs(v_arr / p.vs) ** p.delta))
    out = level * _sign(v_arr, v_eps) + p.sigma2 * v_arr
    return float(out) if np.ndim(out) == 0 else out


def stribeck(params: FrictionParams, v, *, v_eps: float = 0.0):
    """Steady-state friction g(v)·sgn(v) + sigma2·v [N·m]; 0 at v = 0. Vectorised over arrays.

    ``v_eps`` > 0 replaces sgn by tanh(v/v_eps) (a regularised sign for feedforward)."""
    return _static(params, v, v_eps, True)


def coulomb(params: FrictionParams, v, *, v_eps: float = 0.0):
    """Coulomb plus viscous friction Fc·sgn(v) + sigma2·v [N·m]; 0 at v = 0. Vectorised."""
    return _static(params, v, v_eps, False)


# --- LuGre dynamic model ----------------------------------------------------------------------


def lugre_euler_step(params: LuGreParams, z: float, v: float, dt_s: float) -> tuple[float, float]:
    """Naive explicit Euler step of the same ODE. For benchmarks and tests only: it oscillates
    and diverges once a·dt > 2 (stiff bristles, coarse steps)."""
    from .friction_step import g

    gv = g(params, v)
    zdot = v - params.sigma0 * abs(v) * z / gv
    z_next = z + zdot * dt_s
    zdot_next = v - params.sigma0 * abs(v) * z_next / gv
    return z_next, params.sigma0 * z_next + params.sigma1 * zdot_next + params.sigma2 * v
