"""A small kustomize renderer for the part of kustomize that infra/k8s/ uses, in Python.

No kustomize or kubectl binary is on the test machines and no PyPI package renders kustomize for
Python 3.11, so the tests render the manifests with this. It is honest about its reach: a field
of a kustomization it does not implement raises ``Unsupported`` instead of being ignored, so a
manifest can only grow past this subset by failing its tests. Where a ``kubectl`` is installed,
tests/infra/test_k8s.py compares this output with ``kubectl kustomize``, object by object.

What it does, in kustomize's order (sigs.k8s.io/kustomize/api/krusty):

- ``resources``: files (several YAML documents each) and directories holding a kustomization,
  rendered first (recursively) and accumulated.
- ``configMapGenerator`` / ``secretGenerator`` with ``literals`` and ``envs``; ``behavior``
  create, merge or replace; ``options.disableNameSuffixHash``.
- ``patches`` with a ``path`` to strategic-merge patches, each applied to the object of its
  kind and name: maps merge, ``null`` deletes, lists of the built-in kinds merge on their
  Kubernetes patch-merge keys (containers and env by name, ...), other lists are replaced.
- ``namespace``, ``labels`` (``pairs`` on metadata only, as kustomize without
  ``includeSelectors``/``includeTemplates``), ``images`` (``newName``, ``newTag``, ``digest``).
- Last, at the top only: the content hash suffix of generated ConfigMaps and Secrets, and every
  reference to them in pod specs renamed to match.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]

KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED_FIELDS = {
    "apiVersion",
    "kind",
    "resources",
    "namespace",
    "labels",
    "images",
    "configMapGenerator",
    "secretGenerator",
    "patches",
}
# Kubernetes' patchMergeKey of the lists the manifests patch (k8s.io/api, `patchStrategy:"merge"`).
# Lists of the built-in kinds not named here are replaced by a patch, as they are by kustomize.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "imagePullSecrets": "name",
}
BUILTIN_GROUPS = {"v1", "apps/v1", "batch/v1", "autoscaling/v2", "policy/v1", "networking.k8s.io/v1"}


class Unsupported(Exception):
    """A kustomization uses something this renderer does not implement."""


def build(directory: Path) -> list[Obj]:
    """The objects `kustomize build DIRECTORY` would print (in another order)."""
    objects, generated = _build(Path(directory))
    _hash_generated(objects, generated)
    return objects


def key(obj: Obj) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def _kustomization(directory: Path) -> Obj:
    for name in KUSTOMIZATION_NAMES:
        if (directory / name).is_file():
            data = yaml.safe_load((directory / name).read_text())
            unknown = set(data) - SUPPORTED_FIELDS
            if unknown:
                raise Unsupported(f"{directory / name}: {sorted(unknown)}")
            return data
    raise FileNotFoundError(f"no kustomization in {directory}")


def _build(directory: Path) -> tuple[list[Obj], set[tuple[str, str]]]:
    """Objects, and the (kind, name) of those generated with a hash suffix still to add."""
    k = _kustomization(directory)
    objects: list[Obj] = []
    generated: set[tuple[str, str]] = set()
    for entry in k.get("resources", []):
        path = directory / entry
        if path.is_dir():
            sub, sub_generated = _build(path)
            objects += sub
            generated |= sub_generated
        else:
            objects += [d for d in yaml.safe_load_all(path.read_text()) if d]
    _check_unique(objects, directory)

    for spec in k.get("configMapGenerator", []):
        _generate(objects, generated, spec, directory, "ConfigMap")
    for spec in k.get("secretGenerator", []):
        _generate(objects, generated, spec, directory, "Secret")

    for patch in k.get("patches", []):
        if set(patch) != {"path"}:
            raise Unsupported(f"{directory}: patches other than a path to strategic merges: {patch}")
        for doc in yaml.safe_load_all((directory / patch["path"]).read_text()):
            if doc:
                _patch(objects, doc, directory)

    if "namespace" in k:
        for obj in objects:
            obj["metadata"]["namespace"] = k["namespace"]
    for label in k.get("labels", []):
        if set(label) - {"pairs"}:
            raise Unsupported(f"{directory}: labels with {sorted(set(label) - {'pairs'})}")
        for obj in objects:
            obj["metadata"].setdefault("labels", {}).update(label["pairs"])
    for image in k.get("images", []):
        for obj in objects:
            _set_image(obj, image)
    return objects, generated


def _check_unique(objects: list[Obj], directory: Path) -> None:
    seen: set[tuple[str, str, str]] = set()
    for obj in objects:
        if key(obj) in seen:
            raise ValueError(f"{directory}: {key(obj)} twice")
        seen.add(key(obj))


# ---- generators ------------------------------------------------------------------------------


def env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines; blank lines and # comments skipped (kustomize's and kubectl's env files)."""
    data = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"{path}: {line!r} is not KEY=VALUE")
        data[name] = value
    return data


