#!/usr/bin/env bash
# Upload load test: 50 concurrent clients upload 1,000-entry scans (each twice) to one server
# while readers load HTML pages (overview, kernel search, kernel, entry) and the JSON API; prints
# uploads/s and read p50/p99 per kind, then verifies every scan is stored exactly once. Knobs (env): CLIENTS, ENTRIES, SCANS, READERS.
#   scripts/upload-load.sh            # release build, the full load
#   CLIENTS=5 scripts/upload-load.sh  # a quick look
#   PROFILE=dev scripts/upload-load.sh  # reuse the test build (deps are optimised in dev too)
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --profile "${PROFILE:-release}" --bench upload_load
