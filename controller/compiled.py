"""Which implementation of the hot modules is running: mypyc-compiled or pure Python.

``setup.py`` compiles the modules of :data:`HOT_MODULES` with mypyc when mypy and a C compiler
are present (and falls back to pure Python, with a one-line notice, when either is missing or the
compilation fails). A compiled module is installed *beside* its unchanged ``.py`` source, as
``controller/loop.cpython-311-x86_64-linux-gnu.so`` next to ``controller/loop.py``. Python's
path finder tries extension modules before source files, so a compiled build is used
automatically where it was built.

``FRICTIONCTL_PURE_PYTHON=1`` in the environment forces the ``.py`` sources at import time (for
debugging and profiling): importing ``controller`` or ``hil`` puts a finder first on
``sys.meta_path`` that loads every hot module from its source file. It must be set before the
first import of the package (it is read once). At build time the same variable skips the
compilation altogether.

The list and the finder live in :mod:`controller.hot_modules` (never compiled).
``python -m controller.compiled`` prints the active path; ``--require-compiled`` exits 1 unless
every hot module is compiled (used by the wheel builds).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from types import ModuleType
from typing import Sequence

from .hot_modules import HOT_MODULES, PURE_ENV, pure_python_requested


#: what :func:`active_path` says of an install whose build fell back to pure Python
NOT_COMPILED = "pure Python (not compiled in this install)"


def _is_compiled(module: ModuleType) -> bool:
    return isinstance(getattr(module.__spec__, "loader", None), importlib.machinery.ExtensionFileLoader)


def compiled_modules() -> list[str]:
    """The hot modules that run compiled in this process (imports them)."""
    return [name for name in HOT_MODULES if _is_compiled(importlib.import_module(name))]


def active_path() -> str:
    """One line for headers and benchmarks: 'mypyc (4/4 hot modules)' or 'pure Python (why)'."""
    done = compiled_modules()
    if done:
        return f"mypyc ({len(done)}/{len(HOT_MODULES)} hot modules)"
    if pure_python_requested():
        return f"pure Python ({PURE_ENV}=1)"
    return NOT_COMPILED


def hot_path_line() -> str:
    """The line commands such as ``frictionctl demo`` end with: which path ran and, when the
    install fell back to pure Python, where to read why (pip shows a build's own notice only
    with ``-v``)."""
    path = active_path()
    if path == NOT_COMPILED:
        return (f"hot path: {path}; the build fell back to pure Python, "
                "`pip install -v .` prints why")
    return f"hot path: {path}"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    print(active_path())
    done = set(compiled_modules())
    for name in HOT_MODULES:
        print(f"  {name}: {'compiled' if name in done else 'python'}")
    if "--require-compiled" in args and len(done) != len(HOT_MODULES):
        print("not every hot module is compiled", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
