"""``mypyc_attr`` for the hot modules, with or without mypy installed.

mypyc reads the decorator at compile time (``allow_interpreted_subclasses=True`` lets tests and
users derive their own classes from a compiled one); the pure-Python path needs only a name that
returns the class unchanged, so ``mypy_extensions`` is not a run-time dependency. Never compiled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr
else:
    try:
        from mypy_extensions import mypyc_attr
    except ImportError:  # a pure-Python install without mypy: the hint speaks only to mypyc
        def mypyc_attr(*_args, **_kwargs):
            return lambda cls: cls

__all__ = ["mypyc_attr"]
