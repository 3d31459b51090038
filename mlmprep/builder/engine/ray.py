"""The Ray engine: a build's tasks on a Ray cluster (joined, or a local instance started on loopback only), each
retried on another worker when its worker dies, their payloads left in the cluster's object store."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from mlmprep.builder.engine.base import Engine, Shipped, TaskFailed, TaskRun, attempt, name, parts
from mlmprep.errors import ConfigError, MlmprepError

RAY_RETRIES = 3  # attempts after the first when a Ray worker dies mid-task
RAY_AHEAD_PER_CPU = 2  # tasks in flight with --workers 0, per CPU of the cluster (looked up again every RAY_RESIZE_S)
RAY_RESIZE_S = 5.0
PLANNED_PARALLELISM = 16  # tasks taken to run at once on a cluster, when sizing the reading tasks
# the build's workers put every return in the object store: Ray returns one of 100 KB or less inline to its owner,
# the driver, which would hold each small payload part (a shard's slice for one partition) in its own memory
WORKER_ENV = {"RAY_max_direct_call_object_size": "0"}


@dataclass(frozen=True)
class RayEngine(Engine):
    """Tasks on the Ray cluster at `ray_address` (None: start or join a local Ray instance), `workers` of them in
    flight at a time (0: two per CPU the cluster has)."""

    ray_address: str | None = None
    shares_disk: ClassVar[bool] = False

    def describe(self) -> str:
        return f"ray ({self.ray_address or 'local instance'})"

    def parallelism(self) -> int:
        return PLANNED_PARALLELISM

    def worker_threads(self, threads: int, tasks: int) -> int:
        """--threads as given (a node's cores are not this machine's); unset, one."""
        return threads or 1

    def prestart(self, input_bytes: int, shard_bytes: int, module: str, tokenizer: str | None = None) -> None:
        """Nothing to start: the cluster's workers are its own."""

    def put(self, value: Any) -> Any:
        """`value` put once in the cluster's object store, which every task reads it from."""
        return import_ray().put(value)

    @contextmanager
    def session(self) -> Iterator[None]:
        """Ray joined once (and a Ray instance started here stopped at the end)."""
        ray = import_ray()
        if ray.is_initialized():
            yield
            return
        if self.ray_address:
            check_reachable(self.ray_address)
        local = not self.ray_address and starts_its_own(ray)
        with loopback_only(ray) if local else nullcontext():
            try:
                ray.init(address=self.ray_address, include_dashboard=False, log_to_driver=False,
                         logging_level="ERROR", runtime_env={"env_vars": WORKER_ENV},
                         **({"_node_ip_address": "127.0.0.1"} if local else {}))
            except (ConnectionError, ray.exceptions.AuthenticationError) as exc:
                raise ConfigError(f"--ray-address {self.ray_address}: cannot join the Ray cluster there "
                                  f"({str(exc).splitlines()[0]}); with token authentication on, set "
                                  "RAY_AUTH_MODE=token and give this machine the cluster's token") from None
            try:
                yield
            finally:
                ray.shutdown()

    def results(self, run: TaskRun, in_driver: Callable[[Any], Any] | None) -> Iterator[tuple[int, Any]]:
        """The run's calls as Ray tasks, each retried on another worker when its worker dies, with those added as
        results come in (the driver runs none: `in_driver` is unused)."""
        return run_ray(run, self)


def attempt_apart(fn: Callable[[Any], Any], task: Any) -> tuple:
    """attempt as a Ray task of 1 + parts(task) returns: for the driver, the result (a Shipped without its payload,
    where it ships one), then each part of the payload (None without one), which stays in the object store until a
    task or the driver fetches it. Returns, not objects the task puts: the driver owns them, and Ray makes one lost
    with its node again by running the task again."""
    result = attempt(fn, task)
    if isinstance(result, Shipped):
        return replace(result, payload=()), *result.payload
    return result, *[None] * parts(task)


# Ray takes a node's address from the machine's interfaces, and its servers (GCS, raylet, object manager,
# workers, runtime-env agent) listen there, unless the node is told it is no cluster: then on 127.0.0.1 only.
NOT_A_CLUSTER = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

