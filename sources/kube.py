"""The one boundary to the Kubernetes API for reading NodeOverlays, NodePools and the CRD: connecting,
paged lists (`limit`/`continue`), watches and single reads, with the client's many exception types
turned into a few typed errors.

`lint --cluster` and the webhook's informers (which feed its admission and audit) both read through
here. `kubernetes` is imported only when a client is made: importing it costs about 0.3 s, which
every offline run would otherwise pay.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Generator, Iterator, Mapping, Sequence
from typing import Any

from simulation.semantics import model, region
from simulation.validation import crds
from sources import files

GROUP = crds.GROUP
PAGE = 500
TIMEOUT_SECONDS = 30


@dataclasses.dataclass(frozen=True)
class Resource:
    kind: str
    version: str
    plural: str
    group: str = GROUP

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


# The kinds read from a cluster, in the order they are read.
RESOURCES: Mapping[str, Resource] = {
    model.NODEOVERLAY: Resource(model.NODEOVERLAY, "v1alpha1", "nodeoverlays"),
    model.NODEPOOL: Resource(model.NODEPOOL, "v1", "nodepools"),
}
# The NodeOverlay CRD, which the webhook follows by name (`list_named`, `watch_named`).
CRDS = Resource("CustomResourceDefinition", "v1", "customresourcedefinitions", "apiextensions.k8s.io")


class KubeError(files.InputError):
    """The cluster could not be read; `status` is the HTTP status when the API server answered."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ConfigError(KubeError):
    """No usable kubeconfig or in-cluster service account."""


class NotFound(KubeError):
    """404: the object, or the resource itself (a CRD that is not installed)."""


class Gone(KubeError):
    """410: a resource version or continue token the API server no longer has; list again."""


class Unreachable(KubeError):
    """No answer: connection refused, TLS, timeouts (urllib3 raises its own types)."""


def error(exc: BaseException, doing: str) -> KubeError:
    """`exc`, raised by the client while `doing` something, as a typed error."""
    if isinstance(exc, KubeError):
        return exc
    status = getattr(exc, "status", None)
    if not isinstance(status, int):
        return Unreachable(f"cannot reach the cluster: {one_line(exc)}")
    reason = getattr(exc, "reason", None) or ""
    message = f"cannot {doing}: {status} {reason}".rstrip()
    kind = {404: NotFound, 410: Gone}.get(status, KubeError)
    return kind(message, status)


def one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."


@dataclasses.dataclass(frozen=True)
class Listing:
    items: list[dict[str, Any]]
    # The list's resource version: where a watch starts so that it misses nothing.
    resource_version: str | None


