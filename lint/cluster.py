"""Reading the NodeOverlays and NodePools already in a cluster.

`kubernetes` is imported here only: importing it costs about 0.3 s, which every offline run
would otherwise pay.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from lint.reader import InputError
from simulation.validation import crds

# (group, version, plural, kind)
RESOURCES = (
    ("karpenter.sh", "v1alpha1", "nodeoverlays", "NodeOverlay"),
    ("karpenter.sh", "v1", "nodepools", "NodePool"),
)
PAGE = 500
TIMEOUT_SECONDS = 30


def read(kubeconfig: str | None = None, context: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Every NodeOverlay and NodePool, plus notes (e.g. a CRD that is not installed)."""
    try:
        from kubernetes import client, config
        from kubernetes.client.exceptions import ApiException
    except ImportError as err:  # pragma: no cover - a declared dependency
        raise InputError(f"--cluster needs the kubernetes package: {err}") from None
    try:
        api_client = _api_client(config, client, kubeconfig, context)
    except Exception as err:  # the config loaders raise many unrelated types
        raise InputError(f"cannot load the Kubernetes configuration: {_one_line(err)}") from None
    api = client.CustomObjectsApi(api_client)
    objects: list[dict[str, Any]] = []
    notes: list[str] = []
    try:
        for group, version, plural, kind in RESOURCES:
            try:
                objects += _list_all(api.list_cluster_custom_object, group, version, plural, kind)
            except ApiException as err:
                if err.status != 404:
                    raise
                notes.append(f"the cluster does not serve {plural}.{group}/{version}; assuming none exist")
    except ApiException as err:
        raise InputError(f"cannot list objects in the cluster: {err.status} {err.reason}") from None
    except Exception as err:  # connection refused, TLS, timeouts: urllib3 raises its own types
        raise InputError(f"cannot reach the cluster: {_one_line(err)}") from None
    finally:
        api_client.close()
    return objects, notes


def read_crd(kubeconfig: str | None = None, context: str | None = None) -> tuple[dict[str, Any] | None, list[str]]:
    """The cluster's NodeOverlay CRD (apiextensions.k8s.io/v1), or None with a note saying why not."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    try:
        api_client = _api_client(config, client, kubeconfig, context)
    except Exception as err:  # the config loaders raise many unrelated types
        raise InputError(f"cannot load the Kubernetes configuration: {_one_line(err)}") from None
    try:
        api = client.ApiextensionsV1Api(api_client)
        # Raw JSON: the client's models would drop or reject parts of an arbitrary schema.
        response: Any = api.read_custom_resource_definition(
            crds.NAME, _preload_content=False, _request_timeout=TIMEOUT_SECONDS)
        found: dict[str, Any] = json.loads(response.data)
        return found, []
    except ApiException as err:
        if err.status == 404:  # no NodeOverlays are served either, which the listing has noted
            return None, []
        return None, [f"cannot read the CRD {crds.NAME} ({err.status} {err.reason}); checking against the embedded "
                      "DRA-extended CRD"]
    except Exception as err:  # connection refused, TLS, timeouts: urllib3 raises its own types
        raise InputError(f"cannot reach the cluster: {_one_line(err)}") from None
    finally:
        api_client.close()


def _api_client(config: Any, client: Any, kubeconfig: str | None, context: str | None) -> Any:
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    except Exception:
        # Inside a pod (a CI job running in the cluster) there is no kubeconfig to find.
        if kubeconfig is not None or context is not None or "KUBERNETES_SERVICE_HOST" not in os.environ:
            raise
        config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration)


def _list_all(call: Callable[..., Any], group: str, version: str, plural: str,
              kind: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"limit": PAGE, "_request_timeout": TIMEOUT_SECONDS}
        if token:
            kwargs["_continue"] = token
        page = call(group, version, plural, **kwargs)
        for item in page.get("items") or []:
            if isinstance(item, dict):
                # List items normally carry these, but nothing guarantees it.
                item.setdefault("apiVersion", f"{group}/{version}")
                item.setdefault("kind", kind)
                out.append(item)
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return out


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."
