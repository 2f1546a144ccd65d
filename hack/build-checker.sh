#!/usr/bin/env bash
# Build the static conformance checker (tests/checker) that tests copy into
# container rootfses, and print its path.
exec "$(dirname "${BASH_SOURCE[0]}")/build-static.sh" rustpod-checker
