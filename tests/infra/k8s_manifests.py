"""infra/k8s/ rendered once per test session, and small readers over the objects, shared by the
tests/infra/test_k8s*.py modules."""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.infra import kustomize_lite

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "infra" / "k8s"
# Every kustomization in infra/k8s: the base, the optional monitoring part, and the overlays.
TARGETS = ("base", "monitoring", "overlays/dev", "overlays/production")
OVERLAYS = ("overlays/dev", "overlays/production")
WORKLOADS = ("Deployment", "Job")

Obj = dict[str, Any]


@functools.cache
def _rendered(target: str) -> tuple[Obj, ...]:
    return tuple(kustomize_lite.build(K8S / target))


def rendered(target: str) -> list[Obj]:
    return copy.deepcopy(list(_rendered(target)))


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def of_kind(objects: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind]


def pod_spec(workload: Obj) -> Obj:
    spec: Obj = workload["spec"]["template"]["spec"]
    return spec


def pod_labels(workload: Obj) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def containers(workload: Obj) -> Iterator[Obj]:
    spec = pod_spec(workload)
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def workloads(objects: list[Obj]) -> list[Obj]:
    return [o for o in objects if o["kind"] in WORKLOADS]


def component(obj: Obj) -> str | None:
    return obj["metadata"].get("labels", {}).get("app.kubernetes.io/component")


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """A matchLabels selector: every pair present (an empty selector matches everything)."""
    return all(labels.get(k) == v for k, v in selector.items())


def config_data(objects: list[Obj]) -> dict[str, str]:
    """The generated memvault-config's data (its name carries kustomize's hash)."""
    found = [o for o in of_kind(objects, "ConfigMap") if o["metadata"]["name"].startswith("memvault-config-")]
    assert len(found) == 1
    data: dict[str, str] = found[0]["data"]
    return data


env_file = kustomize_lite.env_file
