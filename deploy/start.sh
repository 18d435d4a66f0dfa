#!/bin/sh
# One replica of the lab, as the image runs it (its CMD), as the compose file's replicas run it and as
# tests/test_deploy.py runs it: `streamlit run app/main.py` with the repository's .streamlit/config.toml, plus only
# what a deployment adds. A wrong setting stops the start with one line naming it (exit 2).
#
#   KVLAB_ADDRESS      address the replica listens on (default 0.0.0.0: every interface, as in a container)
#   KVLAB_PORT         its port (default 8501)
#   KVLAB_PUBLIC_HOST  the host name students type (default localhost); it is Streamlit's browser.serverAddress,
#                      which also keeps Streamlit from asking an outside service for this machine's external IP
#                      at start (it does so when it listens on every interface and no address is named)
#   KVLAB_PUBLIC_PORT  the port students type (default: KVLAB_PORT; 80 or 443 behind a load balancer)
#   KVLAB_THREADS      torch threads, and so work-queue slots, of this replica (default 1: one core per replica)
#   KVLAB_PYTHON       the Python that runs Streamlit (default: python on the PATH)
#   KVLAB_CHECK_ONLY=1 check the settings, then exit (nothing started)
# Any further arguments are passed to `streamlit run` (e.g. --server.baseUrlPath lab).
set -eu
cd "$(dirname "$0")/.."

fail() { echo "deploy/start.sh: $*" >&2; exit 2; }

whole() {  # name value lo hi: a whole number in [lo, hi]
    case "$2" in
        '' | *[!0-9]*) fail "$1 must be a whole number from $3 to $4, got '$2'" ;;
    esac
    if [ "${#2}" -gt 9 ] || [ "$2" -lt "$3" ] || [ "$2" -gt "$4" ]; then
        fail "$1 must be a whole number from $3 to $4, got '$2'"
    fi
}

address() {  # name value: an IP address or host name, nothing else (no scheme, no port, no path)
    case "$2" in
        '' | *[!0-9A-Za-z.:_-]*) fail "$1 must be an IP address or host name, got '$2'" ;;
    esac
}

: "${KVLAB_ADDRESS:=0.0.0.0}" "${KVLAB_PORT:=8501}" "${KVLAB_PUBLIC_HOST:=localhost}" "${KVLAB_THREADS:=1}"
: "${KVLAB_PUBLIC_PORT:=$KVLAB_PORT}" "${KVLAB_PYTHON:=python}"
address KVLAB_ADDRESS "$KVLAB_ADDRESS"
whole KVLAB_PORT "$KVLAB_PORT" 1 65535
case "$KVLAB_PUBLIC_HOST" in
    '' | *[!0-9A-Za-z.-]*) fail "KVLAB_PUBLIC_HOST must be a bare host name or IPv4 address (no scheme, port or path), got '$KVLAB_PUBLIC_HOST'" ;;
esac
whole KVLAB_PUBLIC_PORT "$KVLAB_PUBLIC_PORT" 1 65535
whole KVLAB_THREADS "$KVLAB_THREADS" 1 256
[ -f .streamlit/config.toml ] || fail "no .streamlit/config.toml in $(pwd): start the replica from the lab's folder"

[ "${KVLAB_CHECK_ONLY:-0}" != 1 ] || { echo "deploy/start.sh: settings are valid"; exit 0; }

# torch reads KVLAB_THREADS (sim/work/threads.py); OpenMP and MKL pools get the same count, so a replica never
# spins more threads than the one core it is given.
export KVLAB_THREADS OMP_NUM_THREADS="$KVLAB_THREADS" MKL_NUM_THREADS="$KVLAB_THREADS"
exec "$KVLAB_PYTHON" -m streamlit run app/main.py \
    --server.address "$KVLAB_ADDRESS" --server.port "$KVLAB_PORT" \
    --browser.serverAddress "$KVLAB_PUBLIC_HOST" --browser.serverPort "$KVLAB_PUBLIC_PORT" "$@"
