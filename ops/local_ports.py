"""The ports `make run` listens on (ops/management/commands/run_local.py): checked free before
anything starts, so a taken one is said in one line that names the setting that moves it, and
watched until each server listens, so "Vouch is running" is never printed for a server that
could not start."""

import contextlib
import errno
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass

# What a person types to move each server (the Makefile's variables, run_local's options).
MAKE_SETTING = {"web": "PORT", "sandbox": "SANDBOX_PORT"}
WHAT = {"web": "the web server", "sandbox": "the Stripe sandbox"}
# How far past a taken port to look for a free one to suggest.
_SUGGEST_WITHIN = 50


@dataclass(frozen=True)
class Listener:
    """A server `make run` starts: its name (a key of MAKE_SETTING) and where it listens."""

    name: str
    host: str
    port: int


def port_free(host: str, port: int) -> bool:
    """Whether a server could listen on `host`:`port` now. Binds as uvicorn and the sandbox do
    (SO_REUSEADDR), so a port held only by closed connections (TIME_WAIT, after a restart) is
    free and one a program listens on is not."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host.strip("[]"), port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def _free_port_after(host: str, port: int, avoid: set[int]) -> int | None:
    for candidate in range(port + 1, min(port + 1 + _SUGGEST_WITHIN, 65536)):
        if candidate not in avoid and port_free(host, candidate):
            return candidate
    return None


def ports_problems(listeners: list[Listener]) -> list[str]:
    """One line for each listener whose port is taken (by another program, or by another of
    `listeners`), naming the port, the server and the setting that moves it, with a free port to
    try. Empty when every port is free."""
    problems = []
    ports = {listener.port for listener in listeners}
    for i, listener in enumerate(listeners):
        setting = MAKE_SETTING[listener.name]
        earlier = [other for other in listeners[:i] if other.port == listener.port]
        try:
            free_now = port_free(listener.host, listener.port)
        except OSError as exc:  # not an address of this machine, say
            problems.append(
                f"Vouch cannot start: {WHAT[listener.name]} cannot listen on "
                f"{listener.host}:{listener.port} ({exc.strerror or exc})."
            )
            continue
        if earlier:
            why = f"is also the port of {WHAT[earlier[0].name]}"
        elif not free_now:
            why = "is already in use (another `make run`, or another program)"
        else:
            continue
        free = _free_port_after(listener.host, listener.port, ports)
        move = f"make run {setting}={free}" if free else f"make run {setting}=<a free port>"
        problems.append(
            f"Vouch cannot start: port {listener.port} on {listener.host}, for "
            f"{WHAT[listener.name]}, {why}. Choose another port: `{move}`."
        )
    return problems


def _listening(host: str, port: int) -> bool:
    # A server bound to every address answers on the loopback one.
    everywhere = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104 - not a bind
    target = everywhere.get(host.strip("[]"), host)
    with contextlib.suppress(OSError), socket.create_connection((target.strip("[]"), port), 0.5):
        return True
    return False


def wait_listening(
    listeners: list[Listener],
    children: Mapping[str, "subprocess.Popen[bytes]"],
    *,
    timeout: float,
) -> str | None:
    """Wait until each listener accepts connections. Answers the name of the first child that
    exited meanwhile (None when all listen, or when `timeout` seconds pass first: a slow machine
    is not a failure)."""
    waiting = list(listeners)
    deadline = time.monotonic() + timeout
    while True:
        for name, child in children.items():
            if child.poll() is not None:
                return name
        waiting = [item for item in waiting if not _listening(item.host, item.port)]
        if not waiting or time.monotonic() > deadline:
            return None
        time.sleep(0.2)
