"""infra/k8s/deploy.sh runs the migration to completion before anything of the release rolls out.

The script runs for real, with a stand-in `kubectl` first on PATH that renders with
tests/infra/kustomize_lite.py, filters ``apply -f FILE -l SELECTOR`` as Kubernetes' label
selectors do (``!=`` and ``notin`` also match objects without the label), answers the Job's
state from a script of states, and logs every call. The tests read the log: which objects each
step applied, and in what order the steps came.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.infra.k8s_manifests import K8S, OVERLAYS, ROOT, component, containers, pod_spec, rendered
from tests.infra.kustomize_lite import _references

DEPLOY = K8S / "deploy.sh"

FAKE_KUBECTL = textwrap.dedent(
    r'''
    #!PYTHON
    """A stand-in kubectl for deploy.sh: logs each call, renders, filters, answers job states."""
    import json, os, re, sys
    from pathlib import Path

    import yaml

    from tests.infra import kustomize_lite

    argv = sys.argv[1:]
    entry = {"argv": argv}


    def selected(selector, labels):
        for term in re.split(r",(?![^()]*\))", selector):
            term = term.strip()
            m = re.fullmatch(r"(\S+)\s+(in|notin)\s+\((.*)\)", term)
            if m:
                values = {v.strip() for v in m.group(3).split(",")}
                present = m.group(1) in labels and labels[m.group(1)] in values
                if present != (m.group(2) == "in"):
                    return False
                continue
            m = re.fullmatch(r"([^!=\s]+)\s*(!=|==|=)\s*(\S*)", term)
            assert m, term
            equal = labels.get(m.group(1)) == m.group(3)
            if equal != (m.group(2) != "!="):
                return False
        return True


    if argv[0] == "kustomize":
        sys.stdout.write(yaml.safe_dump_all(kustomize_lite.build(Path(argv[1]))))
    elif argv[0] == "apply":
        docs = [d for d in yaml.safe_load_all(Path(argv[argv.index("-f") + 1]).read_text()) if d]
        selector = argv[argv.index("-l") + 1]
        entry["objects"] = [
            [d["kind"], d["metadata"]["name"]] for d in docs if selected(selector, d["metadata"].get("labels", {}))
        ]
    elif "get" in argv:
        states = Path(os.environ["FAKE_JOB_STATES"])
        lines = states.read_text().splitlines()
        print(lines[0] if lines else "", end="")
        states.write_text("\n".join(lines[1:]))
    with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
        log.write(json.dumps(entry) + "\n")
    '''
).replace("#!PYTHON", "#!" + sys.executable, 1)


def deploy(tmp_path: Path, overlay: str, states: list[str], **env: str) -> tuple[int, list[dict[str, Any]]]:
    """Run deploy.sh on an overlay; the Job reports ``states`` to successive polls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(FAKE_KUBECTL.lstrip())
    kubectl.chmod(0o755)
    log = tmp_path / "kubectl.log"
    log.write_text("")
    (tmp_path / "states").write_text("\n".join(states))
    result = subprocess.run(
        ["bash", str(DEPLOY), str(K8S / overlay)],
        env={
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT),
            "FAKE_KUBECTL_LOG": str(log),
            "FAKE_JOB_STATES": str(tmp_path / "states"),
            "MIGRATE_POLL_S": "0.05",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return result.returncode, calls


def applied(calls: list[dict[str, Any]]) -> list[set[tuple[str, str]]]:
    return [{(k, n) for k, n in c["objects"]} for c in calls if c["argv"][0] == "apply"]


@pytest.mark.parametrize("overlay", OVERLAYS)
class TestRelease:
    def test_the_migration_completes_before_the_release_is_applied(self, tmp_path: Path, overlay: str) -> None:
        code, calls = deploy(tmp_path, overlay, ["", "Complete "])
        assert code == 0
        verbs = [c["argv"][0] if c["argv"][0] != "-n" else c["argv"][2] for c in calls]
        assert verbs == ["kustomize", "delete", "apply", "get", "get", "apply", "rollout", "rollout", "rollout"]
        assert calls[1]["argv"][2:5] == ["delete", "job", "memvault-migrate"]
        first, second = applied(calls)
        objects = {(o["kind"], o["metadata"]["name"]) for o in rendered(overlay)}
        # The first step is the Job and what it needs; the second all the rest, without the Job.
        assert ("Job", "memvault-migrate") in first and ("Job", "memvault-migrate") not in second
        assert first | second == objects
        assert not {kind for kind, _ in first} & {"Deployment", "Service", "Ingress", "HorizontalPodAutoscaler"}
        rolled = [c["argv"][4] for c in calls if "rollout" in c["argv"]]
        assert rolled == ["deployment/memvault-api", "deployment/memvault-worker", "deployment/memvault-scheduler"]

    def test_the_first_step_holds_everything_the_migrate_pod_uses(self, tmp_path: Path, overlay: str) -> None:
        _, calls = deploy(tmp_path, overlay, ["Complete "])
        first = applied(calls)[0]
        objects = rendered(overlay)
        job = next(o for o in objects if o["kind"] == "Job")
        needs = {("ServiceAccount", pod_spec(job)["serviceAccountName"])}
        needs |= {(kind, holder[f]) for kind, holder, f in _references(pod_spec(job))}
        made_here = {(o["kind"], o["metadata"]["name"]) for o in objects}
        assert needs & made_here <= first
        # The NetworkPolicies that select the migrate pod (its way to PostgreSQL) come with it.
        labels = job["spec"]["template"]["metadata"]["labels"]
        for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
            selector = policy["spec"]["podSelector"]["matchLabels"]
            if all(labels.get(k) == v for k, v in selector.items()):
                assert ("NetworkPolicy", policy["metadata"]["name"]) in first

    def test_a_failed_migration_stops_the_release(self, tmp_path: Path, overlay: str) -> None:
        code, calls = deploy(tmp_path, overlay, ["", "Failed "])
        assert code == 1
        assert len(applied(calls)) == 1
        assert not [c for c in calls if "rollout" in c["argv"]]
        assert any("logs" in c["argv"] for c in calls)

    def test_a_migration_that_does_not_end_stops_the_release(self, tmp_path: Path, overlay: str) -> None:
        code, calls = deploy(tmp_path, overlay, [], MIGRATE_TIMEOUT_S="0")
        assert code == 1
        assert len(applied(calls)) == 1


def test_only_the_migrate_job_carries_the_migrate_component() -> None:
    """deploy.sh splits the release on this label: nothing else may carry it, and the api, worker
    and scheduler pods it rolls out all carry theirs."""
    objects = rendered("overlays/production")
    assert [o["kind"] for o in objects if component(o) == "migrate"] == ["Job"]
    for workload in (o for o in objects if o["kind"] == "Deployment"):
        assert component(workload) in ("api", "worker", "scheduler")
        assert [c["name"] for c in containers(workload)] == [component(workload)]


def test_the_deploy_script_names_the_workloads_the_overlays_make() -> None:
    script = DEPLOY.read_text()
    names = {o["metadata"]["name"] for o in rendered("overlays/production") if o["kind"] in ("Deployment", "Job")}
    for name in names:
        assert name in script
