"""The Python API: what the CLI does, for scripts, notebooks and other control loops.

    from controller import api
    cfg = api.load_config("turntable", overrides={"controller.compensation": "stribeck"})
    summary = api.simulate(cfg, "reversal", "out/reversal", duration_s=2.0)
    law = api.control_law(cfg)           # PID + friction feedforward, to step in your own loop
    run = api.read_log("out/reversal/run.fctl")

Everything here takes and returns SI units and validated frozen configs; errors are the same
one-line ``ConfigError`` (with the key path) the CLI prints.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping, Optional

from .compensation import TickSignals, make_compensator
from .config import Config, config_from_mapping, resolve_config_path
from .control_law import ControlLaw
from .params_file import apply_params, load_params_file
from .runlog import RunLog, read_log
from .schema import ConfigError, load_yaml

__all__ = ["Config", "ConfigError", "ControlLaw", "RunLog", "TickSignals", "control_law",
           "load_config", "read_log", "simulate"]


def load_config(name_or_path: str | Path = "turntable",
                overrides: Optional[Mapping[str, Any]] = None,
                params: str | Path | None = None) -> Config:
    """A shipped config by name, or a file, with ``overrides`` applied by dotted key path
    (``{"safety.torque_limit_nm": 2.0, "controller.compensation": "off"}``) before validation,
    so an override is checked exactly as the file's own value would be. ``params``: an
    identified set (``identify``'s params.yaml, a run's proposed_params.yaml) applied over
    ``controller.friction`` (and ``controller.J`` if the file has J), as ``--params`` does."""
    path = resolve_config_path(name_or_path)
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError("", f"{path}: not a mapping")
    data = copy.deepcopy(data)
    for dotted, value in (overrides or {}).items():
        node: Any = data
        keys = dotted.split(".")
        for i, key in enumerate(keys[:-1]):
            child = node.get(key) if isinstance(node, dict) else None
            if child is None:
                child = node[key] = {}
            if not isinstance(child, dict):
                raise ConfigError(".".join(keys[:i + 1]), "is not a section: cannot override below it")
            node = child
        node[keys[-1]] = value
    cfg = config_from_mapping(data)
    if params is not None:
        cfg = apply_params(cfg, load_params_file(params))
    return cfg


def simulate(cfg: Config, scenario: str, out: str | Path, *, compensation: Optional[str] = None,
             duration_s: Optional[float] = None, seed: int = 1, plot: bool = False) -> dict[str, Any]:
    """One lockstep simulation run of a scenario (as ``frictionctl sim``): writes ``out/run.fctl``
    and ``summary.json`` (and ``report.png`` with ``plot``); returns the summary."""
    from hil.scenarios import sim_run

    return sim_run(cfg, scenario, Path(out), compensation=compensation, duration_s=duration_s,
                   seed=seed, plot=plot)


def control_law(cfg: Config, compensation: Optional[str] = None) -> ControlLaw:
    """The loop's control law (PID + friction feedforward + inertia feedforward) for your own
    real-time loop (ros2_control, a vendor SDK): ``law.enable(pos_rad)`` once, then each period
    fill a :class:`TickSignals` and call ``law.step(signals, dt_s)`` → torque [N·m] (before your
    own limits). Pure: no clock, no I/O, no threads; ``dt_s`` is explicit. The observer rules
    that depend on the rate are taken at ``cfg.loop.rate_hz``: set it to your loop's."""
    return ControlLaw(cfg.controller,
                      make_compensator(cfg.controller, compensation, cfg.loop.rate_hz))