def starts_its_own(ray: Any) -> bool:
    """Whether ray.init() without an address starts a Ray instance: none runs on this machine, no RAY_ADDRESS."""
    return ray._private.services.canonicalize_bootstrap_address(None) is None


@contextmanager
def loopback_only(ray: Any) -> Iterator[None]:
    """Within: a Ray instance that ray.init starts here listens on 127.0.0.1 only (Ray's own switch, read from
    the environment when ray is imported, so its constant is set too); after, both as they were."""
    constants = ray._private.ray_constants
    before = os.environ.get(NOT_A_CLUSTER), constants.ENABLE_RAY_CLUSTER
    os.environ[NOT_A_CLUSTER], constants.ENABLE_RAY_CLUSTER = "0", False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = before[1]
        if before[0] is None:
            os.environ.pop(NOT_A_CLUSTER, None)
        else:
            os.environ[NOT_A_CLUSTER] = before[0]


def check_reachable(address: str) -> None:
    """Fail in seconds on a HOST:PORT where nothing listens: ray.init retries one for many minutes."""
    host, _, port = address.rpartition(":")
    if "://" in address or not port.isdigit():
        return  # "auto", ray://...: Ray's own forms
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as exc:
        raise ConfigError(f"--ray-address {address}: nothing answers there ({exc.strerror or exc}); give the "
                          "address `ray start --head` printed on the head node") from None


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError('--engine ray needs Ray: pip install "mlmprep[ray]"') from None
    return ray


def run_ray(run: TaskRun, engine: RayEngine) -> Iterator[tuple[int, Any]]:
    """The run's calls as Ray tasks, each retried on another worker when its worker dies, with those added as
    results come in."""
    ray = import_ray()
    with engine.session():
        remote = ray.remote(max_retries=RAY_RETRIES, retry_exceptions=False)(attempt_apart)
        payloads: dict = {}  # call index -> the references to its payload's parts
        index: dict = {}  # ref -> call index
        waiting: list[int] = list(range(len(run.calls)))  # not submitted yet, in order
        pending: list = []
        limit, sized = engine.workers, -RAY_RESIZE_S
        while waiting or pending:  # on an error the rest are left to Ray: a job's tasks end when its driver leaves
            # --workers N: at most N tasks in flight on the cluster; 0: two per CPU it has (a cluster that grows
            # gets more), so that tasks added go ahead of the rest rather than behind all of them
            if not engine.workers and time.monotonic() - sized >= RAY_RESIZE_S:
                limit = RAY_AHEAD_PER_CPU * max(1, int(ray.cluster_resources().get("CPU", 1)))
                sized = time.monotonic()
            while waiting and len(pending) < limit:
                i = waiting.pop(0)
                fn, task = run.calls[i]
                ref, *payloads[i] = remote.options(name=f"mlmprep {name(task)}",
                                                   num_returns=1 + parts(task)).remote(fn, task)
                index[ref] = i
                pending.append(ref)
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                i = index.pop(ref)  # the result is the caller's alone to keep
                result = ray_result(ray, ref, run.calls[i][1])
                payload = tuple(payloads.pop(i))
                yield i, replace(result, payload=payload) if isinstance(result, Shipped) else result
                waiting[:0] = run.added()  # ahead of the first tasks not submitted


def ray_result(ray: Any, ref: Any, task: Any) -> Any:
    """What a finished Ray task returned for the driver (see attempt_apart); its failure as the task raised it (a
    MlmprepError, TaskFailed) or as one TaskFailed line."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:  # the task raised, or Ray could not run it
        if isinstance(exc.cause, (MlmprepError, TaskFailed)):
            raise exc.cause from None
        raise TaskFailed(f"{name(task)} failed on Ray: {type(exc.cause).__name__}: "
                         f"{str(exc.cause).splitlines()[0]}; nothing was published") from None
    except ray.exceptions.RayError as exc:  # its worker or node died RAY_RETRIES + 1 times
        raise TaskFailed(f"a Ray worker died while running {name(task)} "
                         f"({RAY_RETRIES + 1} attempts; {str(exc).splitlines()[0]}); "
                         "nothing was published") from None
