#!/usr/bin/env bash
# Build the static pod pause binary (runtime/pause) and print its path; the
# pause image is that one file.
exec "$(dirname "${BASH_SOURCE[0]}")/build-static.sh" rustpod-pause