def _generate(objects: list[Obj], generated: set[tuple[str, str]], spec: Obj, directory: Path, kind: str) -> None:
    unknown = set(spec) - {"name", "behavior", "literals", "envs", "options"}
    if unknown or set(spec.get("options", {})) - {"disableNameSuffixHash"}:
        raise Unsupported(f"{directory}: {kind} generator with {sorted(unknown) or spec['options']}")
    data: dict[str, str] = {}
    for env in spec.get("envs", []):
        data.update(env_file(directory / env))
    for literal in spec.get("literals", []):
        name, _, value = literal.partition("=")
        data[name] = value
    if kind == "Secret":
        data = {k: _base64(v) for k, v in data.items()}

    name = spec["name"]
    behavior = spec.get("behavior", "create")
    existing = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    if behavior == "create":
        if existing:
            raise ValueError(f"{directory}: {kind} {name} exists; use behavior merge or replace")
        obj: Obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "data": data}
        if kind == "Secret":
            obj["type"] = "Opaque"
        objects.append(obj)
    elif behavior in ("merge", "replace"):
        if not existing:
            raise ValueError(f"{directory}: no {kind} {name} to {behavior}")
        obj = existing[0]
        obj["data"] = {**obj["data"], **data} if behavior == "merge" else data
    else:
        raise Unsupported(f"{directory}: behavior {behavior}")
    if spec.get("options", {}).get("disableNameSuffixHash"):
        generated.discard((kind, name))
    else:
        generated.add((kind, name))


def _base64(value: str) -> str:
    """Base64 as kustomize writes a Secret's data: lines of 70 characters, each ending in a
    newline, once the value is longer than one line (kyaml's encodeBase64)."""
    text = base64.b64encode(value.encode()).decode()
    if len(text) <= 70:
        return text
    return "".join(text[i : i + 70] + "\n" for i in range(0, len(text), 70))


