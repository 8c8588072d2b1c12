"""infra/k8s/: the kustomize base and overlays render, every object is valid Kubernetes, and the
manifests promise only what memvault does.

- Rendering: tests/infra/kustomize_lite.py (no kustomize binary here), checked against
  ``kubectl kustomize`` object by object where a kubectl is installed, and against hashes
  ``kubectl kustomize`` 1.37 printed, where none is.
- Schema: kubernetes-validate's strict schemas of Kubernetes 1.37 for the built-in kinds (an
  unknown field fails too); the ServiceMonitor, a Prometheus Operator CRD, against a JSON schema
  of the fields used here, written from the CRD's openAPIV3Schema (monitoring.coreos.com/v1 of
  prometheus-operator 0.84), additionalProperties false wherever the CRD lists properties.
- What users rely on: the env the pods get names real settings with valid values; the commands
  are real `memvault` subcommands; the probe and scrape paths are routes of the app; selectors,
  ports and references meet; every container has requests; non-root with a read-only root.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest
import yaml
from starlette.routing import Match

from memvault.cli import build_parser
from memvault.config import Settings
from tests.infra import kustomize_lite
from tests.infra.k8s_manifests import (
    K8S,
    OVERLAYS,
    ROOT,
    TARGETS,
    Obj,
    component,
    config_data,
    containers,
    env_file,
    find,
    matches,
    of_kind,
    pod_labels,
    pod_spec,
    rendered,
    workloads,
)

KUBERNETES_VERSION = "1.37"
SETTINGS_VARS = {f"MEMVAULT_{name.upper()}" for name in Settings.model_fields}
# Environment the pods get that is not a memvault setting, and why.
OTHER_ENV = {"FORWARDED_ALLOW_IPS"}  # uvicorn's trusted proxies (docs/scaling.md, "API replicas")
SECRET_NAME = "memvault-secrets"
PRODUCTION_SECRETS = K8S / "overlays" / "production" / "secrets.env.example"
DEV_SECRETS = K8S / "overlays" / "dev" / "secrets.env"

_duration = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
_selector = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}},
}
SERVICE_MONITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                "namespace": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "spec": {
            "type": "object",
            "required": ["endpoints", "selector"],
            "additionalProperties": False,
            "properties": {
                "selector": _selector,
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": _duration,
                            "scrapeTimeout": _duration,
                            "authorization": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "type": {"type": "string"},
                                    "credentials": {
                                        "type": "object",
                                        "required": ["key"],
                                        "additionalProperties": False,
                                        "properties": {"key": {"type": "string"}, "name": {"type": "string"}},
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def validate(obj: Obj) -> None:
    if obj["kind"] == "ServiceMonitor":
        jsonschema.Draft202012Validator(SERVICE_MONITOR_SCHEMA).validate(obj)
    else:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


@pytest.fixture(scope="module")
def app_routes() -> Any:
    """The app's routes, built without its lifespan (no database needed to match a path)."""
    from memvault.app import create_app

    return create_app(Settings(_env_file=None)).router.routes


# ---- rendering ---------------------------------------------------------------------------------


