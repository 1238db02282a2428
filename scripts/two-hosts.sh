#!/usr/bin/env bash
# The two-host harness is scripts/hosts.sh (two hosts unless `up DIR --hosts N` says more).
exec "$(dirname "$0")/hosts.sh" "$@"
