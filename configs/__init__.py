"""Shipped configuration files (YAML); found through importlib.resources after install."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def path(name: str) -> Path:
    """Path of a shipped config by file name (``turntable.yaml``) or stem (``turntable``)."""
    if not name.endswith((".yaml", ".yml")):
        name += ".yaml"
    return Path(str(resources.files(__name__).joinpath(name)))


def names() -> list[str]:
    """Stems of every shipped config."""
    return sorted(p.name[:-5] for p in resources.files(__name__).iterdir() if p.name.endswith(".yaml"))

