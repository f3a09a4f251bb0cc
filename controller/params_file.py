"""Identified parameter files: what ``identify`` writes (``params.yaml``), what a run proposes
(``proposed_params.yaml``), read by ``sim|run|hil|replay --params`` and ``api.load_config``.

Accepted layouts (``yaml.safe_load``):

- a params file: ``friction:`` at the top (a flat LuGre set, or ``forward:``/``reverse:``), and
  optionally ``J:`` (the identified inertia [kg·m²]); ``uncertainty:`` and ``diagnostics:`` are
  documentation and not read;
- a full config: ``controller.friction`` (and ``controller.J``).

Applying a file replaces ``controller.friction`` (and ``controller.J`` when the file has one).
Nothing else moves by hand: the schedule's sets are factors on ``controller.friction`` and the
observer/adaptation thresholds are derived from the active set, so they follow it. Errors name
the file and the key (``params.yaml: friction.Fs: must be >= Fc …``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .friction import FrictionParams
from .schema import ConfigError, load_yaml

if TYPE_CHECKING:
    from .config import Config


@dataclass(frozen=True)
class IdentifiedParams:
    """The parameters a params file sets: friction, and J when it was identified."""

    path: str
    friction: FrictionParams
    J: Optional[float] = None  # [kg·m²]; None: the file has no J (the config's stays)


def _inertia(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(where, f"must be a number (kg·m²), got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(where, f"must be > 0 and finite, got {value}")
    return float(value)


def load_params_file(path: str | Path) -> IdentifiedParams:
    """Read a params file (module docstring). Raises ConfigError naming the file and key."""
    from .config import _parse_friction

    name = str(path)
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError("", f"{name}: not a mapping (expected 'friction:' or 'controller.friction:')")
    if "friction" in data:
        section, prefix = data, ""
    elif isinstance(data.get("controller"), dict) and "friction" in data["controller"]:
        section, prefix = data["controller"], "controller."
    else:
        raise ConfigError("", f"{name}: no 'friction:' or 'controller.friction:' block")
    friction = _parse_friction(section["friction"], f"{name}: {prefix}friction")
    J = section.get("J")
    return IdentifiedParams(name, friction,
                            None if J is None else _inertia(J, f"{name}: {prefix}J"))


def apply_params(cfg: "Config", params: IdentifiedParams) -> "Config":
    """``cfg`` with ``controller.friction`` (and ``controller.J``) from ``params``. A schedule
    whose sets contradict the new set is an error naming the file and the schedule's key."""
    changes: dict[str, Any] = {"friction": params.friction}
    if params.J is not None:
        changes["J"] = params.J
    try:
        controller = dataclasses.replace(cfg.controller, **changes)
    except ValueError as err:  # the anchored schedule, checked against the new set
        raise ConfigError("", f"{params.path}: applied as controller.friction: controller.{err}") from None
    return dataclasses.replace(cfg, controller=controller)


__all__ = ["IdentifiedParams", "apply_params", "load_params_file"]
