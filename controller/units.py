"""What differs between a rotary and a linear axis: the names of the units at the edges.

The loop, the models and the estimators are the same for both, in SI: a linear axis is the same
mathematics with m for rad, kg for kg·m² and N for N·m. Config keys, log columns and summary
keys keep their rotary spelling (``velocity_rad_s``, ``pos_rad``, ``torque_cmd_nm``,
``rms_error_rad``) so that every tool reads both kinds of log; the run log header's ``units``
map, the CSV units and summary.json's ``units`` say what the numbers are. This module is the one
place that maps a rotary unit to its linear counterpart and holds the plausibility bounds that
depend on the kind of axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping

AxisKind = Literal["rotary", "linear"]

# rotary unit -> linear unit, for every unit a column, key or figure can carry
_LINEAR_OF = {
    "rad": "m", "rad/s": "m/s", "rad/s^2": "m/s^2", "rad/s²": "m/s²", "rad/s^3": "m/s^3",
    "N·m": "N", "N·m/A": "N/A", "kg·m²": "kg", "N·m/rad": "N/m", "N·m·s/rad": "N·s/m",
    "N·m/s": "N/s", "N·m/(rad·s)": "N/(m·s)", "counts/rev": "counts/m",
}


@dataclass(frozen=True)
class AxisUnits:
    """Unit names and plausibility bounds of one kind of axis."""

    kind: AxisKind
    max_force_constant: float  # above this the force (torque) constant is a unit mistake
    max_force: float  # [N·m or N] widest torque (force) limit any such axis could mean
    max_speed: float  # [rad/s or m/s] widest velocity limit
    max_length: float  # [rad or m] widest following-error floor or standstill window

    def of(self, rotary_unit: str) -> str:
        """The unit this axis uses where a rotary axis uses ``rotary_unit`` (others unchanged)."""
        return _LINEAR_OF.get(rotary_unit, rotary_unit) if self.kind == "linear" else rotary_unit

    @property
    def length(self) -> str:
        return self.of("rad")

    @property
    def speed(self) -> str:
        return self.of("rad/s")

    @property
    def force(self) -> str:
        return self.of("N·m")

    @property
    def force_name(self) -> str:
        return "force" if self.kind == "linear" else "torque"

    @property
    def micro_length(self) -> str:
        return "µ" + self.length

    def column_units(self, rotary: Mapping[str, str]) -> dict[str, str]:
        """A ``{column: unit}`` map written for a rotary axis, in this axis' units."""
        return {name: self.of(unit) for name, unit in rotary.items()}


# The bounds are what any axis of the kind could mean; values past them are unit mistakes
# (mN·m/A for N·m/A, µm typed as m, ...), never a real machine:
# - rotary: torque constant <= 100 N·m/A (the largest direct-drive torque motors are a few tens
#   of N·m/A), torque <= 1e4 N·m, speed <= 1e4 rad/s (~100 000 rpm), lengths <= 10 rad;
# - linear: force constant <= 1000 N/A (large iron-core linear motors reach a few hundred N/A),
#   force <= 1e5 N (their peak forces are tens of kN), speed <= 100 m/s (the fastest linear-motor
#   axes run at ~10 m/s), lengths <= 1 m (a following error or standstill window of a metre is
#   no stage's).
ROTARY = AxisUnits("rotary", max_force_constant=100.0, max_force=1e4, max_speed=1e4, max_length=10.0)
LINEAR = AxisUnits("linear", max_force_constant=1000.0, max_force=1e5, max_speed=100.0, max_length=1.0)
AXES: dict[str, AxisUnits] = {"rotary": ROTARY, "linear": LINEAR}


def axis_units(kind: str) -> AxisUnits:
    if kind not in AXES:
        raise ValueError(f"units: one of {', '.join(AXES)}; got {kind!r}")
    return AXES[kind]


def axis_of_log_units(units: Mapping[str, str]) -> AxisUnits:
    """The kind of axis a run log (or CSV sidecar) was written for, from its ``units`` map:
    linear when the position column is in metres (logs before linear axes: rotary)."""
    return LINEAR if units.get("pos_rad") == "m" else ROTARY


# Suffix of a summary / facts key -> its rotary unit (longest suffix first).
_KEY_SUFFIXES = (
    ("_nm_per_rad", "N·m/rad"), ("_rad_s2", "rad/s^2"), ("_rad_s", "rad/s"), ("_nm_s", "N·m/s"),
    ("_rad", "rad"), ("_nm", "N·m"), ("_us", "us"), ("_hz", "Hz"), ("_kg", "kg"), ("_j", "J"),
    ("_s", "s"),
)


def unit_of_key(key: str) -> str | None:
    """The rotary unit a key's suffix names (``rms_error_rad`` → rad, ``fc_hat_final_nm`` →
    N·m, ``p99_late_us`` → us), or None for a key without one."""
    for suffix, unit in _KEY_SUFFIXES:
        if key.endswith(suffix):
            return unit
    return None


def key_units(keys, axis: AxisUnits) -> dict[str, str]:
    """``{key: unit}`` of every key with a unit suffix, in ``axis``' units (summary.json's
    ``units``: the keys keep their rotary names on a linear axis)."""
    return {k: axis.of(u) for k in keys if (u := unit_of_key(k)) is not None}


def display(value: float, unit: str) -> tuple[float, str]:
    """A figure as a table prints it: lengths in µrad or µm, everything else as it is."""
    if unit in ("rad", "m"):
        return value * 1e6, "µ" + unit
    return value, unit
