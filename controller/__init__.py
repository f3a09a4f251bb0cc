"""frictionctl controller: friction models, estimation, PID, the fixed-rate loop and safety."""

__version__ = "0.1.0"
