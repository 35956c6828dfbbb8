#!/usr/bin/env bash
# `make test-stack`: the real docker compose stack, tested for real (tests/stack/).
#  1. a Docker engine of our own (dockerd.sh: installs docker.io/debootstrap with apt if missing)
#  2. the base images, pulled or made from Debian packages (base-images.sh)
#  3. the project's image (Dockerfile), with this machine's extra CA certificates as a BuildKit
#     secret when it has any (/usr/local/share/ca-certificates/*.crt: an intercepting proxy's)
#  4. pytest tests/stack: compose up --wait, the pipelines, the faults, compose down
#  5. the engine stopped (its data root, hence the images, kept for the next run)
# Each phase's wall time is printed; DAGSPEC_KEEP_DOCKERD=1 leaves the engine running.
# `stack.sh images` does 1-3 only (.ci/run runs it in the background while the suite runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODE=all
if [ "${1:-}" = images ]; then MODE=images; shift; fi
PYTEST=${PYTEST:-.venv/bin/pytest}
t0=$SECONDS
t=$SECONDS
phase() { echo "stack: $1: $((SECONDS - t)) s"; t=$SECONDS; }

deploy/ci/dockerd.sh start
DOCKER_HOST=$(deploy/ci/dockerd.sh host)
export DOCKER_HOST
if [ "${DAGSPEC_KEEP_DOCKERD:-0}" != 1 ]; then
	trap 'deploy/ci/dockerd.sh stop' EXIT
fi
phase "docker engine"

# a CLI that can build with BuildKit: the docker CLI with buildx, else Debian's docker.io CLI
# (its built-in BuildKit client)
DOCKER=docker
if ! docker buildx version >/dev/null 2>&1 && [ -x /usr/bin/docker ]; then DOCKER=/usr/bin/docker; fi
export DOCKER

eval "$(deploy/ci/base-images.sh)"
export BASE_IMAGE POSTGRES_IMAGE
phase "base images ($BASE_IMAGE, $POSTGRES_IMAGE)"

secret=()
cas=(/usr/local/share/ca-certificates/*.crt)
if [ -z "${DAGSPEC_EXTRA_CA:-}" ] && [ -e "${cas[0]}" ]; then
	DAGSPEC_EXTRA_CA=$(mktemp /tmp/dagspec-extra-ca.XXXXXX.pem)
	cat "${cas[@]}" >"$DAGSPEC_EXTRA_CA"
	trap 'rm -f "$DAGSPEC_EXTRA_CA"; [ "${DAGSPEC_KEEP_DOCKERD:-0}" = 1 ] || deploy/ci/dockerd.sh stop' EXIT
fi
if [ -n "${DAGSPEC_EXTRA_CA:-}" ]; then secret=(--secret "id=extra_ca,src=$DAGSPEC_EXTRA_CA"); fi
DOCKER_BUILDKIT=1 "$DOCKER" build -q --build-arg "BASE_IMAGE=$BASE_IMAGE" "${secret[@]}" \
	-t "${DAGSPEC_IMAGE:-dagspec:local}" . >/dev/null
phase "image ${DAGSPEC_IMAGE:-dagspec:local}"
if [ "$MODE" = images ]; then
	echo "stack: images ready: $((SECONDS - t0)) s"
	exit 0
fi

DAGSPEC_STACK_TEST=1 "$PYTEST" -p no:xdist -p no:cacheprovider -m stack -s tests/stack "$@"
phase "tests/stack"
echo "stack: total: $((SECONDS - t0)) s"
