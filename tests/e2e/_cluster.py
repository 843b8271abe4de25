"""A real etcd + kube-apiserver pair on loopback, driven from pytest."""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from . import _pki

REPO_ROOT = Path(__file__).resolve().parents[2]
ASSETS_SCRIPT = REPO_ROOT / "hack" / "e2e-assets.sh"
LOOPBACK = "127.0.0.1"

ETCD_READY_TIMEOUT = 30.0
APISERVER_READY_TIMEOUT = 60.0
STOP_GRACE = 10.0
# A cold build is slow on two cores; anything beyond this is a hung build.
ASSETS_BUILD_TIMEOUT = 45 * 60.0
_PORT_ATTEMPTS = 3
# Proxy settings from the caller's shell must not divert traffic meant for the
# loopback control plane (or for a webhook the apiserver calls).
_SCRUBBED_ENV = (
    "KUBECONFIG",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
)


class ControlPlaneError(RuntimeError):
    """The control plane could not be provisioned, started or reached."""


class KubectlError(subprocess.CalledProcessError):
    """A failed kubectl call whose message carries kubectl's own output."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


def locate_assets() -> Path:
    """Directory holding kube-apiserver and etcd (and usually kubectl)."""
    env_dir = os.environ.get("KUBEBUILDER_ASSETS")
    if env_dir and all(os.access(Path(env_dir, b), os.X_OK) for b in ("kube-apiserver", "etcd")):
        return Path(env_dir)
    # stderr is inherited so build progress stays visible with `pytest -s`.
    try:
        done = subprocess.run(
            ["bash", str(ASSETS_SCRIPT)],
            stdout=subprocess.PIPE,
            text=True,
            check=True,
            timeout=ASSETS_BUILD_TIMEOUT,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise ControlPlaneError(f"{ASSETS_SCRIPT} failed: {exc}") from exc
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise ControlPlaneError(f"{ASSETS_SCRIPT} printed no directory")
    return Path(lines[-1])


def free_port() -> int:
    # The port is released before the binary binds it; a lost race shows up
    # as "address already in use" and is retried by the caller.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


_START_MARKER = "\n==== "


def log_tail(path: Path, lines: int = 40) -> str:
    """The last lines written by the most recent process logging to ``path``."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    # Restarts append to the same file; an earlier process's shutdown noise
    # would otherwise bury a short fatal error such as a rejected flag.
    text = text[text.rfind(_START_MARKER) + 1 :]
    return "\n".join(text.splitlines()[-lines:])


def _die_with_parent() -> None:
    # If pytest is killed outright, teardown never runs; PR_SET_PDEATHSIG makes
    # the kernel stop the children instead of leaving them bound to ports.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def _child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}


