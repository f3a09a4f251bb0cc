"""Shared test helpers: the reference config, and short lockstep runs on the simulated plant."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import configs
from controller.clock import SimClock
from controller.config import Config, load_config
from controller.reference import Reference, make_reference
from controller.runlog import read_log
from controller.runner import Session, run_session
from hil.sim_backend import SimBackend

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def reference_config() -> Config:
    return load_config(configs.path("turntable"))


def with_changes(cfg: Config, **sections) -> Config:
    """``with_changes(cfg, safety={'stale_ticks': 3})``: replace fields section by section."""
    new = {name: dataclasses.replace(getattr(cfg, name), **fields) for name, fields in sections.items()}
    return dataclasses.replace(cfg, **new)


def sim(cfg: Config, out: Path, *, scenario: str = "creep", duration_s: float | None = None,
        compensation: str | None = None, seed: int = 1, faults: tuple[tuple[float, str], ...] = (),
        reference: Reference | None = None, backend_hook=None, backend_cls=SimBackend):
    """A lockstep run; returns (summary, log, backend). ``backend_cls``: a SimBackend subclass
    (to change the drive's behaviour, override its hooks: a compiled SimBackend ignores a
    method assigned on the instance)."""
    sc = cfg.scenario(scenario)
    duration = duration_s if duration_s is not None else sc.duration_s
    clock = SimClock()
    backend = backend_cls(cfg, clock, seed=seed, scenario=sc)
    for t_s, fault in faults:
        backend.inject_at(t_s, fault)
    if backend_hook is not None:
        backend_hook(backend)
    ref = reference or make_reference(sc.reference, cfg.plant.encoder.rad_per_count, duration)
    session = Session(backend=backend, clock=clock, reference=ref, duration_s=duration,
                      scenario=scenario, seed=seed, compensation=compensation)
    summary = run_session(cfg, session, out, plot=False)
    return summary, read_log(out / "run.fctl"), backend


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path_factory, monkeypatch):
    """Every test latches faults in a directory of its own, never the user's state dir (and a
    fault latched by one test never refuses the next)."""
    directory = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("FRICTIONCTL_STATE_DIR", str(directory))
    return directory


@pytest.fixture
def ref_cfg() -> Config:
    return reference_config()
