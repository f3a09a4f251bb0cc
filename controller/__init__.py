"""frictionctl controller: friction models, estimation, PID, the fixed-rate loop and safety."""

from .hot_modules import install_pure_python_finder as _install_pure_python_finder

__version__ = "0.1.0"

_install_pure_python_finder()  # FRICTIONCTL_PURE_PYTHON=1: the hot modules from their .py files