def _spawn(argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`argv` logging to `log_path`, with the scrubbed environment plus `env`."""
    with log_path.open("ab") as log:
        log.write(f"{_START_MARKER}{time.strftime('%H:%M:%S')} {' '.join(argv)}\n".encode())
        log.flush()
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**_child_env(), **(env or {})},
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(STOP_GRACE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(STOP_GRACE)


def _wait_until(
    probe: Callable[[], bool], proc: subprocess.Popen[bytes], what: str, log_path: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ControlPlaneError(
                f"{what} exited with code {proc.returncode} before becoming ready; "
                f"log {log_path}:\n{log_tail(log_path)}"
            )
        if probe():
            return
        time.sleep(0.25)
    raise ControlPlaneError(f"{what} not ready after {timeout:.0f}s; log {log_path}:\n{log_tail(log_path)}")


def _port_clash(log_path: Path) -> bool:
    return "address already in use" in log_tail(log_path, 60)


class ControlPlane:
    """etcd and kube-apiserver on 127.0.0.1 with an admin kubeconfig.

    Construct with :meth:`start`; always pair with :meth:`stop`.
    """

    def __init__(self, assets_dir: Path, workdir: Path) -> None:
        self.assets_dir = assets_dir
        self.workdir = workdir
        self.log_dir = workdir / "logs"
        self.kubeconfig = workdir / "kubeconfig"
        self.pki = _pki.generate(workdir / "pki")
        self.kubectl_path = self._find_kubectl()
        self.etcd_url = ""
        self.apiserver_port = 0
        self.server = ""
        self.apiserver_args: list[str] = []
        self._etcd_dir = workdir / "etcd-data"
        self._etcd: subprocess.Popen[bytes] | None = None
        self._apiserver: subprocess.Popen[bytes] | None = None
        self._kubectl_cache = workdir / "kubectl-cache"
        self._tls = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        self._tls.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))

    @classmethod
    def start(cls, assets_dir: Path, workdir: Path) -> ControlPlane:
        workdir.mkdir(parents=True, exist_ok=True)
        plane = cls(assets_dir, workdir)
        plane.log_dir.mkdir(exist_ok=True)
        try:
            plane._start_etcd()
            plane._start_apiserver()
            plane._write_kubeconfig()
        except BaseException:
            plane.stop()
            raise
        return plane

    @property
    def apiserver_log(self) -> Path:
        return self.log_dir / "kube-apiserver.log"

    @property
    def etcd_log(self) -> Path:
        return self.log_dir / "etcd.log"

    def _find_kubectl(self) -> str:
        bundled = self.assets_dir / "kubectl"
        if os.access(bundled, os.X_OK):
            return str(bundled)
        system = shutil.which("kubectl")
        if system is None:
            raise ControlPlaneError(f"no kubectl in {self.assets_dir} or on PATH")
        return system

    def _start_etcd(self) -> None:
        for _ in range(_PORT_ATTEMPTS):
            client, peer = free_port(), free_port()
            self.etcd_url = f"http://{LOOPBACK}:{client}"
            peer_url = f"http://{LOOPBACK}:{peer}"
            shutil.rmtree(self._etcd_dir, ignore_errors=True)
            argv = [
                str(self.assets_dir / "etcd"),
                "--name=e2e",
                f"--data-dir={self._etcd_dir}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=e2e={peer_url}",
                "--initial-cluster-state=new",
                # Durability is worthless for a store discarded after the
                # session, and fsync dominates latency on shared disks.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ]
            self._etcd = _spawn(argv, self.etcd_log)
            try:
                _wait_until(self._etcd_healthy, self._etcd, "etcd", self.etcd_log, ETCD_READY_TIMEOUT)
                return
            except ControlPlaneError:
                _stop(self._etcd)
                if not _port_clash(self.etcd_log):
                    raise
        raise ControlPlaneError(f"etcd found no free port in {_PORT_ATTEMPTS} attempts")

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as resp:
                return bool(json.load(resp).get("health") == "true")
        except (OSError, ValueError, http.client.HTTPException):
            return False

    def _apiserver_argv(self, port: int, extra_args: Sequence[str]) -> list[str]:
        pki = self.pki
        return [
            str(self.assets_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            f"--secure-port={port}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            # The reconciler would try to publish 127.0.0.1 as the endpoint of
            # the kubernetes Service, which validation rejects on every loop.
            "--endpoint-reconciler-type=none",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.0.0.0/24",
            # No controller-manager mints tokens here, so pods would be
            # rejected for lacking a service-account token volume.
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true",
            *extra_args,
        ]

    def _start_apiserver(self) -> None:
        for _ in range(_PORT_ATTEMPTS):
            port = free_port()
            self._launch_apiserver(port, self._apiserver_argv(port, ()))
            try:
                self._wait_apiserver()
                return
            except ControlPlaneError:
                _stop(self._apiserver)
                if not _port_clash(self.apiserver_log):
                    raise
        raise ControlPlaneError(f"kube-apiserver found no free port in {_PORT_ATTEMPTS} attempts")

    def _launch_apiserver(self, port: int, argv: list[str]) -> None:
        self.apiserver_port = port
        self.server = f"https://{LOOPBACK}:{port}"
        self.apiserver_args = argv[1:]
        self._apiserver = _spawn(argv, self.apiserver_log)

    def _wait_apiserver(self) -> None:
        assert self._apiserver is not None
        _wait_until(
            self._apiserver_ready,
            self._apiserver,
            "kube-apiserver",
            self.apiserver_log,
            APISERVER_READY_TIMEOUT,
        )

    def _apiserver_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.server}/readyz", timeout=2, context=self._tls) as resp:
                return bool(resp.status == 200)
        # HTTPError (a 500 while post-start hooks run) is an OSError too.
        except (OSError, http.client.HTTPException):
            return False

    def restart_apiserver(self, extra_args: Sequence[str] = ()) -> None:
        """Stop kube-apiserver and start it again on the same port and etcd.

        ``extra_args`` are appended to the standard flags for the new process
        only; a later restart without them returns to the standard flags.
        """
        _stop(self._apiserver)
        self._launch_apiserver(self.apiserver_port, self._apiserver_argv(self.apiserver_port, extra_args))
        self._wait_apiserver()

    def _write_kubeconfig(self) -> None:
        # JSON is valid YAML, so no YAML library is needed to write this.
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {"server": self.server, "certificate-authority": str(self.pki.ca_cert)},
                }
            ],
            "users": [
                {
                    "name": "e2e-admin",
                    "user": {
                        "client-certificate": str(self.pki.admin_cert),
                        "client-key": str(self.pki.admin_key),
                    },
                }
            ],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e-admin"}}],
            "current-context": "e2e",
        }
        self.kubeconfig.write_text(json.dumps(config, indent=2) + "\n")

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this control plane; raises KubectlError when check fails."""
        argv = [
            self.kubectl_path,
            f"--kubeconfig={self.kubeconfig}",
            # A private discovery cache keeps $HOME clean and avoids stale
            # results from an earlier session on a different port.
            f"--cache-dir={self._kubectl_cache}",
            *args,
        ]
        done = subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=timeout, env=_child_env()
        )
        if check and done.returncode != 0:
            raise KubectlError(done.returncode, argv, done.stdout, done.stderr)
        return done

    def stop(self) -> None:
        """Stop both processes (apiserver first, so it never sees etcd vanish) and drop etcd's data."""
        _stop(self._apiserver)
        _stop(self._etcd)
        # etcd preallocates its WAL; the logs, certs and kubeconfig are kept.
        shutil.rmtree(self._etcd_dir, ignore_errors=True)
