"""One way to run batch work (replays of many logs, benchmark runs, identification checks):
map a picklable top-level function over a list of tasks and get the results back in task order.

- ``--jobs 1`` (default): in this process, one task after the other.
- ``--jobs N``: N local worker processes (``concurrent.futures.ProcessPoolExecutor``; forked
  where the platform allows it and this process runs a single thread, spawned otherwise).
- ``--cluster ADDRESS``: the workers of a Dask distributed scheduler at ADDRESS
  (``tcp://host:8786``; optional extra ``pip install 'frictionctl[cluster]'``). The workers need
  frictionctl installed (or on their path) at the same version.

A task carries everything its result depends on (config, seed, paths), and the simulation is
deterministic for a seed, so the results are the same whichever executor ran them. A task that
raises makes the whole map raise (the first failing task in task order).
"""

from __future__ import annotations

import argparse
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence, TypeVar

from drivers.errors import FrictionctlError

T = TypeVar("T")
R = TypeVar("R")

CLUSTER_EXTRA = "pip install 'frictionctl[cluster]'"


class ExecutorError(FrictionctlError):
    """The executor cannot be set up (bad --jobs, dask missing, scheduler unreachable)."""


@dataclass(frozen=True)
class ExecutorSpec:
    """Where batch work runs: ``jobs`` local processes, or the Dask scheduler at ``cluster``."""

    jobs: int = 1
    cluster: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 1:
            raise ExecutorError(f"--jobs: must be an integer >= 1, got {self.jobs!r}")
        if self.cluster is not None and not self.cluster.strip():
            raise ExecutorError("--cluster: empty scheduler address")

    @property
    def description(self) -> str:
        if self.cluster is not None:
            return f"dask cluster {self.cluster}"
        return "in process" if self.jobs == 1 else f"{self.jobs} local processes"


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """``--jobs N`` and ``--cluster ADDRESS`` on a command that runs batch work."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--jobs", type=int_argument(1), default=1, metavar="N",
                       help="run the batch on N local processes (default 1: in this process)")
    group.add_argument("--cluster", default=None, metavar="ADDRESS",
                       help="run the batch on a Dask distributed scheduler (tcp://host:8786); "
                            f"needs the [cluster] extra: {CLUSTER_EXTRA}")


def int_argument(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= minimum, else a one-line usage error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def spec_from_args(args: argparse.Namespace) -> ExecutorSpec:
    return ExecutorSpec(jobs=getattr(args, "jobs", 1), cluster=getattr(args, "cluster", None))


def _pool_context() -> multiprocessing.context.BaseContext:
    # fork reuses this process's imports (workers start in milliseconds); it is only safe while
    # no other thread holds a lock, so a threaded process spawns fresh interpreters instead
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _dask_client(address: str) -> Any:
    try:
        from dask.distributed import Client
    except ImportError:
        raise ExecutorError(f"--cluster needs dask.distributed, which is not installed: "
                            f"{CLUSTER_EXTRA}") from None
    try:
        return Client(address, timeout=10, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as err:
        raise ExecutorError(f"--cluster {address}: cannot connect to the scheduler: {err}") from err


def run_map(fn: Callable[[T], R], tasks: Iterable[T], spec: ExecutorSpec | None = None,
            client: Any = None) -> list[R]:
    """``[fn(t) for t in tasks]`` on the executor of ``spec``; results in task order.
    ``client``: an already connected ``dask.distributed.Client`` (used instead of spec.cluster)."""
    spec = spec or ExecutorSpec()
    items: Sequence[T] = list(tasks)
    if not items:
        return []
    if client is not None or spec.cluster is not None:
        return _dask_map(fn, items, client, spec.cluster)
    workers = min(spec.jobs, len(items))
    if workers == 1:
        return [fn(t) for t in items]
    with ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as pool:
        return list(pool.map(fn, items))


def _dask_map(fn: Callable[[T], R], items: Sequence[T], client: Any, address: str | None) -> list[R]:
    own = client is None
    if own:
        assert address is not None
        client = _dask_client(address)
    try:
        futures = client.map(fn, items, pure=False)  # pure=False: every task runs, none merged
        return list(client.gather(futures))
    finally:
        if own:
            client.close()
