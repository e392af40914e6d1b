# shellcheck shell=bash
# Sourced by hack/envtest-assets.sh and hack/cluster/assets.sh: how to build the programs of
# a Kubernetes release from the Go module proxy. `go install pkg@version` refuses
# k8s.io/kubernetes because its go.mod replaces every staging module (k8s.io/api,
# k8s.io/client-go, ...) with ./staging/src/...; so the programs are built inside a wrapper
# module that requires the release and replaces each staging module with its released
# version, v0.<minor>.<patch> for Kubernetes v1.<minor>.<patch>. The caller defines die.

# kubernetes_wrapper DIR MODULE VERSION writes DIR/go.mod: module MODULE, requiring
# k8s.io/kubernetes at VERSION with its staging modules replaced. Run it outside any module.
kubernetes_wrapper() {
  local dir=$1 module=$2 version=$3 k8s_dir go_directive staging_version m
  [[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "Kubernetes version $version: want a release such as v1.37.2"
  staging_version=v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
  k8s_dir=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -f "$k8s_dir/go.mod" ] || die "go mod download k8s.io/kubernetes@$version gave no module directory"
  local -a staging
  mapfile -t staging < <(sed -n 's|^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/src/.*|\1|p' "$k8s_dir/go.mod")
  [ ${#staging[@]} -gt 0 ] || die "found no staging replace directives in k8s.io/kubernetes@$version's go.mod"
  go_directive=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$k8s_dir/go.mod")
  mkdir -p "$dir"
  {
    echo "module $module"
    echo
    echo "go $go_directive"
    echo
    echo "require k8s.io/kubernetes $version"
    echo
    echo "replace ("
    for m in "${staging[@]}"; do echo "	$m => $m $staging_version"; done
    echo ")"
  } >"$dir/go.mod"
}

# kubernetes_ldflags VERSION prints the ldflags Kubernetes' own build (hack/lib/version.sh)
# sets, so that `--version`, the discovery endpoint /version and `kubectl version` report
# the release, not v0.0.0-master.
kubernetes_ldflags() {
  local version=$1 minor build_date flags pkg
  [[ $version =~ ^v1\.([0-9]+)\. ]] || die "Kubernetes version $version: want a release such as v1.37.2"
  minor=${BASH_REMATCH[1]}
  build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  flags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
  done
  printf '%s\n' "$flags"
}
