#!/usr/bin/env bash
# The whole test suite: formatting, vet, and every test with the race
# detector, and a tidy go.mod/go.sum. Tests that need PostgreSQL
# (TENDRIL_TEST_DATABASE_URL, default 127.0.0.1:5432 db test) or Redis
# (TENDRIL_TEST_REDIS, default 127.0.0.1:6379) skip with a message when
# those are unreachable; with CI=true they fail instead (internal/testenv).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go mod tidy -diff"
# Fails, printing the diff, when go.mod or go.sum is not what `go mod tidy`
# would write. It changes nothing; run `go mod tidy` to fix.
if ! go mod tidy -diff; then
  echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 -timeout 20m ./... "$@"