class Client:
    """Blocking calls to one API server; safe to share between threads (urllib3 pools connections)."""

    def __init__(self, api_client: Any) -> None:
        client = _kubernetes().client
        self._api_client = api_client
        self._custom: Any = client.CustomObjectsApi(api_client)
        self._extensions: Any = client.ApiextensionsV1Api(api_client)

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> Client:
        """The kubeconfig (given, $KUBECONFIG or ~/.kube/config), else the pod's service account."""
        k8s = _kubernetes()
        client, config = k8s.client, k8s.config
        configuration = client.Configuration()
        try:
            try:
                config.load_kube_config(config_file=kubeconfig, context=context,
                                        client_configuration=configuration)
            except Exception:
                # Inside a pod (the webhook, a CI job in the cluster) there is no kubeconfig to find.
                if kubeconfig is not None or context is not None or "KUBERNETES_SERVICE_HOST" not in os.environ:
                    raise
                config.load_incluster_config(client_configuration=configuration)
        except Exception as err:  # the config loaders raise many unrelated types
            raise ConfigError(f"cannot load the Kubernetes configuration: {one_line(err)}") from None
        return cls(client.ApiClient(configuration))

    @property
    def api_client(self) -> Any:
        """The configured `kubernetes` ApiClient, for APIs this boundary does not wrap (Leases, Events)."""
        return self._api_client

    def close(self) -> None:
        self._api_client.close()

    def list(self, kind: str, page: int = PAGE) -> Listing:
        """Every object of `kind`, fetched `page` at a time. Items get their apiVersion and kind (list
        items normally carry them, but nothing guarantees it)."""
        resource = RESOURCES[kind]
        items: list[dict[str, Any]] = []
        token: str | None = None
        version: str | None = None
        while True:
            body = self._call(f"list {resource.plural}.{resource.group}", self._custom.list_cluster_custom_object,
                              resource.group, resource.version, resource.plural, limit=page,
                              _request_timeout=TIMEOUT_SECONDS, **({"_continue": token} if token else {}))
            items += [with_kind(item, resource) for item in body.get("items") or [] if isinstance(item, dict)]
            meta = body.get("metadata") or {}
            # Every page of one list is one snapshot; the first page's version is the list's.
            version = version or meta.get("resourceVersion")
            token = meta.get("continue")
            if not token:
                return Listing(items, version)

    def watch(self, kind: str, resource_version: str | None, seconds: int) -> Iterator[Mapping[str, Any]]:
        """Watch events (`type`, `object`) from `resource_version` until the server ends the watch."""
        return self._watch(RESOURCES[kind], resource_version, seconds)

    def list_named(self, resource: Resource, name: str) -> Listing:
        """The object `name` (none or one) as a list, which a watch can resume from. Lists and watches by
        name need a field selector: RBAC's `resourceNames` allows nothing else."""
        body = self._call(f"list {resource.plural}.{resource.group} {name}", self._custom.list_cluster_custom_object,
                          resource.group, resource.version, resource.plural, field_selector=f"metadata.name={name}",
                          _request_timeout=TIMEOUT_SECONDS)
        items = [with_kind(item, resource) for item in body.get("items") or [] if isinstance(item, dict)]
        return Listing(items, (body.get("metadata") or {}).get("resourceVersion"))

    def watch_named(self, resource: Resource, name: str, resource_version: str | None,
                    seconds: int) -> Iterator[Mapping[str, Any]]:
        return self._watch(resource, resource_version, seconds, field_selector=f"metadata.name={name}")

    def _watch(self, resource: Resource, resource_version: str | None, seconds: int,
               **selector: str) -> Iterator[Mapping[str, Any]]:
        stream = _kubernetes().watch.Watch()
        kwargs: dict[str, Any] = {"timeout_seconds": seconds, "allow_watch_bookmarks": True,
                                  "_request_timeout": seconds + 30, **selector}
        if resource_version:
            kwargs["resource_version"] = resource_version
        try:
            yield from stream.stream(self._custom.list_cluster_custom_object, resource.group, resource.version,
                                     resource.plural, **kwargs)
        except Exception as exc:
            raise error(exc, f"watch {resource.plural}.{resource.group}") from exc
        finally:
            stream.stop()

    def get(self, kind: str, name: str, timeout: float = TIMEOUT_SECONDS) -> dict[str, Any] | None:
        """One object by name; None when the API server does not have it."""
        resource = RESOURCES[kind]
        try:
            obj = self._call(f"read {resource.kind} {name}", self._custom.get_cluster_custom_object,
                             resource.group, resource.version, resource.plural, name, _request_timeout=timeout)
        except NotFound:
            return None
        return with_kind(obj, resource) if isinstance(obj, dict) else None

    def node_places(self) -> tuple[region.Named | None, Sequence[str]]:
        """The regions and zones the cluster's Nodes carry (one page of Nodes: a cluster is in one region), or None
        with a note saying why they could not be read."""
        try:
            items = self.nodes()
        except Unreachable:
            raise
        except KubeError as err:
            return None, [f"cannot list Nodes ({err.status}): the cluster's region is not read from them"]
        labels = [item.get("metadata", {}).get("labels") or {} for item in items]
        return region.from_labels(labels), []

    def nodes(self) -> Sequence[dict[str, Any]]:
        """One page of the cluster's Nodes, raw (a cluster's Nodes of one region and its instance types)."""
        core: Any = _kubernetes().client.CoreV1Api(self._api_client)
        body = self._call("list nodes", core.list_node, limit=PAGE, _request_timeout=TIMEOUT_SECONDS,
                          _preload_content=False)
        return [item for item in json.loads(body.data).get("items") or [] if isinstance(item, dict)]

    def services(self, selector: str) -> Sequence[dict[str, Any]]:
        """The Services in every namespace with this label selector (one page), raw."""
        core: Any = _kubernetes().client.CoreV1Api(self._api_client)
        body = self._call(f"list services {selector}", core.list_service_for_all_namespaces, label_selector=selector,
                          limit=PAGE, _request_timeout=TIMEOUT_SECONDS, _preload_content=False)
        return [item for item in json.loads(body.data).get("items") or [] if isinstance(item, dict)]

    def proxy_get(self, namespace: str, service: str, path: str) -> Generator[bytes, None, None]:
        """GET `path` of a Service (`NAME:PORT`) through the API server's service proxy, as chunks: the caller
        bounds how much it reads."""
        core: Any = _kubernetes().client.CoreV1Api(self._api_client)
        response = self._call(f"read {path} of service {namespace}/{service} through the API server",
                              core.connect_get_namespaced_service_proxy_with_path, service, namespace, path,
                              _preload_content=False, _request_timeout=TIMEOUT_SECONDS)
        try:
            yield from response.stream(65536)
        except Exception as exc:
            raise error(exc, f"read {path} of service {namespace}/{service}") from exc
        finally:
            response.release_conn()

    def crd(self, name: str) -> dict[str, Any] | None:
        """A CustomResourceDefinition as raw JSON (the client's models would drop or reject parts of an
        arbitrary schema); None when it is not installed."""
        try:
            response = self._call(f"read the CRD {name}", self._extensions.read_custom_resource_definition, name,
                                  _preload_content=False, _request_timeout=TIMEOUT_SECONDS)
        except NotFound:
            return None
        found: dict[str, Any] = json.loads(response.data)
        return found

    @staticmethod
    def _call(doing: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            raise error(exc, doing) from exc


def _kubernetes() -> Any:
    """The client package, untyped at this one boundary (its annotations are partial)."""
    try:
        import kubernetes
    except ImportError as err:  # pragma: no cover - a declared dependency
        raise ConfigError(f"reading a cluster needs the kubernetes package: {err}") from None
    return kubernetes


def with_kind(obj: dict[str, Any], resource: Resource) -> dict[str, Any]:
    obj.setdefault("apiVersion", resource.api_version)
    obj.setdefault("kind", resource.kind)
    return obj


def read(kubeconfig: str | None = None, context: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Every NodeOverlay and NodePool in the cluster, plus notes (e.g. a CRD that is not installed)."""
    client = Client.connect(kubeconfig, context)
    try:
        return read_all(client)
    finally:
        client.close()


def read_all(client: Client) -> tuple[list[dict[str, Any]], list[str]]:
    objects: list[dict[str, Any]] = []
    notes: list[str] = []
    for resource in RESOURCES.values():
        try:
            objects += client.list(resource.kind).items
        except NotFound:
            notes.append(f"the cluster does not serve {resource.plural}.{resource.group}/{resource.version}; "
                         "assuming none exist")
    return objects, notes


def read_places(kubeconfig: str | None = None,
                context: str | None = None) -> tuple[region.Named | None, Sequence[str]]:
    """Where the cluster's Nodes are (Client.node_places) through a client of its own."""
    client = Client.connect(kubeconfig, context)
    try:
        return client.node_places()
    finally:
        client.close()


def read_crd(kubeconfig: str | None = None, context: str | None = None) -> tuple[dict[str, Any] | None, list[str]]:
    """The cluster's NodeOverlay CRD (apiextensions.k8s.io/v1), or None with a note saying why not."""
    client = Client.connect(kubeconfig, context)
    try:
        # Not installed: no NodeOverlays are served either, which the listing has noted.
        return client.crd(crds.NAME), []
    except Unreachable:
        raise
    except KubeError as err:
        return None, [f"cannot read the CRD {crds.NAME} ({err.status}); checking against "
                      f"{crds.karpenter().origin} (--crd chooses another)"]
    finally:
        client.close()
