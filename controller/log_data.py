"""What a run log means beyond its numbers: the stop phase, the clock, named codes, events, the
plant's true Coulomb level, and tables (numpy structured arrays, pandas, CSV) for other tools.

Everything here reads a :class:`controller.runlog.RunLog` (the header and the columns); nothing
needs the config or the run's objects, so a log copied to another machine is still explained.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence, Union

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .runlog import RunLog

PathLike = Union[str, "os.PathLike[str]"]

# Columns holding integer codes and the header key (or enum) that names them.
CODE_COLUMNS = ("fault", "drive_state", "stop_phase")


# --- phases and clock -----------------------------------------------------------------------------


def stop_phase_mask(run: "RunLog") -> np.ndarray:
    """True on the rows of the safe stop (the torque ramp after the end of the run, a fault or a
    stop request): these rows are not under control and do not belong on an error scale.

    With a ``stop_phase`` column (non-zero while stopping) that column decides; otherwise the stop
    begins at the first row with a fault, or at the header's ``controlled_ticks`` (the end of the
    reference run), whichever comes first.
    """
    n = run.data.shape[0]
    if "stop_phase" in run.columns:
        phase = run["stop_phase"]
        return np.isfinite(phase) & (phase != 0)
    return np.arange(n) >= stop_start(run)


def stop_start(run: "RunLog") -> int:
    """Index of the first row of the stop phase (the row count if the log ends before it)."""
    n = run.data.shape[0]
    if "stop_phase" in run.columns:
        phase = run["stop_phase"]
        stopping = np.isfinite(phase) & (phase != 0)
        return int(np.argmax(stopping)) if stopping.any() else n
    first = n
    if "fault" in run.columns and n:
        faulted = run["fault"] != 0
        if faulted.any():
            first = int(np.argmax(faulted))
    ticks = run.header.get("controlled_ticks")
    limit = int(ticks) if isinstance(ticks, (int, float)) else n
    return min(first, limit, n)


def real_clock(run: "RunLog") -> bool:
    """Whether the run ran on the real clock (``clock`` in the header; older logs: any non-zero
    lateness, as a lockstep loop logs exactly 0)."""
    clock = run.header.get("clock")
    if clock is not None:
        return clock == "real"
    hil = run.header.get("hil")
    if isinstance(hil, dict) and "realtime" in hil:
        return bool(hil["realtime"])
    if run.header.get("backend") == "sim" and "late_us" in run.columns:
        late = run["late_us"]
        return bool(np.any(np.isfinite(late) & (late != 0)))
    return run.header.get("backend") not in (None, "sim", "replay")


# --- codes ----------------------------------------------------------------------------------------


def code_names(run: "RunLog", column: str) -> dict[int, str]:
    """Code → name of an integer-coded column (``fault``, ``drive_state``, ``stop_phase``),
    from the log's header when it names them, else from the enums of this version."""
    header = run.header
    key = {"fault": "fault_kinds", "drive_state": "drive_states", "stop_phase": "stop_phases"}.get(column)
    if key is None:
        raise KeyError(f"column {column!r} holds no codes (coded columns: {', '.join(CODE_COLUMNS)})")
    named = header.get(key)
    if isinstance(named, dict) and named:
        return {int(k): str(v) for k, v in named.items()}
    if column == "fault":
        from .safety import FaultKind

        return {int(k): k.name for k in FaultKind}
    if column == "drive_state":
        from drivers.backend import DriveState

        return {int(s): s.name for s in DriveState}
    from .stop import StopPhase

    return {int(p): p.name for p in StopPhase}


def name_codes(values: np.ndarray, names: dict[int, str]) -> list[str]:
    """Names of integer codes; a code without a name becomes ``CODE_<n>``, NaN the empty string."""
    out = []
    for v in values:
        if not math.isfinite(v):
            out.append("")
        else:
            out.append(names.get(int(v), f"CODE_{int(v)}"))
    return out


def coded_columns(run: "RunLog") -> tuple[str, ...]:
    return tuple(c for c in CODE_COLUMNS if c in run.columns)


# --- events ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    t_s: float
    kind: str  # "fault", "change", "reidentify", "fallback", "schedule"
    label: str


def _rising(flag: np.ndarray) -> np.ndarray:
    on = np.nan_to_num(flag) > 0
    return np.flatnonzero(on & ~np.concatenate(([False], on[:-1])))


def events(run: "RunLog") -> list[Event]:
    """Moments worth a marker: the first fault (named), the scenario's changes (payload,
    friction step), the compensator's reidentify flag and fallback episodes (their starts), and
    parameter switches of the gain scheduler (the first tick of each run of steps)."""
    t = run["t_s"]
    out: list[Event] = []
    if t.size == 0:
        return out
    if "fault" in run.columns:
        faulted = np.flatnonzero(run["fault"] != 0)
        if faulted.size:
            k = int(faulted[0])
            name = name_codes(run["fault"][k:k + 1], code_names(run, "fault"))[0]
            out.append(Event(float(t[k]), "fault", name))
    scenario = _scenario(run)
    for ch in (scenario or {}).get("changes") or []:
        at = ch.get("at_s")
        if isinstance(at, (int, float)) and t[0] <= at <= t[-1]:
            what = ", ".join(f"{k} {v:g}" for k, v in ch.items()
                             if k != "at_s" and isinstance(v, (int, float)))
            out.append(Event(float(at), "change", what or "change"))
    for column, kind in (("reidentify", "reidentify"), ("fallback", "fallback")):
        if column in run.columns:
            out += [Event(float(t[k]), kind, kind) for k in _rising(run[column])]
    if "ff_param_step_nm" in run.columns:
        out += [Event(float(t[k]), "schedule", "parameter switch")
                for k in _rising(run["ff_param_step_nm"])]
    return sorted(out, key=lambda e: e.t_s)


