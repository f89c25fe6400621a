#!/bin/bash
# deploy/k8s: every manifest passes kubernetes-validate --strict (the
# Kubernetes OpenAPI schemas, offline) from build/venv-deploy (make
# venv-deploy; .ci/run makes it); a broken copy is refused, so this check
# can fail; the cluster.yaml inside the ConfigMap is one rl-driver accepts.
. "$(dirname "$0")/lib.bash"
kv=build/venv-deploy/bin/kubernetes-validate
[ -x "$kv" ] || skip "skipped: $kv missing; run \`make venv-deploy\` (needs PyPI)"
d=$(tmpdir)
trap 'rm -rf "$d"' EXIT
"$kv" --strict --quiet deploy/k8s/*.yaml || fail "kubernetes-validate refused deploy/k8s"
sed 's/replicas: 2/replicas: two/' deploy/k8s/workers.yaml >"$d/bad.yaml"
"$kv" --strict --quiet "$d/bad.yaml" >/dev/null 2>&1 && fail "a broken manifest passed"
sed 's/readinessProbe:/readinessProbez:/' deploy/k8s/workers.yaml >"$d/bad2.yaml"
"$kv" --strict --quiet "$d/bad2.yaml" >/dev/null 2>&1 && fail "an unknown field passed --strict"
# every StatefulSet probes /healthz, and each role's replicas match cluster.yaml
grep -q 'path: /healthz/ready' deploy/k8s/workers.yaml || fail "no readiness probe on /healthz/ready"
for role in rollout actor reward; do
    want=$(sed -n "s/^ *$role: {count: \([0-9]*\),.*/\1/p" deploy/k8s/config.yaml)
    got=$(awk -v r="rl-$role" '$1 == "name:" && $2 == r { f = 1 } f && $1 == "replicas:" { print $2; exit }' deploy/k8s/workers.yaml)
    [ -n "$want" ] && [ "$want" = "$got" ] || fail "$role: replicas $got, cluster.yaml count $want"
done
exit 0
