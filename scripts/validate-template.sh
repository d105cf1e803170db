#!/usr/bin/env bash
# Validates CloudFormation templates against the CloudFormation resource
# specification (npm @aws-cdk/aws-service-spec, pinned with js-yaml in
# scripts/validate-template/package-lock.json). The packages are installed
# here with `npm ci` into .cache/validate-template (gitignored) and reused
# while the lock file is unchanged. It also proves the checker catches
# mistakes: testdata/broken.yaml must fail with exactly 10 problems.
#
#   scripts/validate-template.sh [template.yaml...]   (default: deploy/agentcore/template.yaml)
set -euo pipefail
cd "$(dirname "$0")/.."

src=scripts/validate-template
dir=.cache/validate-template
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "validate-template: node and npm are required" >&2; exit 1
fi
if ! cmp -s "$src/package-lock.json" "$dir/package-lock.json" 2>/dev/null || [ ! -d "$dir/node_modules" ]; then
  mkdir -p "$dir"
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --cache "$PWD/../npm" --prefer-offline >/dev/null)
fi
check() { NODE_PATH="$dir/node_modules" node "$src/check.js" "$@"; }

if [ $# -eq 0 ]; then set -- deploy/agentcore/template.yaml; fi
check "$@"

if out=$(check "$src/testdata/broken.yaml" 2>&1); then
  echo "validate-template: the broken fixture passed; the checker is not checking" >&2; exit 1
fi
if ! grep -q '^10 problem(s)$' <<<"$out"; then
  echo "validate-template: the broken fixture should report 10 problems:" >&2; echo "$out" >&2; exit 1
fi
echo "ok: the checker reports every planted mistake in $src/testdata/broken.yaml"