class TestRendering:
    @pytest.mark.parametrize("target", TARGETS)
    def test_every_kustomization_renders(self, target: str) -> None:
        objects = rendered(target)
        assert objects
        names = [kustomize_lite.key(o) for o in objects]
        assert len(names) == len(set(names))

    def test_the_hash_of_a_generated_configmap_and_secret_is_kustomizes(self) -> None:
        # Names `kubectl kustomize` (kubectl 1.37.1, kustomize 5.8.1) printed for these inputs.
        cm = {"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}
        assert kustomize_lite.name_hash(cm) == "4h2mbtbbt6"
        long = kustomize_lite._base64("p" * 100)
        assert long.count("\n") == 2  # kustomize wraps base64 at 70 characters
        secret = {"kind": "Secret", "type": "Opaque", "metadata": {"name": "s"}, "data": {"a": long}}
        assert kustomize_lite.name_hash(secret) == "48t94fc96m"

    def test_a_kustomization_field_it_does_not_implement_is_refused(self, tmp_path: Path) -> None:
        (tmp_path / "kustomization.yaml").write_text("namePrefix: dev-\nresources: []\n")
        with pytest.raises(kustomize_lite.Unsupported):
            kustomize_lite.build(tmp_path)

    def test_strategic_merge_follows_the_merge_keys_and_deletes_on_null(self) -> None:
        base = {"containers": [{"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}]}], "tls": [1]}
        patch = {"containers": [{"name": "a", "env": [{"name": "F", "value": "2"}]}, {"name": "b"}], "tls": None}
        merged = kustomize_lite.strategic_merge(base, patch, builtin=True)
        assert merged == {
            "containers": [
                {"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}]},
                {"name": "b"},
            ]
        }

    @pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl to compare with")
    @pytest.mark.parametrize("target", TARGETS)
    def test_the_same_objects_as_kubectl_kustomize(self, target: str) -> None:
        out = subprocess.run(["kubectl", "kustomize", str(K8S / target)], capture_output=True, text=True, check=True)
        theirs = {kustomize_lite.key(o): o for o in yaml.safe_load_all(out.stdout) if o}
        ours = {kustomize_lite.key(o): o for o in rendered(target)}
        assert theirs == ours


# ---- schema ------------------------------------------------------------------------------------


class TestSchema:
    @pytest.mark.parametrize("target", TARGETS)
    def test_every_object_validates(self, target: str) -> None:
        for obj in rendered(target):
            try:
                validate(obj)
            except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as e:
                pytest.fail(f"{target}: {obj['kind']} {obj['metadata']['name']}: {e}")

    def test_the_validators_refuse_what_kubernetes_would(self) -> None:
        """Not vacuous: a misspelt field and a wrong type fail, in both schemas."""
        objects = rendered("overlays/production")
        api = copy.deepcopy(find(objects, "Deployment", "memvault-api"))
        api["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}
        with pytest.raises(kubernetes_validate.ValidationError):
            validate(api)
        hpa = copy.deepcopy(find(objects, "HorizontalPodAutoscaler", "memvault-api"))
        hpa["spec"]["maxReplicas"] = "twenty"
        with pytest.raises(kubernetes_validate.ValidationError):
            validate(hpa)
        monitor = copy.deepcopy(find(objects, "ServiceMonitor", "memvault-api"))
        monitor["spec"]["endpoints"][0]["bearerToken"] = "x"
        with pytest.raises(jsonschema.ValidationError):
            validate(monitor)
        monitor = copy.deepcopy(find(objects, "ServiceMonitor", "memvault-api"))
        monitor["spec"]["endpoints"][0]["interval"] = "30 seconds"
        with pytest.raises(jsonschema.ValidationError):
            validate(monitor)


# ---- what the pods run -------------------------------------------------------------------------


def pod_env(objects: list[Obj], workload: Obj, secret_keys: set[str]) -> dict[str, str]:
    """The environment a container of this workload starts with (ConfigMap, Secret, env)."""
    env: dict[str, str] = {}
    for container in containers(workload):
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                env |= find(objects, "ConfigMap", source["configMapRef"]["name"])["data"]
            if "secretRef" in source:
                assert source["secretRef"]["name"] == SECRET_NAME
                env |= dict.fromkeys(secret_keys, "")
        env |= {e["name"]: e.get("value", "") for e in container.get("env", [])}
    return env


def secret_keys(target: str) -> dict[str, str]:
    """The Secret's keys and placeholder values: made by the dev overlay, outside the others."""
    return env_file(DEV_SECRETS if target == "overlays/dev" else PRODUCTION_SECRETS)


class TestSettings:
    @pytest.mark.parametrize("target", OVERLAYS)
    def test_every_variable_is_a_setting_with_a_valid_value(self, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
        objects = rendered(target)
        secrets = secret_keys(target)
        for workload in workloads(objects):
            env = pod_env(objects, workload, set(secrets))
            unknown = {name for name in env if name not in SETTINGS_VARS} - OTHER_ENV
            assert not unknown, f"{workload['metadata']['name']}: not settings: {sorted(unknown)}"
            for name in list(env):
                if name.startswith("MEMVAULT_"):
                    monkeypatch.setenv(name, secrets.get(name) or env[name])
            Settings(_env_file=None)  # a value it would refuse at start fails here

    def test_the_dev_secret_and_the_production_template_have_the_same_keys(self) -> None:
        assert set(env_file(DEV_SECRETS)) == set(env_file(PRODUCTION_SECRETS))
        dev = find(rendered("overlays/dev"), "Secret", SECRET_NAME)
        assert set(dev["data"]) == set(env_file(DEV_SECRETS))

    def test_no_credential_is_committed(self) -> None:
        for path in (DEV_SECRETS, PRODUCTION_SECRETS):
            for name, value in env_file(path).items():
                # A URL carries no password or the placeholder; anything else is the placeholder.
                parts = urlsplit(value)
                allowed = (None, "CHANGE_ME") if parts.scheme else ("CHANGE_ME",)
                assert (parts.password if parts.scheme else value) in allowed, f"{path.name}: {name}"
        assert "secrets.env" in (K8S / "overlays" / "production" / ".gitignore").read_text().split()

    @pytest.mark.parametrize("target", OVERLAYS)
    def test_every_secret_key_named_exists(self, target: str) -> None:
        keys = set(secret_keys(target))
        objects = rendered(target)
        named = set()
        for monitor in of_kind(objects, "ServiceMonitor"):
            for endpoint in monitor["spec"]["endpoints"]:
                cred = endpoint.get("authorization", {}).get("credentials")
                if cred:
                    assert cred["name"] == SECRET_NAME
                    named.add(cred["key"])
        for workload in workloads(objects):
            for container in containers(workload):
                for e in container.get("env", []):
                    ref = e.get("valueFrom", {}).get("secretKeyRef")
                    if ref:
                        named.add(ref["key"])
        assert named <= keys
        # The scrape's token is the server's: the same setting.
        assert "MEMVAULT_METRICS_TOKEN" in keys and "metrics_token" in Settings.model_fields

    @pytest.mark.parametrize("target", OVERLAYS)
    def test_the_ingress_host_is_the_public_urls(self, target: str) -> None:
        objects = rendered(target)
        public = urlsplit(config_data(objects)["MEMVAULT_PUBLIC_URL"])
        ingress = find(objects, "Ingress", "memvault")
        assert [r["host"] for r in ingress["spec"]["rules"]] == [public.hostname]
        tls_hosts = [h for t in ingress["spec"].get("tls", []) for h in t["hosts"]]
        assert tls_hosts == ([public.hostname] if public.scheme == "https" else [])


class TestCommands:
    @pytest.mark.parametrize("target", TARGETS[:1] + OVERLAYS)
    def test_every_container_runs_a_memvault_subcommand(self, target: str) -> None:
        parser = build_parser()
        subcommands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        for workload in workloads(rendered(target)):
            for container in containers(workload):
                assert container["command"] == ["memvault"]
                assert container["args"][0] in subcommands
                parser.parse_args(container["args"])  # unknown options exit here

    def test_each_process_kind_has_its_workload(self) -> None:
        objects = rendered("overlays/production")
        run = {w["metadata"]["name"]: (w["kind"], pod_spec(w)["containers"][0]["args"][0]) for w in workloads(objects)}
        assert run == {
            "memvault-api": ("Deployment", "serve"),
            "memvault-worker": ("Deployment", "worker"),
            "memvault-scheduler": ("Deployment", "scheduler"),
            "memvault-migrate": ("Job", "migrate"),
        }

    def test_exactly_one_scheduler_even_during_a_rollout(self) -> None:
        objects = rendered("overlays/production")
        scheduler = find(objects, "Deployment", "memvault-scheduler")
        assert scheduler["spec"]["replicas"] == 1
        assert scheduler["spec"]["strategy"] == {"type": "Recreate"}
        assert not [
            h
            for h in of_kind(objects, "HorizontalPodAutoscaler")
            if h["spec"]["scaleTargetRef"]["name"] == "memvault-scheduler"
        ]

    def test_the_image_is_the_one_the_dockerfile_and_compose_build(self) -> None:
        compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
        dev = rendered("overlays/dev")
        images = {c["image"] for w in workloads(dev) for c in containers(w)}
        assert images == {compose["services"]["api"]["image"]}  # memvault:local
        assert compose["services"]["api"]["build"]["dockerfile"] == "infra/docker/Dockerfile"
        production = {c["image"] for w in workloads(rendered("overlays/production")) for c in containers(w)}
        assert len(production) == 1 and re.fullmatch(r"[\w./-]+/memvault:[\w.-]+", production.pop())

    def test_compose_and_kubernetes_run_the_same_processes_with_the_same_settings(self) -> None:
        compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
        memvault = {name: s for name, s in compose["services"].items() if s.get("image") == "memvault:local"}
        objects = rendered("overlays/production")
        assert {s["command"][0] for s in memvault.values()} == {
            pod_spec(w)["containers"][0]["args"][0] for w in workloads(objects)
        }
        shared = set(compose["x-memvault-env"])
        k8s = set(config_data(objects)) | set(secret_keys("overlays/production"))
        assert shared <= k8s, f"compose sets what Kubernetes does not: {sorted(shared - k8s)}"


class TestProbesAndPorts:
    @pytest.mark.parametrize("target", OVERLAYS)
    def test_probe_and_scrape_paths_are_routes_of_the_app(self, target: str, app_routes: Any) -> None:
        objects = rendered(target)
        api = find(objects, "Deployment", "memvault-api")
        paths = {
            pod_spec(api)["containers"][0][probe]["httpGet"]["path"]
            for probe in ("startupProbe", "livenessProbe", "readinessProbe")
        }
        assert paths == {"/healthz", "/readyz"}
        for monitor in of_kind(objects, "ServiceMonitor"):
            if component(monitor) == "api":
                paths |= {e["path"] for e in monitor["spec"]["endpoints"]}
        for path in paths:
            scope = {"type": "http", "method": "GET", "path": path, "root_path": "", "headers": [], "query_string": b""}
            assert any(r.matches(scope)[0] == Match.FULL for r in app_routes), f"no GET route {path}"

    def test_the_api_listens_where_its_probes_and_service_point(self) -> None:
        objects = rendered("overlays/production")
        api = pod_spec(find(objects, "Deployment", "memvault-api"))["containers"][0]
        args = build_parser().parse_args(api["args"])
        ports = {p["name"]: p["containerPort"] for p in api["ports"]}
        assert args.host == "0.0.0.0" and ports == {"http": args.port}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert api[probe]["httpGet"]["port"] == "http"

    def test_the_worker_serves_its_metrics_on_its_metrics_port(self) -> None:
        worker = pod_spec(find(rendered("overlays/production"), "Deployment", "memvault-worker"))["containers"][0]
        args = build_parser().parse_args(worker["args"])
        assert args.metrics_host == "0.0.0.0"
        assert {p["name"]: p["containerPort"] for p in worker["ports"]} == {"metrics": args.metrics_port}


class TestReferences:
    @pytest.mark.parametrize("target", TARGETS[:1] + OVERLAYS)
    def test_workload_selectors_match_their_pods(self, target: str) -> None:
        for workload in of_kind(rendered(target), "Deployment"):
            assert matches(workload["spec"]["selector"]["matchLabels"], pod_labels(workload))

    @pytest.mark.parametrize("target", OVERLAYS)
    def test_services_budgets_and_autoscaler_find_their_pods(self, target: str) -> None:
        objects = rendered(target)
        deployments = of_kind(objects, "Deployment")

        def selected(selector: dict[str, str]) -> list[str]:
            return [d["metadata"]["name"] for d in deployments if matches(selector, pod_labels(d))]

        for service in of_kind(objects, "Service"):
            (target_workload,) = selected(service["spec"]["selector"])
            container_ports = {
                p["name"] for p in pod_spec(find(objects, "Deployment", target_workload))["containers"][0]["ports"]
            }
            for port in service["spec"]["ports"]:
                assert port["targetPort"] in container_ports
        for pdb in of_kind(objects, "PodDisruptionBudget"):
            assert len(selected(pdb["spec"]["selector"]["matchLabels"])) == 1
        for hpa in of_kind(objects, "HorizontalPodAutoscaler"):
            ref = hpa["spec"]["scaleTargetRef"]
            find(objects, ref["kind"], ref["name"])
            assert hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]

    def test_ingress_and_monitors_name_existing_service_ports(self) -> None:
        objects = rendered("overlays/production")
        services = of_kind(objects, "Service")
        for path in find(objects, "Ingress", "memvault")["spec"]["rules"][0]["http"]["paths"]:
            backend = path["backend"]["service"]
            service = find(objects, "Service", backend["name"])
            assert backend["port"]["name"] in {p["name"] for p in service["spec"]["ports"]}
        for monitor in of_kind(objects, "ServiceMonitor"):
            (service,) = [
                s for s in services if matches(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
            ]
            assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {p["name"] for p in service["spec"]["ports"]}

    @pytest.mark.parametrize("target", OVERLAYS)
    def test_every_configmap_and_secret_a_pod_names_is_there_or_external(self, target: str) -> None:
        objects = rendered(target)
        names = {(o["kind"], o["metadata"]["name"]) for o in objects}
        for workload in workloads(objects):
            assert ("ServiceAccount", pod_spec(workload)["serviceAccountName"]) in names
            for kind, holder, field in kustomize_lite._references(pod_spec(workload)):
                if (kind, holder[field]) == ("Secret", SECRET_NAME) and target == "overlays/production":
                    continue  # made outside kustomize (secrets.env.example)
                assert (kind, holder[field]) in names


class TestResourcesAndSecurity:
    @pytest.mark.parametrize("target", TARGETS[:1] + OVERLAYS)
    def test_every_container_requests_cpu_and_memory_and_caps_memory(self, target: str) -> None:
        for workload in workloads(rendered(target)):
            for container in containers(workload):
                resources = container["resources"]
                assert set(resources["requests"]) >= {"cpu", "memory"}, container["name"]
                assert "memory" in resources["limits"], container["name"]

    def test_pods_run_as_the_images_user_with_a_read_only_root(self) -> None:
        dockerfile = (ROOT / "infra" / "docker" / "Dockerfile").read_text()
        uid, gid = map(int, re.search(r"^USER (\d+):(\d+)$", dockerfile, re.M).groups())  # type: ignore[union-attr]
        for workload in workloads(rendered("overlays/production")):
            pod = pod_spec(workload)
            assert pod["securityContext"]["runAsNonRoot"] is True
            assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (uid, gid)
            assert pod["automountServiceAccountToken"] is False
            volumes = {v["name"]: v for v in pod.get("volumes", [])}
            for container in containers(workload):
                sc = container["securityContext"]
                assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
                assert sc["capabilities"]["drop"] == ["ALL"]
                # The temporary folder (metrics files of `serve`, Python's temp files) is writable.
                tmp = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
                assert tmp and "emptyDir" in volumes[tmp[0]["name"]]

    def test_graceful_shutdown_fits_in_the_grace_period(self) -> None:
        objects = rendered("overlays/production")
        api = pod_spec(find(objects, "Deployment", "memvault-api"))
        pause = api["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
        shutdown = int(config_data(objects)["MEMVAULT_SHUTDOWN_TIMEOUT_S"])
        assert pause + shutdown < api["terminationGracePeriodSeconds"]

    def test_the_autoscaler_target_has_a_cpu_request_and_rolls_without_losing_capacity(self) -> None:
        objects = rendered("overlays/production")
        api = find(objects, "Deployment", "memvault-api")
        hpa = find(objects, "HorizontalPodAutoscaler", "memvault-api")
        assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
        assert pod_spec(api)["containers"][0]["resources"]["requests"]["cpu"]
        assert api["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
        # A budget that allows a disruption with the fewest replicas the HPA may leave.
        pdb = find(objects, "PodDisruptionBudget", "memvault-api")
        assert hpa["spec"]["minReplicas"] - pdb["spec"]["maxUnavailable"] >= 1