def _go_json(value: Any) -> str:
    """encoding/json.Marshal of a map: sorted keys, no spaces, HTML characters escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def name_hash(obj: Obj) -> str:
    """kustomize's content hash of a ConfigMap or Secret (api/hasher): SHA-256 of the JSON of its
    kind, data (and type) and a name that kustomize 5 leaves empty (checked against `kubectl
    kustomize` 1.37: {"data":{"a":"b"},"kind":"ConfigMap","name":""} gives x-4h2mbtbbt6), ten hex
    digits with the letters that could spell words swapped."""
    encoded: Obj = {"kind": obj["kind"], "name": "", "data": obj.get("data", {})}
    if obj["kind"] == "Secret":
        encoded["type"] = obj.get("type", "Opaque")
    digest = hashlib.sha256(_go_json(encoded).encode()).hexdigest()[:10]
    return digest.translate(str.maketrans({"0": "g", "1": "h", "3": "k", "a": "m", "e": "t"}))


def _hash_generated(objects: list[Obj], generated: set[tuple[str, str]]) -> None:
    renamed: dict[tuple[str, str, str], str] = {}
    for obj in objects:
        if (obj["kind"], obj["metadata"]["name"]) in generated:
            old = key(obj)
            obj["metadata"]["name"] = f"{obj['metadata']['name']}-{name_hash(obj)}"
            renamed[old] = obj["metadata"]["name"]
    for obj in objects:
        ns = obj["metadata"].get("namespace", "")
        for pod in _pod_specs(obj):
            for ref_kind, holder, field in _references(pod):
                new = renamed.get((ref_kind, ns, holder.get(field, "")))
                if new:
                    holder[field] = new


def _pod_specs(obj: Obj) -> Iterator[Obj]:
    spec = obj.get("spec", {})
    if obj["kind"] == "Pod":
        yield spec
    elif "template" in spec and "spec" in spec["template"]:
        yield spec["template"]["spec"]
    elif "jobTemplate" in spec:
        yield spec["jobTemplate"]["spec"]["template"]["spec"]


def _references(pod: Obj) -> Iterator[tuple[str, Obj, str]]:
    """(kind, the dict holding the name, its field) of every ConfigMap or Secret a pod names."""
    for container in pod.get("containers", []) + pod.get("initContainers", []):
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                yield "ConfigMap", source["configMapRef"], "name"
            if "secretRef" in source:
                yield "Secret", source["secretRef"], "name"
        for env in container.get("env", []):
            ref = env.get("valueFrom", {})
            if "configMapKeyRef" in ref:
                yield "ConfigMap", ref["configMapKeyRef"], "name"
            if "secretKeyRef" in ref:
                yield "Secret", ref["secretKeyRef"], "name"
    for volume in pod.get("volumes", []):
        if "configMap" in volume:
            yield "ConfigMap", volume["configMap"], "name"
        if "secret" in volume:
            yield "Secret", volume["secret"], "secretName"


# ---- patches ---------------------------------------------------------------------------------


def _patch(objects: list[Obj], patch: Obj, directory: Path) -> None:
    targets = [o for o in objects if o["kind"] == patch["kind"] and o["metadata"]["name"] == patch["metadata"]["name"]]
    if len(targets) != 1:
        raise ValueError(f"{directory}: patch for {patch['kind']} {patch['metadata']['name']} matches {len(targets)}")
    target = targets[0]
    builtin = target["apiVersion"] in BUILTIN_GROUPS
    merged = strategic_merge(target, patch, builtin=builtin)
    target.clear()
    target.update(merged)


def strategic_merge(base: Any, patch: Any, *, builtin: bool, field: str = "") -> Any:
    if isinstance(patch, dict):
        if any(k.startswith("$") for k in patch):
            raise Unsupported(f"patch directive in {sorted(patch)}")
        if not isinstance(base, dict):
            return {k: v for k, v in copy.deepcopy(patch).items() if v is not None}
        out = copy.deepcopy(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = strategic_merge(out.get(k), v, builtin=builtin, field=k)
        return out
    if isinstance(patch, list) and isinstance(base, list) and builtin and field in MERGE_KEYS:
        merge_key = MERGE_KEYS[field]
        out = copy.deepcopy(base)
        for item in patch:
            match = [i for i, b in enumerate(out) if b.get(merge_key) == item[merge_key]]
            if match:
                out[match[0]] = strategic_merge(out[match[0]], item, builtin=builtin)
            else:
                out.append(copy.deepcopy(item))
        return out
    return copy.deepcopy(patch)


# ---- images ----------------------------------------------------------------------------------


def _set_image(obj: Obj, image: Obj) -> None:
    if set(image) - {"name", "newName", "newTag", "digest"}:
        raise Unsupported(f"images entry {image}")
    for pod in _pod_specs(obj):
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            name, tag = _split_image(container["image"])
            if name != image["name"]:
                continue
            name = image.get("newName", name)
            if "digest" in image:
                tag = "@" + image["digest"]
            elif "newTag" in image:
                tag = ":" + str(image["newTag"])
            container["image"] = name + tag


def _split_image(image: str) -> tuple[str, str]:
    """("registry/name", ":tag" or "@sha256:..." or "")."""
    if "@" in image:
        name, digest = image.split("@", 1)
        return name, "@" + digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon:]
    return image, ""
