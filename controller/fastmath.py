"""``math`` functions the hot modules call on every tick, bound once at import.

mypyc compiles ``math.exp``, ``math.isnan`` and a few others to C, but ``math.isfinite``,
``math.expm1`` and ``math.tanh`` stay Python calls, and ``math.<name>`` then costs a module
attribute lookup on every call. Bound here as final module constants, a call is one load and
one call of the builtin on both paths (the interpreter saves the attribute lookup too). The
very same functions: results are unchanged. A hot module itself.
"""

from __future__ import annotations

import math
from typing import Callable, Final

isfinite: Final[Callable[[float], bool]] = math.isfinite
expm1: Final[Callable[[float], float]] = math.expm1
tanh: Final[Callable[[float], float]] = math.tanh
