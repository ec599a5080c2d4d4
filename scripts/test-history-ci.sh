#!/usr/bin/env bash
# Run by scripts/test.sh.
exec bash "$(dirname "$0")/history-ci.sh" "$@"
