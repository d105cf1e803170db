#!/usr/bin/env bash
# The whole test suite: formatting, vet, and every test with the race
# detector. Tests that need PostgreSQL (127.0.0.1:5432) or Redis
# (127.0.0.1:6379) skip with a message when those are unreachable.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 -timeout 20m ./... "$@"
