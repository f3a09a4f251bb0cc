"""Build hook: the hot modules compiled with mypyc when possible, pure Python otherwise.

Everything else about the package is in pyproject.toml. The list of modules to compile is
``HOT_MODULES`` in ``controller/hot_modules.py``. The build never fails because of the compiled
path: when mypy/mypyc is not installed, when mypyc rejects the sources, or when the C compiler
is missing or fails, it prints one line starting ``frictionctl: building pure Python`` (pip shows
it with ``-v``) and installs the ``.py`` modules alone. The compiled modules sit beside their
sources, so the result of either path is the same package.

Environment:
- ``FRICTIONCTL_PURE_PYTHON=1``: do not compile (and, at run time, do not use compiled modules).
- ``FRICTIONCTL_REQUIRE_COMPILED=1``: fail instead of falling back (wheel builds use it, so a
  platform wheel never ships without its compiled modules).
"""

from __future__ import annotations

import os
import re
import runpy
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
_hot = runpy.run_path(str(ROOT / "controller" / "hot_modules.py"))
HOT_MODULES: tuple[str, ...] = _hot["HOT_MODULES"]
REQUIRE = os.environ.get("FRICTIONCTL_REQUIRE_COMPILED", "").strip().lower() not in ("", "0", "false", "no")
# The compiled arithmetic must round exactly as the interpreter's: no fused multiply-add
# (GCC contracts a*b+c into an fma by default on aarch64), no fast-math.
EXTRA_CFLAGS = ["-ffp-contract=off", "-fno-fast-math"]


def _last_line(err: BaseException) -> str:
    """The gist of an error in a few words (a compiler failure quotes its whole command line)."""
    text = str(err).strip()
    failed = re.search(r"""Command '\['([^']+)'.*exit status (-?\d+)""", text, re.S)
    if failed:
        return f"{failed.group(1)} exited with status {failed.group(2)}"
    lines = text.splitlines()
    return lines[-1][:160] if lines else type(err).__name__


def notice(reason: str) -> None:
    line = f"frictionctl: building pure Python ({reason}); the .py modules are installed alone"
    if REQUIRE:
        raise SystemExit(f"{line}: FRICTIONCTL_REQUIRE_COMPILED is set, stopping")
    print(line, file=sys.stderr)


def compiled_extensions() -> list:
    if _hot["pure_python_requested"]():
        notice("FRICTIONCTL_PURE_PYTHON is set")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        notice("mypyc is not installed")
        return []
    # mypyc compiles only type-correct modules: one with mypy errors stays interpreted (said so)
    try:
        rejected = _hot["type_errors"](str(ROOT))
    except Exception as err:  # noqa: BLE001 - mypy itself failed: nothing is compiled
        notice(f"mypy failed: {_last_line(err)}")
        return []
    interpreted = _hot["left_interpreted"](list(rejected))
    names = [n for n in HOT_MODULES if n not in interpreted]
    if interpreted:
        line = (f"frictionctl: {len(interpreted)} of {len(HOT_MODULES)} hot modules stay interpreted "
                f"({', '.join(sorted(interpreted))}: mypy errors in {', '.join(sorted(rejected))})")
        if REQUIRE:
            raise SystemExit(f"{line}: FRICTIONCTL_REQUIRE_COMPILED is set, stopping")
        print(line, file=sys.stderr)
    if not names:
        notice("no hot module is free of mypy errors")
        return []
    # mypyc names modules by their path relative to the working directory: the project root,
    # where pip and setuptools run this file
    try:
        extensions = mypycify([_hot["source_path"](n) for n in names] + list(_hot["MYPY_FLAGS"]),
                              opt_level=os.environ.get("MYPYC_OPT_LEVEL", "3"))
    except (Exception, SystemExit) as err:  # mypy reports type errors by exiting
        notice(f"mypyc rejected the sources: {_last_line(err)}")
        return []
    for ext in extensions:
        ext.extra_compile_args = list(ext.extra_compile_args or []) + EXTRA_CFLAGS
    return extensions


class OptionalBuildExt(build_ext):
    """build_ext whose failure (no compiler, compiler error) leaves a pure-Python install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as err:  # noqa: BLE001 - any failure of the optional path falls back
            self._discard_outputs()
            notice(f"compiling the hot modules failed: {_last_line(err)}")

    def _discard_outputs(self) -> None:
        """Remove whatever part of the compiled set was written: a shim without its shared
        library would fail to import, where its .py would have worked."""
        for output in self.get_outputs():
            try:
                os.remove(output)
            except FileNotFoundError:
                pass
        if self.inplace:
            for ext in self.extensions:
                path = Path(self.get_ext_fullpath(ext.name))
                if path.exists():
                    path.unlink()
        self.extensions = []

    def get_outputs(self) -> list[str]:
        return super().get_outputs() if self.extensions else []


setup(ext_modules=compiled_extensions(), cmdclass={"build_ext": OptionalBuildExt})