# --- plant truth ----------------------------------------------------------------------------------


def _scenario(run: "RunLog") -> dict[str, Any] | None:
    cfg = run.header.get("config")
    name = run.header.get("scenario")
    if not isinstance(cfg, dict) or not name:
        return None
    sc = (cfg.get("scenarios") or {}).get(name)
    return sc if isinstance(sc, dict) else None


def _profile(profile, t: np.ndarray) -> np.ndarray:
    if not profile:
        return np.ones_like(t)
    pts = np.asarray(profile, dtype=float)
    return np.interp(t, pts[:, 0], pts[:, 1])  # held outside the span, as the plant does


def true_fc(run: "RunLog") -> np.ndarray | None:
    """The simulated plant's Coulomb level over the run (forward set of a directional plant):
    nominal Fc × the Fc profile (the scenario's, else the plant's) × the scenario's step
    changes. None when the log has no plant truth (a real machine) or its header lacks the
    plant's friction."""
    if "friction_true_nm" not in run.columns or not np.isfinite(run["friction_true_nm"]).any():
        return None
    plant = (run.header.get("config") or {}).get("plant")
    if not isinstance(plant, dict):
        return None
    friction = plant.get("friction") or {}
    fc0 = friction.get("Fc", (friction.get("forward") or {}).get("Fc"))
    if not isinstance(fc0, (int, float)):
        return None
    t = run["t_s"]
    sc = _scenario(run) or {}
    profile = sc.get("fc_profile") if sc.get("fc_profile") is not None else plant.get("fc_profile")
    scale = _profile(profile, t)
    step = np.ones_like(t)
    for ch in sorted(sc.get("changes") or [], key=lambda c: c.get("at_s", 0.0)):
        if isinstance(ch.get("fc_scale"), (int, float)):
            step[t >= ch["at_s"]] = ch["fc_scale"]
    return fc0 * scale * step


# --- tables ---------------------------------------------------------------------------------------


def to_numpy(run: "RunLog") -> np.ndarray:
    """A structured array, one float64 field per column: ``a["t_s"]``, ``a[10:20]``."""
    dtype = np.dtype([(c, np.float64) for c in run.columns])
    out = np.empty(run.data.shape[0], dtype=dtype)
    for j, c in enumerate(run.columns):
        out[c] = run.data[:, j]
    return out


def to_pandas(run: "RunLog", *, named_codes: bool = True):
    """A pandas DataFrame, one column per log column. With ``named_codes`` the integer-coded
    columns (fault, drive_state) become categoricals of their names ("NONE",
    "FOLLOWING_ERROR", "ENABLED"). ``df.attrs`` holds ``units`` and ``header``."""
    try:
        import pandas as pd  # type: ignore[import-untyped]  # optional, no stubs
    except ImportError:
        raise ImportError("RunLog.to_pandas() needs pandas, which frictionctl does not install: "
                          "pip install pandas (or use RunLog.to_numpy())") from None
    df = pd.DataFrame(run.data.copy(), columns=list(run.columns))
    if named_codes:
        for c in coded_columns(run):
            df[c] = pd.Categorical(name_codes(run[c], code_names(run, c)))
    df.attrs["units"] = dict(run.units)
    df.attrs["header"] = run.header
    return df


def export_csv(run: "RunLog", path: PathLike, columns: Sequence[str] | None = None, *,
               named_codes: bool = True, units: str = "sidecar") -> list[str]:
    """CSV of the log: a line of column names, then one line per tick ('%.17g': round-trip exact).

    ``named_codes``: fault / drive_state as names ("FOLLOWING_ERROR"), not bare integers.
    ``units``: "sidecar" writes ``<path>.json`` beside it (units per column, the code names,
    the run header), "row" puts the units as the second line, "none" neither. Returns the paths
    written. Loads with ``pandas.read_csv(path)`` (``skiprows=[1]`` with a units row).
    """
    if units not in ("sidecar", "row", "none"):
        raise ValueError(f"units: one of sidecar, row, none; got {units!r}")
    names = run.columns if columns is None else tuple(columns)
    if not names:
        raise ValueError("export_csv needs at least one column")
    for n in names:
        run.column(n)  # KeyError naming an unknown column
    cells: list[list[str]] = []
    for n in names:
        col = run[n]
        if named_codes and n in CODE_COLUMNS:
            cells.append(name_codes(col, code_names(run, n)))
        else:
            cells.append(["%.17g" % v for v in col.tolist()])
    path = os.fspath(path)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(",".join(names) + "\n")
        if units == "row":
            f.write(",".join(run.units.get(n, "") for n in names) + "\n")
        for row in zip(*cells):
            f.write(",".join(row) + "\n")
    written = [path]
    if units == "sidecar":
        side = path + ".json"
        meta = {
            "columns": list(names),
            "units": {n: run.units.get(n, "") for n in names},
            "codes": {c: {str(k): v for k, v in code_names(run, c).items()}
                      for c in names if c in CODE_COLUMNS},
            "complete": run.complete,
            "header": run.header,
        }
        with open(side, "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1, default=str)
            f.write("\n")
        written.append(side)
    return written
