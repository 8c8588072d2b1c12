"""infra/k8s/base/networkpolicies.yaml lets through what memvault needs and nothing else.

The rendered NetworkPolicies are evaluated with Kubernetes' rules (networking.k8s.io/v1): a pod
selected by no policy of a direction is open in it; once selected, a connection passes when
some rule of some selecting policy allows it. A rule without ``to``/``from`` allows every peer,
one without ``ports`` every port; a peer is an ipBlock (cidr minus except) or a namespace and
pod selector. The evaluator covers the parts the manifests use and refuses any other.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import pytest

from tests.infra.k8s_manifests import OVERLAYS, Obj, find, matches, of_kind, pod_labels, rendered


@dataclass(frozen=True)
class Peer:
    """The other end: a pod (its namespace's and its own labels, and its address) or an address."""

    ip: str
    namespace_labels: dict[str, str] = field(default_factory=dict)
    pod_labels: dict[str, str] | None = None  # None: not a pod of the cluster


def _selector(selector: Obj) -> dict[str, str]:
    assert set(selector) <= {"matchLabels"}, f"not evaluated here: {selector}"
    labels: dict[str, str] = selector.get("matchLabels", {})
    return labels


def _peer_matches(rule_peer: Obj, peer: Peer, own_namespace_labels: dict[str, str]) -> bool:
    assert set(rule_peer) <= {"ipBlock", "namespaceSelector", "podSelector"}, rule_peer
    if "ipBlock" in rule_peer:
        block = rule_peer["ipBlock"]
        address = ipaddress.ip_address(peer.ip)
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in ipaddress.ip_network(e) for e in block.get("except", [])
        )
    if peer.pod_labels is None:
        return False
    if "namespaceSelector" in rule_peer:
        if not matches(_selector(rule_peer["namespaceSelector"]), peer.namespace_labels):
            return False
    elif peer.namespace_labels != own_namespace_labels:  # a podSelector alone: this namespace only
        return False
    return matches(_selector(rule_peer.get("podSelector", {})), peer.pod_labels)


def _port_matches(rule: Obj, port: int, protocol: str) -> bool:
    if "ports" not in rule:
        return True
    for p in rule["ports"]:
        assert isinstance(p["port"], int) and "endPort" not in p, f"not evaluated here: {p}"
        if p["port"] == port and p.get("protocol", "TCP") == protocol:
            return True
    return False


NAMESPACE = {"kubernetes.io/metadata.name": "memvault"}


