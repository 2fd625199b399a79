"""Who may reach the Ray cluster a sweep runs on, and the local cluster this program starts itself.

Ray runs arbitrary code for anybody who reaches a cluster's dashboard, Jobs API or client port, and unpickles what
travels (https://docs.ray.io/en/latest/ray-security/index.html); token authentication (``RAY_AUTH_MODE=token``, Ray
>= 2.52) makes every gRPC and HTTP entry point demand one shared bearer token. Hence:

* :func:`check_address` before connecting: a remote address is refused unless this process has token authentication
  configured or the user passed ``--ray-allow-unauthenticated``; that override, and a loopback cluster without a
  token, return a warning naming the risk.
* :func:`check_cluster_auth_mode` after connecting: a cluster whose dashboard answers ``disabled`` is refused the
  same way; an unreachable dashboard gives a warning (mode unknown).
* :class:`LocalCluster` (``--ray local``): ``ray start --head --block`` with a fresh token in a private 0600 file
  (``~/.ray`` untouched), every port on 127.0.0.1. ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` keeps the node
  single-machine: without it Ray on Linux replaces the loopback node address by the machine's own and binds its gRPC
  and (token-less) Prometheus servers to every interface.

Errors: :class:`RaySecurityError` (a connection refused by this policy), :class:`RayClusterError` (the local
cluster did not start).
"""
from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Mapping

from .ray_options import OVERRIDE_FLAG

AUTH_MODE_ENV = "RAY_AUTH_MODE"
TOKEN_ENV = "RAY_AUTH_TOKEN"
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
#: "0": Ray keeps the node on this machine's loopback and lets no other node join (module docstring)
SINGLE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
SECURITY_PAGE = "https://docs.ray.io/en/latest/ray-security/index.html"

#: the risk, in the words of Ray's security page; every refusal and every override warning carries it
RISK = ("anyone who can reach an unauthenticated Ray cluster's ports (dashboard, Jobs API, client) can run "
        f"arbitrary code on it, and through what it sends back, on this machine ({SECURITY_PAGE})")


class RaySecurityError(RuntimeError):
    """A connection this policy refuses (module docstring); the message says why, the risk, and the override."""


class RayClusterError(RuntimeError):
    """The local Ray cluster could not be started or reached; the message says what was seen."""


