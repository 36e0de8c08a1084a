#!/usr/bin/env bash
# Refresh vendor-crds/ from the Go modules of JobSet and Kueue at the versions
# pinned in versions.env. The result is committed: it is pinned data, so the
# test cluster needs nothing from the network to install the APIs.
#
# For each project this writes
#   *.yaml CRDs          verbatim copies of config/components/crd/bases/
#   webhook-manifests.yaml  the module's config/components/webhook rendered by
#                        `kubectl kustomize`; up.sh rewrites its clientConfig
#                        from the in-cluster Service to a loopback URL + caBundle
#   LICENSE              the module's licence (Apache-2.0), as it requires
# and for Kueue also conversion-webhook-crds.txt: the CRDs whose kustomization
# enables the conversion webhook (v1beta1 <-> v1beta2), which up.sh patches.
# Kueue twice: the newest (vendor-crds/kueue) and the oldest supported release
# (vendor-crds/kueue-<version>), for the clusters that run each.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=lib.sh
. "$here/lib.sh"

kubectl=$E2E_BIN/kubectl
[ -x "$kubectl" ] || die "$kubectl is missing: run 'make e2e-build' first"
mkdir -p "$E2E_CACHE"

vendor() { # name module version
  local name=$1 module=$2 version=$3 dir out
  dir=$(go_module_dir "$module" "$version")
  out=$root/vendor-crds/$name
  log "vendor-crds: $module@$version -> vendor-crds/$name"
  rm -rf "$out"
  mkdir -p "$out"
  cp "$dir"/config/components/crd/bases/*.yaml "$out/"
  "$kubectl" kustomize "$dir/config/components/webhook" > "$out/webhook-manifests.yaml"
  cp "$dir/LICENSE" "$out/LICENSE"
  chmod u+w,a+r "$out"/*
  echo "$dir"
}

# vendor_kueue NAME VERSION: the CRDs, the webhooks and the CRDs whose kustomization turns
# on the conversion webhook (uncommented patch lines).
vendor_kueue() {
  local kueue_dir
  kueue_dir=$(vendor "$1" sigs.k8s.io/kueue "$2")
  {
    echo "# CRDs served through Kueue's conversion webhook (from config/components/crd/kustomization.yaml)"
    grep -E '^- path: patches/webhook_in_[a-z]+\.yaml' "$kueue_dir/config/components/crd/kustomization.yaml" |
      sed -E 's/^- path: //' |
      while read -r patch; do
        awk '/^metadata:/{m=1; next} m && /^  name:/{print $2; exit}' "$kueue_dir/config/components/crd/$patch"
      done
  } > "$root/vendor-crds/$1/conversion-webhook-crds.txt"
}

vendor jobset sigs.k8s.io/jobset "$JOBSET_VERSION" > /dev/null
vendor_kueue kueue "$KUEUE_VERSION"
vendor_kueue "kueue-$KUEUE_OLDEST_VERSION" "$KUEUE_OLDEST_VERSION"
log "vendor-crds: done ($(find "$root/vendor-crds" -name '*.yaml' | wc -l) YAML files)"
