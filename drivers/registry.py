"""Backends chosen by name (``drive.protocol``) and imported lazily: a missing optional package
is reported when that backend is chosen, not when the package is imported."""

from __future__ import annotations

import importlib
from typing import Any

from .errors import MissingDependencyError

BACKENDS: dict[str, str] = {
    "sim": "hil.sim_backend:SimBackend",
    "cia402": "drivers.cia402:Cia402Backend",
    "odrive_can": "drivers.odrive_can:ODriveCanBackend",
    "odrive_ascii": "drivers.odrive_ascii:ODriveAsciiBackend",
}


def backend_class(protocol: str) -> Any:
    if protocol not in BACKENDS:
        raise ValueError(f"drive.protocol: unknown backend {protocol!r} (known: {', '.join(BACKENDS)})")
    module_name, _, attr = BACKENDS[protocol].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and not err.name.startswith(("drivers", "hil", "controller")):
            raise MissingDependencyError(
                f"backend {protocol!r} needs the package {err.name!r}: pip install {err.name}") from err
        raise
    return getattr(module, attr)
