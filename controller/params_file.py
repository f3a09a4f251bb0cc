"""Identified parameter files: what ``identify`` writes (``params.yaml``), what a run proposes
(``proposed_params.yaml``), read by ``sim|run|hil|replay --params`` and ``api.load_config``.

Accepted layouts (``yaml.safe_load``):

- a params file: ``friction:`` at the top (a flat LuGre set, or ``forward:``/``reverse:``), and
  optionally ``J:`` (the identified inertia [kg·m²]) and ``uncertainty:`` (standard errors, same
  keys, ``.nan`` not measured; per direction, each key's larger one, or not stated where either
  direction did not measure it); ``diagnostics:`` is documentation and not read;
- a full config: ``controller.friction`` (and ``controller.J``, ``controller.friction_se``).

Applying a file replaces ``controller.friction``, ``controller.friction_se`` (the file's
uncertainty, or none: a stated uncertainty never outlives its set) and ``controller.J`` when the
file has one.
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

from .friction import FrictionParams, FrictionUncertainty
from .schema import ConfigError, load_yaml, parse

if TYPE_CHECKING:
    from .config import Config


@dataclass(frozen=True)
class IdentifiedParams:
    """The parameters a params file sets: friction, its stated uncertainty, and J when it was
    identified."""

    path: str
    friction: FrictionParams
    J: Optional[float] = None  # [kg·m²]; None: the file has no J (the config's stays)
    uncertainty: Optional[FrictionUncertainty] = None  # the file's standard errors, if stated


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
    se_key = "uncertainty" if prefix == "" else "friction_se"
    return IdentifiedParams(name, friction,
                            None if J is None else _inertia(J, f"{name}: {prefix}J"),
                            _uncertainty(section.get(se_key), f"{name}: {prefix}{se_key}"))


def _uncertainty(value: Any, where: str) -> Optional[FrictionUncertainty]:
    """The standard errors of a file: a non-finite one (``.nan``: not measured, ``.inf``) read as
    null. A per-direction block (``forward:``/``reverse:``, with keys beside them such as ``J``
    holding for both) is each block checked on its own, then merged key by key to the larger
    standard error, or to null where either direction did not measure it (null or 0)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(where, f"must be a mapping of standard errors, got {value!r}")
    if "forward" not in value and "reverse" not in value:
        parsed: FrictionUncertainty = parse(FrictionUncertainty, _finite(value), where)
        return parsed
    if not all(isinstance(value.get(k), dict) for k in ("forward", "reverse")):
        raise ConfigError(where, "a per-direction uncertainty needs both forward: and reverse: "
                                 "mappings")
    common = {k: v for k, v in value.items() if k not in ("forward", "reverse")}
    blocks = []
    for d in ("forward", "reverse"):
        both = sorted(set(common) & set(value[d]))
        if both:
            raise ConfigError(f"{where}.{d}.{both[0]}", "given beside forward:/reverse: as well")
        blocks.append(parse(FrictionUncertainty, _finite({**common, **value[d]}), f"{where}.{d}"))
    merged = {}
    for f in dataclasses.fields(FrictionUncertainty):
        a, b = (getattr(blk, f.name) for blk in blocks)
        merged[f.name] = None if not a or not b else max(a, b)
    return FrictionUncertainty(**merged)


def _finite(block: dict[str, Any]) -> dict[str, Any]:
    """A block with its non-finite numbers as null (not measured)."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in block.items()}


def apply_params(cfg: "Config", params: IdentifiedParams) -> "Config":
    """``cfg`` with ``controller.friction``, ``controller.friction_se`` (the file's uncertainty, or
    none) and ``controller.J`` (when the file has one) from ``params``. A schedule whose sets
    contradict the new set is an error naming the file and the schedule's key."""
    changes: dict[str, Any] = {"friction": params.friction, "friction_se": params.uncertainty}
    if params.J is not None:
        changes["J"] = params.J
    try:
        controller = dataclasses.replace(cfg.controller, **changes)
    except ValueError as err:  # the anchored schedule, checked against the new set
        raise ConfigError("", f"{params.path}: applied as controller.friction: controller.{err}") from None
    return dataclasses.replace(cfg, controller=controller)


__all__ = ["IdentifiedParams", "apply_params", "load_params_file"]
