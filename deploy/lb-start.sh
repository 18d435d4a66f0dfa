#!/bin/sh
# The load balancer in front of the replicas: checks every KVLAB_* setting (a wrong one stops the start with one
# line naming it, exit 2), writes deploy/haproxy.cfg with one `server` line per replica, then runs HAProxy on it.
# The compose file's `lb` service runs this script in the haproxy image; tests/test_deploy.py runs it here.
#
#   KVLAB_REPLICAS           comma-separated host:port of every replica (required), e.g. app1:8501,10.0.0.12:8501;
#                            replicas on other hosts are listed the same way
#   KVLAB_LB_ADDRESS         address to listen on (default 0.0.0.0)
#   KVLAB_LB_PORT            port to listen on (default 8080)
#   KVLAB_LB_STATS_ADDRESS   address of the stats page /stats (default 127.0.0.1: not public)
#   KVLAB_LB_STATS_PORT      its port (default 8404)
#   KVLAB_LB_HTTP_TIMEOUT    longest wait for a plain request's client or server (default 5m)
#   KVLAB_LB_TUNNEL_TIMEOUT  longest idle time of an open websocket (default 4h: a long lesson)
#   KVLAB_LB_CHECK_INTERVAL  time between health checks of each replica (default 2s; 2 failures mark it DOWN)
#   KVLAB_LB_CHECK_TIMEOUT   how long one health check may wait for its answer (default 10s: a busy replica is
#                            slow, not dead; a crashed one refuses the connection at once)
#   KVLAB_LB_MAXCONN         connections the load balancer holds at once (default 4096)
#   KVLAB_REPLICA_MAXCONN    connections one replica gets at once; more wait in HAProxy's queue (default 256)
#   KVLAB_LB_RUNDIR          where the written config goes (default /tmp)
#   KVLAB_HAPROXY           the haproxy program (default: haproxy on the PATH)
#   KVLAB_LB_CHECK_ONLY=1    write and check the config, then exit (no HAProxy left running)
set -eu
here="$(cd "$(dirname "$0")" && pwd)"

fail() { echo "deploy/lb-start.sh: $*" >&2; exit 2; }

whole() {  # name value lo hi: a whole number in [lo, hi]
    case "$2" in
        '' | *[!0-9]*) fail "$1 must be a whole number from $3 to $4, got '$2'" ;;
    esac
    if [ "${#2}" -gt 9 ] || [ "$2" -lt "$3" ] || [ "$2" -gt "$4" ]; then
        fail "$1 must be a whole number from $3 to $4, got '$2'"
    fi
}

duration() {  # name value: HAProxy's time format, a whole number and a unit
    case "$2" in
        *[!0-9a-z]* | '' ) fail "$1 must be a duration such as 30s, 5m or 4h, got '$2'" ;;
    esac
    num="${2%ms}"; num="${num%[smhd]}"
    case "$num" in
        '' | *[!0-9]*) fail "$1 must be a duration such as 30s, 5m or 4h, got '$2'" ;;
    esac
    [ "$num" != "$2" ] || fail "$1 must be a duration with its unit (ms, s, m, h or d), got '$2'"
}

address() {  # name value: an IP address or host name, nothing else
    case "$2" in
        '' | *[!0-9A-Za-z.:_-]*) fail "$1 must be an IP address or host name, got '$2'" ;;
    esac
}