def allowed(
    policies: list[Obj], pod: dict[str, str], direction: str, peer: Peer, port: int, protocol: str = "TCP"
) -> bool:
    """May a pod with these labels (in namespace memvault) connect to (Egress) or be reached by
    (Ingress) this peer on this port?"""
    policy_type, rules_key, peers_key = {
        "Egress": ("Egress", "egress", "to"),
        "Ingress": ("Ingress", "ingress", "from"),
    }[direction]
    selecting = [
        p
        for p in policies
        if policy_type in p["spec"]["policyTypes"] and matches(_selector(p["spec"]["podSelector"]), pod)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get(rules_key, []):
            peers = rule.get(peers_key)
            if (peers is None or any(_peer_matches(x, peer, NAMESPACE) for x in peers)) and _port_matches(
                rule, port, protocol
            ):
                return True
    return False


POSTGRES_MANAGED = Peer("10.20.0.5")  # a managed database at a private address of the VPC
REDIS_IN_CLUSTER = Peer("10.244.1.9", {"kubernetes.io/metadata.name": "data"}, {"app": "redis"})
PUBLIC = Peer("93.184.216.34")
PRIVATE = Peer("10.0.0.7")
METADATA = Peer("169.254.169.254")
INGRESS_CONTROLLER = Peer(
    "10.244.0.3", {"kubernetes.io/metadata.name": "ingress-nginx"}, {"app.kubernetes.io/name": "ingress-nginx"}
)
PROMETHEUS = Peer("10.244.0.4", {"kubernetes.io/metadata.name": "monitoring"}, {"app": "prometheus"})
OTHER_POD = Peer("10.244.2.2", {"kubernetes.io/metadata.name": "other"}, {"app": "curious"})
SAME_NAMESPACE_POD = Peer("10.244.2.3", NAMESPACE, {"app": "neighbour"})


def pods(objects: list[Obj]) -> dict[str, dict[str, str]]:
    """Each workload's pod labels by component."""
    return {
        pod_labels(w)["app.kubernetes.io/component"]: pod_labels(w)
        for w in objects
        if w["kind"] in ("Deployment", "Job")
    }


@pytest.fixture(params=OVERLAYS)
def objects(request: pytest.FixtureRequest) -> list[Obj]:
    return rendered(request.param)


class TestEgress:
    def test_every_pod_reaches_postgresql_redis_and_dns(self, objects: list[Obj]) -> None:
        policies = of_kind(objects, "NetworkPolicy")
        for name, pod in pods(objects).items():
            for peer in (POSTGRES_MANAGED, REDIS_IN_CLUSTER, PUBLIC):
                assert allowed(policies, pod, "Egress", peer, 5432), name
                assert allowed(policies, pod, "Egress", peer, 6379), name
            assert allowed(policies, pod, "Egress", PRIVATE, 53, "UDP"), name
            assert allowed(policies, pod, "Egress", PRIVATE, 53, "TCP"), name

    def test_the_api_calls_https_apis_and_smtp_on_public_addresses_only(self, objects: list[Obj]) -> None:
        policies = of_kind(objects, "NetworkPolicy")
        api = pods(objects)["api"]
        for port in (443, 587, 465):
            assert allowed(policies, api, "Egress", PUBLIC, port)
            assert not allowed(policies, api, "Egress", PRIVATE, port)
        assert not allowed(policies, api, "Egress", METADATA, 80)
        assert not allowed(policies, api, "Egress", PUBLIC, 8443)

    def test_workers_deliver_webhooks_to_any_public_port_and_nothing_private(self, objects: list[Obj]) -> None:
        policies = of_kind(objects, "NetworkPolicy")
        worker = pods(objects)["worker"]
        for port in (443, 8443, 9000):
            assert allowed(policies, worker, "Egress", PUBLIC, port)
            assert not allowed(policies, worker, "Egress", PRIVATE, port)
        assert not allowed(policies, worker, "Egress", METADATA, 80)

    def test_the_scheduler_and_the_migration_reach_nothing_else(self, objects: list[Obj]) -> None:
        policies = of_kind(objects, "NetworkPolicy")
        for name in ("scheduler", "migrate"):
            assert not allowed(policies, pods(objects)[name], "Egress", PUBLIC, 443), name


class TestIngress:
    def test_the_api_is_reached_from_the_ingress_controller_and_prometheus_only(self, objects: list[Obj]) -> None:
        policies = of_kind(objects, "NetworkPolicy")
        api = pods(objects)["api"]
        port = find(objects, "Service", "memvault-api")["spec"]["ports"][0]["port"]
        assert allowed(policies, api, "Ingress", INGRESS_CONTROLLER, port)
        assert allowed(policies, api, "Ingress", PROMETHEUS, port)
        for peer in (OTHER_POD, SAME_NAMESPACE_POD, PUBLIC):
            assert not allowed(policies, api, "Ingress", peer, port)

    def test_worker_metrics_only_for_prometheus_and_nothing_else_is_reachable(self, objects: list[Obj]) -> None:
        policies = of_kind(objects, "NetworkPolicy")
        all_pods = pods(objects)
        assert allowed(policies, all_pods["worker"], "Ingress", PROMETHEUS, 9101)
        assert not allowed(policies, all_pods["worker"], "Ingress", INGRESS_CONTROLLER, 9101)
        for name in ("scheduler", "migrate"):
            assert not allowed(policies, all_pods[name], "Ingress", PROMETHEUS, 8080), name

    def test_the_evaluator_opens_a_pod_no_policy_selects(self) -> None:
        assert allowed([], {"app": "x"}, "Ingress", OTHER_POD, 1)
        # And one deny-all policy closes it: the base's default.
        policies = of_kind(rendered("overlays/production"), "NetworkPolicy")
        api = pods(rendered("overlays/production"))["api"]
        deny = [p for p in policies if p["metadata"]["name"] == "memvault-default-deny"]
        assert not allowed(deny, api, "Egress", PUBLIC, 5432)
        # Without the datastores policy the api would lose its database: that policy is the one.
        others = [p for p in policies if p["metadata"]["name"] != "memvault-datastores"]
        assert not allowed(others, api, "Egress", POSTGRES_MANAGED, 5432)
