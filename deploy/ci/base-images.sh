#!/usr/bin/env bash
# The base images docker-compose.yml needs, made available without an image registry if need be.
# Prints the images to use as KEY=VALUE lines (BASE_IMAGE, POSTGRES_IMAGE) on stdout:
#   eval "$(deploy/ci/base-images.sh)"
# For each: the image already here, else pulled (when a registry answers within
# DAGSPEC_PULL_TIMEOUT s), else a stand-in built from Debian packages: debootstrap makes a
# bookworm root file system from the apt mirror this machine uses, `docker import` turns it into
# local/bookworm:base, and python.Dockerfile / postgres.Dockerfile build on it.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON_IMAGE=${DAGSPEC_PYTHON_IMAGE:-python:3.11-slim-bookworm}
PG_IMAGE=${DAGSPEC_POSTGRES_IMAGE:-postgres:16-bookworm}
PULL_TIMEOUT=${DAGSPEC_PULL_TIMEOUT:-20}
DEBIAN_BASE=local/bookworm:base
DOCKER=${DOCKER:-docker}

log() { echo "base-images: $*" >&2; }
have() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

apt_mirror() {
	# the first Debian (non-security) mirror of this machine's apt sources
	local uri
	uri=$( (grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}';
		grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}') |
		grep -v security | head -1)
	echo "${uri:-http://deb.debian.org/debian}"
}

debian_base() {
	have "$DEBIAN_BASE" && return
	local rootfs start mirror
	rootfs=$(mktemp -d /var/tmp/dagspec-rootfs.XXXXXX)
	mirror=$(apt_mirror)
	start=$SECONDS
	log "debootstrap bookworm from $mirror (about 1-2 min)"
	debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 ||
		{ tail -20 "$rootfs.log" >&2; exit 1; }
	tar -C "$rootfs" -c . | "$DOCKER" import - "$DEBIAN_BASE" >/dev/null
	rm -rf "$rootfs" "$rootfs.log"
	log "$DEBIAN_BASE imported in $((SECONDS - start)) s"
}

# usage: ensure IMAGE STAND_IN DOCKERFILE -> prints the image to use
ensure() {
	local image=$1 stand_in=$2 dockerfile=$3 start
	if have "$image"; then echo "$image"; return; fi
	if timeout "$PULL_TIMEOUT" "$DOCKER" pull -q "$image" >/dev/null 2>&1; then
		log "pulled $image"; echo "$image"; return
	fi
	if have "$stand_in"; then
		log "no registry answered for $image: using the stand-in $stand_in built earlier"; echo "$stand_in"; return
	fi
	log "no registry answered for $image within ${PULL_TIMEOUT} s: building the stand-in $stand_in"
	debian_base
	start=$SECONDS
	DOCKER_BUILDKIT=1 "$DOCKER" build -q -t "$stand_in" -f "$HERE/$dockerfile" "$HERE" >/dev/null
	log "$stand_in built in $((SECONDS - start)) s"
	echo "$stand_in"
}

echo "BASE_IMAGE=$(ensure "$PYTHON_IMAGE" local/python:3.11-slim-bookworm python.Dockerfile)"
echo "POSTGRES_IMAGE=$(ensure "$PG_IMAGE" local/postgres:15-bookworm postgres.Dockerfile)"
