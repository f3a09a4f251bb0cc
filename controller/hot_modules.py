"""The list of hot modules that ``setup.py`` compiles with mypyc, and the import hook that forces
their pure-Python sources when ``FRICTIONCTL_PURE_PYTHON=1`` (see :mod:`controller.compiled`).

Imports only the standard library: ``setup.py`` reads :data:`HOT_MODULES` from this file without
importing the package. Never compiled itself.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import Sequence

#: Modules compiled by ``setup.py`` (dotted names; each is ``<name with / for .>.py`` in the
#: source tree). Validation of user input (config, schema, parameter dataclasses) stays outside
#: this list, so bad input keeps its field-named ``ValueError``/``ConfigError`` on both paths.
#: Classes meant to be subclassed (references, clocks, backends: the tests and users derive their
#: own) stay interpreted too: an interpreted class cannot derive from a compiled one.
HOT_MODULES: tuple[str, ...] = (
    "controller.adaptation",
    "controller.clock",
    "controller.compensation",
    "controller.fastmath",
    "controller.control_law",
    "controller.friction_step",
    "controller.hunting",
    "controller.learning",
    "controller.log_ring",
    "controller.loop",
    "controller.lugre_compensator",
    "controller.observer",
    "controller.pid",
    "controller.reference",
    "controller.safety",
    "controller.schedule",
    "controller.stop",
    "controller.velocity",
    "drivers.backend",
    "hil.plant",
    "hil.replay_loop",
    "hil.sim_backend",
)

#: Modules compiled together or not at all: an interpreted class cannot derive from a compiled
#: one (LuGreCompensator derives from compensation.Compensator).
TOGETHER: tuple[frozenset[str], ...] = (
    frozenset({"controller.compensation", "controller.lugre_compensator"}),
)

PURE_ENV = "FRICTIONCTL_PURE_PYTHON"
#: how mypy (and so mypyc) reads the hot modules: imported modules are analysed for their types
#: but not reported on (they stay interpreted)
MYPY_FLAGS: tuple[str, ...] = ("--ignore-missing-imports", "--follow-imports=silent")


def source_path(name: str) -> str:
    """'controller.pid' → 'controller/pid.py' (relative to the project root)."""
    return os.path.join(*name.split(".")) + ".py"


def left_interpreted(rejected: Sequence[str], names: Sequence[str] = HOT_MODULES) -> set[str]:
    """The modules of ``names`` that stay interpreted when ``rejected`` cannot be compiled: those,
    and every module of a :data:`TOGETHER` group one of them belongs to."""
    out = set(rejected)
    for group in TOGETHER:
        if group & out:
            out |= group
    return out & set(names)


def type_errors(root: str, names: Sequence[str] = HOT_MODULES) -> dict[str, list[str]]:
    """mypy's errors in the hot modules under ``root``, per module name (only modules with errors).
    mypyc compiles a module only when mypy finds none; needs mypy installed."""
    from mypy import api

    paths = {source_path(n): n for n in names}
    cwd = os.getcwd()
    os.chdir(root)
    try:
        report, _, _ = api.run(list(paths) + list(MYPY_FLAGS))
    finally:
        os.chdir(cwd)
    errors: dict[str, list[str]] = {}
    for line in report.splitlines():
        path = line.split(":", 1)[0]
        if ": error:" in line and path in paths:
            errors.setdefault(paths[path], []).append(line)
    return errors


def pure_python_requested(environ: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """True when ``FRICTIONCTL_PURE_PYTHON`` is set to anything but '', '0', 'false', 'no'."""
    value = (os.environ if environ is None else environ).get(PURE_ENV, "")
    return value.strip().lower() not in ("", "0", "false", "no")


class SourceFirstFinder(importlib.abc.MetaPathFinder):
    """Loads the hot modules from their ``.py`` files even where a compiled one sits beside it."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None):
        if fullname not in self.names or not path:
            return None
        leaf = fullname.rpartition(".")[2] + ".py"
        for entry in path:
            candidate = os.path.join(entry, leaf)
            if os.path.isfile(candidate):
                loader = importlib.machinery.SourceFileLoader(fullname, candidate)
                return importlib.util.spec_from_file_location(fullname, candidate, loader=loader)
        return None


def install_pure_python_finder() -> bool:
    """Called by ``controller/__init__`` and ``hil/__init__``: the finder goes in once, if asked."""
    if not pure_python_requested():
        return False
    if not any(isinstance(f, SourceFirstFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceFirstFinder(HOT_MODULES))
    return True
