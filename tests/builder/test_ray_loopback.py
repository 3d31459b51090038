"""The local Ray instance that `--engine ray` starts (no --ray-address) listens on 127.0.0.1 only and has no
dashboard. Run in the machine's own network, not a namespace: it means something only where the machine has
an interface besides loopback for Ray to pick."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import time

import pytest

from tests.cli.test_build import build_args, cli_command, cli_env

pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")


def outside_addresses() -> list[str]:
    """The machine's IPv4 and IPv6 addresses other than loopback."""
    return [a.address.split("%")[0] for addrs in psutil.net_if_addrs().values() for a in addrs
            if a.family.name in ("AF_INET", "AF_INET6") and not ipaddress.ip_address(a.address.split("%")[0])
            .is_loopback]


def listening(root: psutil.Process) -> dict[tuple[str, int], str]:
    """(address, port) -> process name, of every TCP socket that `root` and its descendants listen on."""
    found = {}
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return found
    for p in processes:
        try:
            for c in p.net_connections(kind="tcp"):
                if c.status == psutil.CONN_LISTEN:
                    found[(c.laddr.ip, c.laddr.port)] = p.name()
        except psutil.Error:
            continue
    return found


def loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_loopback or (ip.version == 6 and ip.ipv4_mapped is not None and ip.ipv4_mapped.is_loopback)


def test_a_ray_build_listens_on_loopback_only(tmp_path, tiny_corpus, tok):
    if not outside_addresses():
        pytest.skip("no interface besides loopback: nothing for Ray to listen on wrongly")
    command = cli_command(*build_args(tiny_corpus, tmp_path / "data", tok, "--engine", "ray", "--workers", "1"))
    build = subprocess.Popen(command, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    root, seen, names = psutil.Process(build.pid), {}, set()
    deadline = time.monotonic() + 300
    while build.poll() is None and time.monotonic() < deadline:
        seen.update(listening(root))
        try:
            names.update(p.name() for p in root.children(recursive=True))
        except psutil.Error:
            pass
        time.sleep(0.1)
    assert build.wait(timeout=60) == 0, build.stderr.read()
    assert {"gcs_server", "raylet"} <= set(seen.values()), seen  # the cluster was seen listening
    wide = {addr: name for addr, name in seen.items() if not loopback(addr[0])}
    assert wide == {}, f"listening beyond 127.0.0.1: {wide}"
    assert not any("dashboard" in n for n in names) and not any(port == 8265 for _, port in seen)


def test_joining_a_cluster_after_a_local_instance_is_not_held_to_loopback(monkeypatch):
    """The switch is Ray's process-wide setting: it holds while the local instance runs and is undone after, so a
    later --ray-address join advertises the machine's real address."""
    import ray

    from mlmprep.builder.engine.ray import NOT_A_CLUSTER, loopback_only

    constants = ray._private.ray_constants
    monkeypatch.setattr(constants, "ENABLE_RAY_CLUSTER", True)
    monkeypatch.delenv(NOT_A_CLUSTER, raising=False)
    with loopback_only(ray):
        assert constants.ENABLE_RAY_CLUSTER is False and ray._private.services.get_node_ip_address() == "127.0.0.1"
    assert constants.ENABLE_RAY_CLUSTER is True and NOT_A_CLUSTER not in os.environ