def split_address(address: str) -> tuple[str, int | None]:
    """(host, port) of a Ray address: ``host:port``, ``ray://host:port``, ``[::1]:port`` or a bare host.

    Raises:
        ValueError: an empty address or a port that is not a number.
    """
    a = (address or "").strip()
    if a.startswith("ray://"):
        a = a[len("ray://"):]
    if not a:
        raise ValueError("the Ray address is empty (expected host:port, ray://host:port or 'local')")
    if a.startswith("["):
        host, _, rest = a[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif a.count(":") == 1:
        host, port = a.split(":")
    else:
        host, port = a, ""
    if port and not port.isdigit():
        raise ValueError(f"the Ray address {address!r} has the port {port!r}, expected a number")
    return host, int(port) if port else None


def check_address_form(address: str) -> tuple[str, int]:
    """(host, port) of a remote Ray address written ``host:port`` or ``ray://host:port`` (port 1-65535).

    Raises:
        ValueError: anything else, one line: ``ADDRESS: not a Ray address (host:port, ray://host:port or local)``
            and, for a bad port, why.
    """
    what = f"{address}: not a Ray address (host:port, ray://host:port or local)"
    try:
        host, port = split_address(address)
    except ValueError as exc:  # a port that is not a number, or nothing at all
        raise ValueError(what + (": the port is not a number" if (address or "").strip() else "")) from exc
    if not host or port is None:
        raise ValueError(what)
    if not 1 <= port <= 65535:
        raise ValueError(f"{what}: the port {port} is not from 1 to 65535")
    return host, port


def is_loopback(address: str) -> bool:
    """Whether ``address`` names this machine's loopback (``localhost``, 127.0.0.0/8, ``::1``)."""
    host, _ = split_address(address)
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_source(env: Mapping[str, str] | None = None) -> str | None:
    """Where this process's Ray token comes from (the order Ray reads them in), or None without one."""
    env = os.environ if env is None else env
    if env.get(TOKEN_ENV, "").strip():
        return TOKEN_ENV
    path = env.get(TOKEN_PATH_ENV, "").strip()
    if path:
        return f"{TOKEN_PATH_ENV} ({path})" if _readable_token(Path(path)) else None
    default = Path.home() / ".ray" / "auth_token"
    return str(default) if _readable_token(default) else None


def _readable_token(path: Path) -> bool:
    try:
        return bool(path.read_text(encoding="utf-8").strip())
    except (OSError, UnicodeDecodeError):
        return False


def token_auth_configured(env: Mapping[str, str] | None = None) -> bool:
    """``RAY_AUTH_MODE=token`` and a token (:func:`token_source`) in ``env`` (default: this process's)."""
    env = os.environ if env is None else env
    return env.get(AUTH_MODE_ENV, "").strip().lower() == "token" and token_source(env) is not None


def check_address(address: str, allow_unauthenticated: bool = False,
                  env: Mapping[str, str] | None = None) -> list[str]:
    """The policy before connecting to ``address`` (module docstring); returns the warnings to show.

    Raises:
        RaySecurityError: ``address`` is remote, token authentication is not configured here and
            ``allow_unauthenticated`` is False.
        ValueError: an address that cannot be read (:func:`split_address`).
    """
    if token_auth_configured(env):
        return []
    if is_loopback(address):
        return [f"the Ray cluster at {address} is used without token authentication: other users of this machine "
                f"can reach it; {RISK}"]
    if not allow_unauthenticated:
        raise RaySecurityError(
            f"refusing to connect to the Ray cluster at {address} without token authentication: {RISK}. Start the "
            f"cluster with {AUTH_MODE_ENV}=token and give this program its token ({AUTH_MODE_ENV}=token and "
            f"{TOKEN_ENV} or {TOKEN_PATH_ENV}), or pass {OVERRIDE_FLAG} if you accept the risk")
    return [f"WARNING: connecting to the Ray cluster at {address} WITHOUT token authentication "
            f"({OVERRIDE_FLAG}): {RISK}"]


def fetch_auth_mode(dashboard_url: str, timeout_s: float = 5.0) -> str | None:
    """The cluster's answer to ``GET <dashboard>/api/authentication_mode`` ("token", "disabled"), or None when the
    dashboard cannot be reached or answers something else."""
    url = dashboard_url if "://" in dashboard_url else f"http://{dashboard_url}"
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/api/authentication_mode", timeout=timeout_s) as resp:
            doc = json.loads(resp.read(4096).decode("utf-8", "replace"))
    except (OSError, ValueError, urllib.error.URLError):
        return None
    mode = doc.get("authentication_mode") if isinstance(doc, dict) else None
    return mode if isinstance(mode, str) else None


def check_cluster_auth_mode(address: str, dashboard_url: str | None, allow_unauthenticated: bool = False,
                            timeout_s: float = 5.0) -> list[str]:
    """The policy after connecting: the cluster's own authentication mode (module docstring); returns warnings.

    Raises:
        RaySecurityError: the cluster says its authentication is disabled, ``address`` is remote and
            ``allow_unauthenticated`` is False.
    """
    mode = fetch_auth_mode(dashboard_url, timeout_s) if dashboard_url else None
    if mode == "token":
        return []
    if mode is None:
        return [f"the Ray cluster at {address} did not say whether it uses token authentication (its dashboard "
                f"{dashboard_url or '(none)'} cannot be reached from here)"]
    if is_loopback(address):
        return [f"the Ray cluster at {address} has authentication '{mode}': other users of this machine can reach "
                f"it; {RISK}"]
    if not allow_unauthenticated:
        raise RaySecurityError(f"the Ray cluster at {address} has authentication '{mode}' (its dashboard says so): "
                               f"{RISK}. Restart it with {AUTH_MODE_ENV}=token, or pass {OVERRIDE_FLAG} if you "
                               "accept the risk")
    return [f"WARNING: the Ray cluster at {address} has authentication '{mode}' ({OVERRIDE_FLAG}): {RISK}"]


def _child_setup() -> None:
    """In the ``ray start`` child: SIGINT (how the node is stopped) back to its default, and on Linux sent when the
    starting thread ends, so that a killed driver leaves no cluster behind (prctl PR_SET_PDEATHSIG)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # here: only this child needs it

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGINT))  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    """A Ray head node on this machine (module docstring), stopped by :meth:`stop`; on Linux also when the thread
    that started it ends.

    ``num_cpus`` / ``num_gpus``: its resources (None: Ray counts them). After :meth:`start`: ``address`` (the GCS,
    ``127.0.0.1:port``), ``dashboard_url`` and ``env``, which a driver must set before importing ``ray`` (token mode,
    token path and the single-machine switch, without which it looks for the node at the machine's address).
    """

    def __init__(self, num_cpus: int | None = None, num_gpus: int | None = None):
        self.num_cpus, self.num_gpus = num_cpus, num_gpus
        self.address: str | None = None
        self.dashboard_url: str | None = None
        self.env: dict[str, str] = {}
        self._dir: Path | None = None
        self._proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 90.0) -> "LocalCluster":
        """Start the head node and wait until it has written its address.

        Raises:
            RayClusterError: ``ray`` not found, the process ended, or no address within ``timeout_s``; the message
                holds the end of its output.
        """
        ray_cmd = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
        if ray_cmd is None:
            raise RayClusterError("the `ray` command was not found: install the cluster extra "
                                  "(pip install 'dpd-desktop[cluster]')")
        # short and private: Ray's socket paths under it must stay below the 107-character limit of AF_UNIX
        self._dir = Path(tempfile.mkdtemp(prefix="dpdray-"))
        token_file = self._dir / "auth_token"
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32))
        self.env = {AUTH_MODE_ENV: "token", TOKEN_PATH_ENV: str(token_file), SINGLE_MACHINE_ENV: "0"}
        dash_port = _free_loopback_port()
        cmd = [ray_cmd, "start", "--head", "--block", "--port=0", "--node-ip-address=127.0.0.1",
               "--dashboard-host=127.0.0.1", f"--dashboard-port={dash_port}",
               f"--ray-client-server-port={_free_loopback_port()}",
               f"--dashboard-agent-listen-port={_free_loopback_port()}",
               f"--temp-dir={self._dir / 't'}", "--disable-usage-stats"]
        if self.num_cpus is not None:
            cmd.append(f"--num-cpus={int(self.num_cpus)}")
        if self.num_gpus is not None:
            cmd.append(f"--num-gpus={int(self.num_gpus)}")
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        env.update(self.env)
        log = open(self._dir / "ray-start.log", "wb")  # noqa: SIM115 - the process writes it until stop()
        try:
            # its own session: a terminal's Ctrl+C is the driver's to handle (the sweep's stop), not the cluster's
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          env=env, start_new_session=True,
                                          preexec_fn=_child_setup if os.name == "posix" else None)
        finally:
            log.close()
        address_file = self._dir / "t" / "ray_current_cluster"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            text = self._log_text()
            if address_file.is_file() and "Ray runtime started" in text:
                self.address = address_file.read_text(encoding="utf-8").strip()
                self.dashboard_url = f"127.0.0.1:{dash_port}"
                return self
            time.sleep(0.2)
        tail = self._log_text()[-2000:]
        self.stop()
        raise RayClusterError(f"the local Ray cluster did not start within {timeout_s:.0f} s: {tail}")

    @property
    def folder(self) -> Path | None:
        """The node's private temporary folder (its token file, Ray's session and logs); removed by :meth:`stop`."""
        return self._dir

    def _log_text(self) -> str:
        try:
            return (self._dir / "ray-start.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the head node (SIGINT to the ``ray start`` process this object started: it stops every process of
        its node; SIGKILL to it after ``timeout_s``) and remove its temporary folder. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> "LocalCluster":
        return self.start() if self._proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()
