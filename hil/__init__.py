"""frictionctl hil: the simulated plant, drive emulators, benchmarks, replay, identification."""

import controller as _controller  # noqa: F401 - installs the pure-Python finder when asked
