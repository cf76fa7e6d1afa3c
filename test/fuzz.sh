#!/usr/bin/env bash
# Runs every fuzz target of the module for the given time each (default 10s).
set -euo pipefail
time=${1:-10s}
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz: $pkg $target ($time)"
    go test -run='^$' -fuzz="^${target}\$" -fuzztime="$time" "$pkg"
  done
done
