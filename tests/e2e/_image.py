"""The overlay-guard OCI image (hack/image.sh) run as the webhook with podman.

Podman from Debian runs it rootful with `--network host`, as the image's own user, entrypoint and
environment, on a read-only root filesystem with no capabilities. On this machine kind crun refuses
the hybrid cgroup layout, so the runtime is runc; the container's rlimits are set explicitly because
the sandbox denies raising them to podman's defaults (no CAP_SYS_RESOURCE).
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from . import _cluster
from ._cluster import REPO_ROOT, ControlPlane, ControlPlaneError
from ._guard import Certs, Webhook

IMAGE_SCRIPT = REPO_ROOT / "hack" / "image.sh"
# A cold build (Debian rootfs, wheels) takes a few minutes on two shared cores; a cached one seconds.
BUILD_TIMEOUT = 20 * 60.0
MOUNT = "/etc/overlay-guard"
PODMAN = ("podman", "--runtime", "runc")


def _script(command: str) -> str:
    """The last stdout line of `hack/image.sh command`; its progress goes to the test's stderr."""
    try:
        done = subprocess.run(["bash", str(IMAGE_SCRIPT), command], stdout=subprocess.PIPE, text=True,
                              check=True, timeout=BUILD_TIMEOUT)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise ControlPlaneError(f"{IMAGE_SCRIPT} {command} failed: {exc}") from exc
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise ControlPlaneError(f"{IMAGE_SCRIPT} {command} printed nothing")
    return lines[-1]


@dataclass(frozen=True)
class Image:
    archive: Path
    manifest: dict[str, Any]
    config: dict[str, Any]
    layers: tuple[frozenset[str], ...]

    @property
    def image_id(self) -> str:
        return str(self.manifest["config"]["digest"]).removeprefix("sha256:")


def read_archive(archive: Path) -> Image:
    """The manifest, config and each layer's paths of the OCI archive, read as any registry would."""
    with tarfile.open(archive) as outer:
        def member(name: str) -> IO[bytes]:
            found = outer.extractfile(name)
            if found is None:
                raise ControlPlaneError(f"{name} missing from {archive}")
            return found

        def blob(digest: str) -> IO[bytes]:
            return member("./blobs/sha256/" + digest.removeprefix("sha256:"))

        index = json.loads(member("./index.json").read())
        manifest = json.loads(blob(index["manifests"][0]["digest"]).read())
        config = json.loads(blob(manifest["config"]["digest"]).read())
        layers = []
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r:gz") as inner:
                layers.append(frozenset(n.removeprefix("./").rstrip("/") for n in inner.getnames()))
    return Image(archive, manifest, config, tuple(layers))


def build() -> Image:
    """The image of the current sources (hack/image.sh reuses its cache when nothing changed),
    loaded into podman's storage."""
    image = read_archive(Path(_script("build")))
    _script("runtime")
    done = subprocess.run(["podman", "load", "-q", "-i", str(image.archive)], capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        raise ControlPlaneError(f"podman load failed:\n{done.stderr}")
    _remove_older_images(image)
    return image


def _remove_older_images(current: Image) -> None:
    # Every source change loads a new 250 MB image; earlier builds of this one are never run again.
    listed = subprocess.run(["podman", "images", "--no-trunc", "--format", "{{.ID}}", "--filter",
                             "label=org.opencontainers.image.title=overlay-guard"],
                            capture_output=True, text=True, timeout=60)
    stale = [i.removeprefix("sha256:") for i in listed.stdout.split()
             if i.removeprefix("sha256:") != current.image_id]
    if stale:
        # An image still used by a container is kept (podman refuses), which is what is wanted.
        subprocess.run(["podman", "rmi", *stale], capture_output=True, timeout=120)


class ImageWebhook(Webhook):
    """The webhook as a podman container of the image; same ports, probes and metrics as a process."""

    def __init__(self, plane: ControlPlane, certs: Certs, name: str, image: Image, **kwargs: Any) -> None:
        super().__init__(plane, certs, name, **kwargs)
        self.image = image
        self.container = f"overlay-guard-e2e-{name}-{uuid.uuid4().hex[:6]}"
        self.mount_dir = plane.workdir / f"image-{name}"

    def _prepare_mount(self) -> None:
        """Certificates and a kubeconfig readable by the image's user only, at paths inside the container."""
        uid, gid = (int(part) for part in str(self.image.config["config"]["User"]).split(":"))
        shutil.rmtree(self.mount_dir, ignore_errors=True)
        self.mount_dir.mkdir(parents=True)
        kubeconfig = json.loads(self.plane.kubeconfig.read_text())
        files = {"tls.crt": self.certs.cert, "tls.key": self.certs.key}
        for cluster in kubeconfig["clusters"]:
            files["ca.crt"] = Path(cluster["cluster"]["certificate-authority"])
            cluster["cluster"]["certificate-authority"] = f"{MOUNT}/ca.crt"
        for user in kubeconfig["users"]:
            files["client.crt"] = Path(user["user"]["client-certificate"])
            files["client.key"] = Path(user["user"]["client-key"])
            user["user"].update({"client-certificate": f"{MOUNT}/client.crt", "client-key": f"{MOUNT}/client.key"})
        (self.mount_dir / "kubeconfig").write_text(json.dumps(kubeconfig))
        for name, source in files.items():
            shutil.copyfile(source, self.mount_dir / name)
        for path in (self.mount_dir, *self.mount_dir.iterdir()):
            path.chmod(0o500 if path.is_dir() else 0o400)
            shutil.chown(path, uid, gid)

    def argv(self) -> list[str]:
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        return [*PODMAN, "run", "--rm", "--name", self.container, "--network", "host",
                "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                "--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", "nproc=4096:4096",
                "--volume", f"{self.mount_dir}:{MOUNT}:ro",
                self.image.image_id,
                "--kubeconfig", f"{MOUNT}/kubeconfig",
                "--host", _cluster.LOOPBACK, "--port", str(self.port), "--metrics-port", str(self.metrics_port),
                "--tls-cert-file", f"{MOUNT}/tls.crt", "--tls-private-key-file", f"{MOUNT}/tls.key",
                "--mode", self.mode, *self.extra_args]

    def start(self) -> None:
        self._prepare_mount()
        super().start()

    def stop(self) -> None:
        super().stop()
        # podman run forwards SIGTERM to the container; a killed client must not leave it running.
        subprocess.run([*PODMAN, "rm", "--force", "--time", "0", "--ignore", self.container],
                       capture_output=True, timeout=60)

    def process_ids(self) -> tuple[int, int]:
        """The (uid, gid) the entrypoint process runs as, read from the host's /proc."""
        done = subprocess.run([*PODMAN, "inspect", "--format", "{{.State.Pid}}", self.container],
                              capture_output=True, text=True, check=True, timeout=60)
        status = Path(f"/proc/{done.stdout.strip()}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return int(fields["Uid"].split()[0]), int(fields["Gid"].split()[0])


def layer_paths(image: Image) -> Iterator[str]:
    for layer in image.layers:
        yield from layer
