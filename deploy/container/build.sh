#!/bin/sh
# Builds the weir image without a Go image: the binary on the host, with the
# flags of ../../Containerfile, then a FROM scratch image around it.
#
#   deploy/container/build.sh [TAG]        (default weir:dev)
#
# Environment: VERSION, COMMIT (default: git describe / rev-parse, else
# devel / unknown), ENGINE (podman, else docker), PODMAN_FLAGS (extra
# flags for the engine's build, e.g. --runtime runc), CA (default
# /etc/ssl/certs/ca-certificates.crt).
set -eu
tag=${1:-weir:dev}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
version=${VERSION:-$(git describe --tags --always 2>/dev/null || echo devel)}
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
engine=${ENGINE:-$(command -v podman >/dev/null 2>&1 && echo podman || echo docker)}
ca=${CA:-/etc/ssl/certs/ca-certificates.crt}
[ -r "$ca" ] || { echo "build.sh: CA bundle $ca not readable (set CA)" >&2; exit 2; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/rootfs/etc/weir" "$stage/rootfs/var/lib/weir" "$stage/rootfs/tmp"
CGO_ENABLED=0 go build -tags weir_cloud -trimpath -buildvcs=false \
  -ldflags "-s -w -X github.com/weirproject/weir/internal/buildinfo.version=$version -X github.com/weirproject/weir/internal/buildinfo.commit=$commit" \
  -o "$stage/weir" ./cmd/weir
cp "$ca" "$stage/ca-certificates.crt"
# shellcheck disable=SC2086
"$engine" build ${PODMAN_FLAGS:-} -t "$tag" -f deploy/container/Containerfile.local "$stage"
echo "build.sh: built $tag ($version, $commit)"
