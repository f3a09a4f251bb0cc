"""A latched fault that outlives the process: ``frictionctl run`` and real-clock ``hil`` record
the fault a run ended with in a state directory, and refuse to enable a drive while it is there;
only ``frictionctl reset`` clears it (an explicit operator action, as for a fault within a run).

State directory: ``--state-dir``, else ``$FRICTIONCTL_STATE_DIR``, else
``$XDG_STATE_HOME/frictionctl``, else ``~/.local/state/frictionctl``. The record is one JSON file,
``latched_fault.json``, written atomically (a temporary file renamed over it). A record that
cannot be read counts as latched: an unreadable latch must not silently re-enable an axis.
Lockstep ``sim`` never latches (nothing real can be hurt, and a test suite must not leave state).
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any, Optional

from drivers.errors import FrictionctlError

LATCH_FILE = "latched_fault.json"
ENV = "FRICTIONCTL_STATE_DIR"


class FaultLatchedError(FrictionctlError):
    """A fault from an earlier run is latched: nothing is enabled until ``frictionctl reset``."""


def state_dir(explicit: Optional[str | Path] = None) -> Path:
    if explicit:
        return Path(explicit)
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "frictionctl"


def read_latch(directory: Path) -> Optional[dict[str, Any]]:
    """The latched record, or None when nothing is latched."""
    path = directory / LATCH_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as err:
        return {"fault": "UNREADABLE", "message": f"{path}: {err.strerror or err}"}
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return {"fault": "UNREADABLE", "message": f"{path}: not a latch record"}
    if not isinstance(record, dict):
        return {"fault": "UNREADABLE", "message": f"{path}: not a latch record"}
    return record


def describe(record: dict[str, Any]) -> str:
    where = " ".join(str(record[k]) for k in ("command", "protocol") if record.get(k))
    when = record.get("time", "")
    head = f"{record.get('fault', '?')}: {record.get('message', '')}".rstrip(": ")
    return f"{head}" + (f" (latched by {where} at {when})" if where or when else "")


def refuse_if_latched(directory: Path) -> None:
    record = read_latch(directory)
    if record is not None:
        raise FaultLatchedError(f"fault latched: {describe(record)}; check the axis, then "
                                f"`frictionctl reset{_dir_option(directory)}` to clear it")


def _dir_option(directory: Path) -> str:
    return "" if directory == state_dir() else f" --state-dir {directory}"


def write_latch(directory: Path, fault: str, message: str, **context: Any) -> Path:
    """Record the fault atomically; returns the file."""
    directory.mkdir(parents=True, exist_ok=True)
    record = {"fault": fault, "message": message,
              "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              **context}
    path = directory / LATCH_FILE
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def clear_latch(directory: Path) -> Optional[dict[str, Any]]:
    """Remove the record; returns what was latched (None if nothing was)."""
    record = read_latch(directory)
    try:
        (directory / LATCH_FILE).unlink()
    except FileNotFoundError:
        pass
    return record


def latch_from_summary(directory: Path, summary: dict[str, Any], **context: Any) -> Optional[Path]:
    """After a run: latch its first fault (a stop request is not a fault)."""
    faults = summary.get("faults") or []
    if not faults:
        return None
    kind, _, message = str(faults[0]).partition(": ")
    return write_latch(directory, kind, message, **context)
