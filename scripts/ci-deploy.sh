#!/usr/bin/env bash
# Deployment checks for CI (issue 15):
#   1. cross-builds cmd/tendril and cmd/tendril-relay for linux/arm64 and
#      linux/amd64 with CGO_ENABLED=0, and packages the relay as the Lambda
#      zip the template expects (bootstrap, arm64);
#   2. validates deploy/agentcore/template.yaml against the CloudFormation
#      resource specification (scripts/validate-template.sh);
#   3. runs systemd-analyze verify on a unit from `tendril service install`
#      when systemd-analyze is installed;
#   4. builds the image with buildah (linux/arm64 and linux/amd64) when
#      buildah is installed and TENDRIL_CI_BUILDAH is not 0, and prints its
#      size. A sandbox without buildah, or one where it cannot run (no user
#      namespaces), skips this step and says so.
# Outputs go to .cache/ci-deploy (gitignored).
set -euo pipefail
cd "$(dirname "$0")/.."
out=.cache/ci-deploy
rm -rf "$out"; mkdir -p "$out"

echo "== cross-build (CGO_ENABLED=0)"
for arch in arm64 amd64; do
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -tags timetzdata -ldflags "-s -w" -o "$out/tendril-linux-$arch" ./cmd/tendril
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -tags lambda.norpc -ldflags "-s -w" -o "$out/relay-linux-$arch/bootstrap" ./cmd/tendril-relay
  printf '  %-22s %8d bytes\n' "tendril linux/$arch" "$(stat -c %s "$out/tendril-linux-$arch")" "relay linux/$arch" "$(stat -c %s "$out/relay-linux-$arch/bootstrap")"
done
if command -v zip >/dev/null; then
  (cd "$out/relay-linux-arm64" && zip -q -X ../tendril-relay.zip bootstrap)
else
  python3 -c 'import sys,zipfile; z=zipfile.ZipFile(sys.argv[1],"w",zipfile.ZIP_DEFLATED); i=zipfile.ZipInfo("bootstrap",(1980,1,1,0,0,0)); i.external_attr=0o755<<16; i.compress_type=zipfile.ZIP_DEFLATED; z.writestr(i,open(sys.argv[2],"rb").read()); z.close()' "$out/tendril-relay.zip" "$out/relay-linux-arm64/bootstrap"
fi
echo "  relay Lambda zip: $out/tendril-relay.zip"

echo "== CloudFormation template"
bash scripts/validate-template.sh

echo "== systemd unit"
host_bin="$out/tendril-host"
go build -o "$host_bin" ./cmd/tendril
if command -v systemd-analyze >/dev/null; then
  home=$(mktemp -d)
  for mode in system user; do
    flag=(--run-as tendril); [ "$mode" = user ] && flag=(--user)
    TENDRIL_HOME="$home" "$host_bin" service install "${flag[@]}" --print --exec "$PWD/$host_bin" > "$out/tendril-$mode.service"
    # verify wants the unit's own file name.
    mkdir -p "$out/$mode"; cp "$out/tendril-$mode.service" "$out/$mode/tendril.service"
    systemd-analyze verify "$out/$mode/tendril.service"
    echo "  $mode unit: systemd-analyze verify passed"
  done
  rm -rf "$home"
else
  echo "  systemd-analyze not installed: unit not verified"
fi

echo "== image"
if [ "${TENDRIL_CI_BUILDAH:-1}" != 0 ] && command -v buildah >/dev/null; then
  for arch in arm64 amd64; do
    if buildah build --quiet --platform "linux/$arch" -t "tendril:ci-$arch" -f Dockerfile . >"$out/buildah-$arch.log" 2>&1; then
      size=$(buildah inspect --format '{{.FromImageID}}' "tendril:ci-$arch" >/dev/null 2>&1; buildah images --format '{{.Size}}' "tendril:ci-$arch" | head -1)
      echo "  linux/$arch image built: $size"
    else
      echo "  buildah could not build linux/$arch in this sandbox (see $out/buildah-$arch.log); skipped"
      tail -5 "$out/buildah-$arch.log" | sed 's/^/    /'
    fi
  done
else
  echo "  buildah not installed (or TENDRIL_CI_BUILDAH=0): image not built."
  echo "  The image is the binary plus CA roots and the example personas: about $(( ($(stat -c %s "$out/tendril-linux-arm64") + 250000) / 1048576 )) MB for linux/arm64."
fi
echo "ok: deployment checks passed"
