#!/bin/sh
# Entrypoint of OpenSandbox sandbox containers (/opt/opensandbox/bootstrap.sh) for the project's
# execd stand-in. Behaviour follows upstream's bootstrap.sh (checked 2026-11-29, execd 1.0.18):
#   * EXECD (default /opt/opensandbox/execd) is started in the background; its output goes to
#     EXECD_LOG (default /tmp/execd.log).
#   * Not upstream's: the testbed's daemon is a Python program (a zip application). When
#     EXECD_PYTHON (default /opt/opensandbox/python/execd-python, the interpreter folder the
#     testbed's servers bind into every sandbox) is there, the daemon runs with it, so an image
#     without python3 (busybox) works too and the image's own python never matters; without it,
#     the daemon's `#!/usr/bin/env python3` line picks the image's python3.
#   * EXECD_ENVS (default /opt/opensandbox/.env) is created if missing and exported; execd layers
#     its KEY=VALUE lines over its own environment for every command.
#   * EXECD_BOOTSTRAP_PRE_SCRIPT, if set and readable, is sourced before execd starts.
#   * BOOTSTRAP_CMD, or arguments "-c CMD", run CMD with bash (sh if no bash); otherwise the
#     arguments are exec'd; with no arguments at all the container idles with tail -f /dev/null.
# Not reproduced: the egress MITM CA trust-store setup (OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT),
# and upstream's wait-and-forward-SIGTERM wrapper (here the command is exec'd, so it receives
# signals directly as PID 1's replacement).
set -e

EXECD="${EXECD:-/opt/opensandbox/execd}"
EXECD_LOG="${EXECD_LOG:-/tmp/execd.log}"
EXECD_ENVS="${EXECD_ENVS:-/opt/opensandbox/.env}"
mkdir -p "$(dirname "$EXECD_ENVS")" 2>/dev/null || echo "warning: cannot create dir for EXECD_ENVS=$EXECD_ENVS" >&2
touch "$EXECD_ENVS" 2>/dev/null || echo "warning: cannot touch EXECD_ENVS=$EXECD_ENVS" >&2
export EXECD_ENVS

if [ -n "${EXECD_BOOTSTRAP_PRE_SCRIPT:-}" ]; then
	if [ -r "$EXECD_BOOTSTRAP_PRE_SCRIPT" ]; then
		case "$EXECD_BOOTSTRAP_PRE_SCRIPT" in
		*/*) . "$EXECD_BOOTSTRAP_PRE_SCRIPT" ;;
		*) . "./$EXECD_BOOTSTRAP_PRE_SCRIPT" ;;
		esac
	else
		echo "warning: EXECD_BOOTSTRAP_PRE_SCRIPT=$EXECD_BOOTSTRAP_PRE_SCRIPT not readable" >&2
	fi
fi

EXECD_PYTHON="${EXECD_PYTHON:-/opt/opensandbox/python/execd-python}"
if [ -x "$EXECD_PYTHON" ]; then
	echo "starting execd at $EXECD with $EXECD_PYTHON (log: $EXECD_LOG)"
	"$EXECD_PYTHON" "$EXECD" >>"$EXECD_LOG" 2>&1 </dev/null &
else
	echo "starting execd at $EXECD (log: $EXECD_LOG)"
	"$EXECD" >>"$EXECD_LOG" 2>&1 </dev/null &
fi

if command -v bash >/dev/null 2>&1; then SHELL_BIN="bash"; else SHELL_BIN="sh"; fi
SHELL_BIN="${BOOTSTRAP_SHELL:-$SHELL_BIN}"

# Like upstream, stay as the container's first process instead of exec-ing the command: a shell
# that waits reaps orphaned processes (no zombies pile up under PID 1) and passes TERM/INT on.
supervise() {
	"$@" &
	child=$!
	trap 'kill -TERM "$child" 2>/dev/null' TERM INT
	while kill -0 "$child" 2>/dev/null; do
		wait "$child"
		status=$?
	done
	exit "${status:-0}"
}

if [ -n "${BOOTSTRAP_CMD:-}" ]; then
	supervise "$SHELL_BIN" -c "$BOOTSTRAP_CMD"
fi
if [ $# -ge 1 ] && [ "$1" = "-c" ]; then
	shift
	supervise "$SHELL_BIN" -c "$*"
fi
if [ $# -eq 0 ]; then
	supervise tail -f /dev/null
fi
supervise "$@"
