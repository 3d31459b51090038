"""Where a build's tasks run: one interface (base.Engine) and one class per engine (local processes, a Ray
cluster), chosen here from --engine."""

from __future__ import annotations

from mlmprep.builder.engine.base import Engine
from mlmprep.builder.engine.local import LocalEngine
from mlmprep.builder.engine.ray import RayEngine
from mlmprep.errors import ConfigError


def make_engine(kind: str, workers: int = 0, ray_address: str | None = None) -> Engine:
    """The engine --engine `kind` names, with --workers and --ray-address (which applies to Ray only)."""
    if kind == "local":
        return LocalEngine(workers)
    if kind == "ray":
        return RayEngine(workers, ray_address)
    raise ConfigError(f"--engine must be local or ray, got {kind!r}")
