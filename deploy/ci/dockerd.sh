#!/usr/bin/env bash
# A Docker engine of our own for CI: `dockerd.sh start` installs docker.io with apt when missing
# and starts dockerd with its own data root, exec root, pidfile and socket under
# $DAGSPEC_DOCKER_ROOT (default /var/lib/dagspec-ci-docker; the data root is kept, so a second run
# on the same machine finds its images); `dockerd.sh stop` stops that daemon and nothing else.
# Print the socket to use: `export DOCKER_HOST=$(deploy/ci/dockerd.sh host)`.
set -euo pipefail
ROOT=${DAGSPEC_DOCKER_ROOT:-/var/lib/dagspec-ci-docker}
RUN=$ROOT/run
SOCK=$RUN/docker.sock
PIDFILE=$RUN/docker.pid
HOST=unix://$SOCK

need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "dockerd.sh: $1 needs root (dockerd, apt-get); run it as root or start a Docker engine yourself and set DOCKER_HOST" >&2
		exit 1
	fi
}

install_missing() {
	local missing=()
	command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
	command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
	if [ ${#missing[@]} -gt 0 ]; then
		need_root "installing ${missing[*]}"
		echo "dockerd.sh: installing ${missing[*]} with apt"
		# one apt at a time: make test may be installing chromium meanwhile (.ci/run)
		flock /var/lock/dagspec-apt.lock apt-get update -qq >/dev/null
		DEBIAN_FRONTEND=noninteractive flock /var/lock/dagspec-apt.lock \
			apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
}

running() {
	[ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

start() {
	install_missing
	if running; then
		echo "dockerd.sh: dockerd already running (pid $(cat "$PIDFILE")), $HOST"
		return
	fi
	need_root "starting dockerd"
	mkdir -p "$ROOT/data" "$ROOT/exec" "$RUN"
	# setsid: its own process group, so stopping it never touches the caller's
	setsid dockerd --data-root "$ROOT/data" --exec-root "$ROOT/exec" --pidfile "$PIDFILE" \
		--host "$HOST" >"$RUN/dockerd.log" 2>&1 </dev/null &
	for _ in $(seq 60); do
		if DOCKER_HOST=$HOST docker version >/dev/null 2>&1; then
			echo "dockerd.sh: dockerd up (pid $(cat "$PIDFILE")), $HOST, data root $ROOT/data"
			return
		fi
		sleep 1
	done
	echo "dockerd.sh: dockerd did not answer within 60 s; last lines of $RUN/dockerd.log:" >&2
	tail -20 "$RUN/dockerd.log" >&2
	exit 1
}

stop() {
	if ! running; then
		echo "dockerd.sh: no dockerd of ours is running"
		return
	fi
	local pid
	pid=$(cat "$PIDFILE")
	kill -TERM "$pid"
	for _ in $(seq 30); do
		kill -0 "$pid" 2>/dev/null || { echo "dockerd.sh: dockerd stopped"; return; }
		sleep 1
	done
	echo "dockerd.sh: dockerd (pid $pid) still running after 30 s: SIGKILL" >&2
	kill -KILL "$pid" 2>/dev/null || true
}

case "${1:-}" in
	start) start ;;
	stop) stop ;;
	host) echo "$HOST" ;;
	*) echo "usage: $0 start|stop|host" >&2; exit 2 ;;
esac