: "${KVLAB_LB_ADDRESS:=0.0.0.0}" "${KVLAB_LB_PORT:=8080}"
: "${KVLAB_LB_STATS_ADDRESS:=127.0.0.1}" "${KVLAB_LB_STATS_PORT:=8404}"
: "${KVLAB_LB_HTTP_TIMEOUT:=5m}" "${KVLAB_LB_TUNNEL_TIMEOUT:=4h}" "${KVLAB_LB_CHECK_INTERVAL:=2s}"
: "${KVLAB_LB_CHECK_TIMEOUT:=10s}"
: "${KVLAB_LB_MAXCONN:=4096}" "${KVLAB_REPLICA_MAXCONN:=256}" "${KVLAB_LB_RUNDIR:=/tmp}"
address KVLAB_LB_ADDRESS "$KVLAB_LB_ADDRESS"
whole KVLAB_LB_PORT "$KVLAB_LB_PORT" 1 65535
address KVLAB_LB_STATS_ADDRESS "$KVLAB_LB_STATS_ADDRESS"
whole KVLAB_LB_STATS_PORT "$KVLAB_LB_STATS_PORT" 1 65535
[ "$KVLAB_LB_STATS_PORT" != "$KVLAB_LB_PORT" ] || fail "KVLAB_LB_STATS_PORT must differ from KVLAB_LB_PORT ($KVLAB_LB_PORT)"
duration KVLAB_LB_HTTP_TIMEOUT "$KVLAB_LB_HTTP_TIMEOUT"
duration KVLAB_LB_TUNNEL_TIMEOUT "$KVLAB_LB_TUNNEL_TIMEOUT"
duration KVLAB_LB_CHECK_INTERVAL "$KVLAB_LB_CHECK_INTERVAL"
duration KVLAB_LB_CHECK_TIMEOUT "$KVLAB_LB_CHECK_TIMEOUT"
whole KVLAB_LB_MAXCONN "$KVLAB_LB_MAXCONN" 1 1000000
whole KVLAB_REPLICA_MAXCONN "$KVLAB_REPLICA_MAXCONN" 1 100000
[ -d "$KVLAB_LB_RUNDIR" ] && [ -w "$KVLAB_LB_RUNDIR" ] || fail "KVLAB_LB_RUNDIR must be a writable folder, got '$KVLAB_LB_RUNDIR'"

# One `server` line per replica: name rN, its address, and the cookie value that sends a session back to it.
[ -n "${KVLAB_REPLICAS:-}" ] || fail "KVLAB_REPLICAS must list the replicas as host:port,host:port (it is empty)"
servers=""
n=0
old_ifs="$IFS"; IFS=','
for replica in $KVLAB_REPLICAS; do
    IFS="$old_ifs"
    n=$((n + 1))
    host="${replica%:*}"
    port="${replica##*:}"
    [ "$host" != "$replica" ] || fail "KVLAB_REPLICAS entry $n must be host:port, got '$replica' (no port)"
    address "KVLAB_REPLICAS entry $n's host" "$host"
    whole "KVLAB_REPLICAS entry $n's port" "$port" 1 65535
    servers="${servers}    server r$n $host:$port cookie r$n
"
    IFS=','
done
IFS="$old_ifs"
[ "$n" -ge 1 ] || fail "KVLAB_REPLICAS must list at least one replica as host:port"
[ "$n" -le 64 ] || fail "KVLAB_REPLICAS lists $n replicas; at most 64"
export KVLAB_LB_ADDRESS KVLAB_LB_PORT KVLAB_LB_STATS_ADDRESS KVLAB_LB_STATS_PORT KVLAB_LB_HTTP_TIMEOUT \
    KVLAB_LB_TUNNEL_TIMEOUT KVLAB_LB_CHECK_INTERVAL KVLAB_LB_CHECK_TIMEOUT KVLAB_LB_MAXCONN KVLAB_REPLICA_MAXCONN

config="$KVLAB_LB_RUNDIR/kvlab-haproxy.cfg"
marker="    # @servers@"
written=0
: > "$config"
while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
        "$marker"*) printf '%s' "$servers" >> "$config"; written=1 ;;
        *) printf '%s\n' "$line" >> "$config" ;;
    esac
done < "$here/haproxy.cfg"
[ "$written" = 1 ] || fail "deploy/haproxy.cfg has no '# @servers@' line to put the replicas on"

"${KVLAB_HAPROXY:-haproxy}" -c -q -f "$config" || fail "HAProxy refused $config (its message is above)"
[ "${KVLAB_LB_CHECK_ONLY:-0}" != 1 ] || { echo "deploy/lb-start.sh: $config is valid ($n replicas)"; exit 0; }
exec "${KVLAB_HAPROXY:-haproxy}" -db -f "$config"
