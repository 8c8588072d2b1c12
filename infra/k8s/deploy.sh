#!/usr/bin/env bash
# Roll out one release of memvault to Kubernetes, migration first:
#
#   infra/k8s/deploy.sh infra/k8s/overlays/production
#
# 1. Render the overlay once (kubectl kustomize), so both steps apply the same objects.
# 2. Delete the previous release's migrate Job (a Job's pod template cannot be changed in place).
# 3. Apply what the migration needs (ConfigMap, Secret when the overlay makes one, ServiceAccount,
#    the NetworkPolicies every memvault pod has) and the Job: every object whose
#    app.kubernetes.io/component is not api, worker or scheduler.
# 4. Wait for the Job: Complete goes on; Failed (or no end within MIGRATE_TIMEOUT_S) stops here,
#    with the previous release's pods still serving the schema they know.
# 5. Apply everything else (`component!=migrate`) and wait for the Deployments to roll out.
#
# Environment: KUBECTL (default kubectl), MIGRATE_TIMEOUT_S (default 1800, the Job's own
# activeDeadlineSeconds), MIGRATE_POLL_S (default 2), ROLLOUT_TIMEOUT (default 10m). The namespace
# is the overlay's.
set -euo pipefail

overlay=${1:?usage: deploy.sh OVERLAY_DIR (e.g. infra/k8s/overlays/production)}
kubectl=${KUBECTL:-kubectl}
migrate_timeout=${MIGRATE_TIMEOUT_S:-1800}
poll=${MIGRATE_POLL_S:-2}
rollout_timeout=${ROLLOUT_TIMEOUT:-10m}

namespace=$(sed -n 's/^namespace:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$overlay/kustomization.yaml")
if [[ -z $namespace ]]; then
    echo "deploy.sh: $overlay/kustomization.yaml sets no namespace" >&2
    exit 2
fi

rendered=$(mktemp)
trap 'rm -f "$rendered"' EXIT
"$kubectl" kustomize "$overlay" >"$rendered"

echo "memvault: migrating ($namespace)"
"$kubectl" -n "$namespace" delete job memvault-migrate --ignore-not-found --wait=true
"$kubectl" apply -f "$rendered" -l 'app.kubernetes.io/component notin (api,worker,scheduler)'

deadline=$((SECONDS + migrate_timeout))
while :; do
    state=$("$kubectl" -n "$namespace" get job memvault-migrate \
        -o 'jsonpath={range .status.conditions[?(@.status=="True")]}{.type} {end}')
    case " $state " in
        *" Complete "*) break ;;
        *" Failed "*)
            echo "memvault: the migrate Job failed; nothing else was changed. Its log:" >&2
            "$kubectl" -n "$namespace" logs job/memvault-migrate --tail=50 >&2 || true
            exit 1
            ;;
    esac
    if ((SECONDS >= deadline)); then
        echo "memvault: the migrate Job did not finish within ${migrate_timeout}s; nothing else was changed" >&2
        exit 1
    fi
    sleep "$poll"
done

echo "memvault: rolling out ($namespace)"
"$kubectl" apply -f "$rendered" -l 'app.kubernetes.io/component!=migrate'
for deployment in memvault-api memvault-worker memvault-scheduler; do
    "$kubectl" -n "$namespace" rollout status "deployment/$deployment" --timeout="$rollout_timeout"
done
