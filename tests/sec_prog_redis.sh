#!/bin/sh
# sec_prog_redis: redis-server (loopback only) under cagemalloc is loaded by
# redis-benchmark, then 10,000 keys are written and read back and must all be
# there; the same checks pass against a plain server too.
. "$(dirname "$0")/sec_prog_lib.sh"
need redis-server
need redis-cli
need redis-benchmark

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

exercise() { # preload
    port=$(free_port)
    LD_PRELOAD="$1" redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
        --daemonize no --dir "$work" > "$work/server.log" 2>&1 &
    server=$!
    tries=0
    until redis-cli -p "$port" ping > /dev/null 2>&1; do
        tries=$((tries + 1))
        [ $tries -lt 100 ] || { echo "redis-server did not start" >&2; cat "$work/server.log" >&2; kill $server; exit 1; }
        sleep 0.1
    done
    timeout 120 redis-benchmark -h 127.0.0.1 -p "$port" -q -n 20000 -P 16 -t set,get,lpush,lpop,incr > "$work/bench.log"
    i=0
    while [ $i -lt 10000 ]; do printf 'SET key:%d value-%d-%d\r\n' $i $i $((i * 7919)); i=$((i + 1)); done |
        timeout 60 redis-cli -p "$port" --pipe > /dev/null
    count=$(redis-cli -p "$port" eval "local n = 0 for i = 0, 9999 do if redis.call('GET', 'key:' .. i) == 'value-' .. i .. '-' .. (i * 7919) then n = n + 1 end end return n" 0)
    redis-cli -p "$port" shutdown nosave > /dev/null 2>&1 || true
    wait $server || true
    [ "$count" = 10000 ] || { echo "only $count of 10000 keys read back (LD_PRELOAD=$1)" >&2; exit 1; }
    grep -q "requests per second" "$work/bench.log" || { echo "redis-benchmark failed" >&2; exit 1; }
}

exercise ""
exercise "$CM_LIB"
echo "redis: benchmark load and 10,000 keys written and read back under cagemalloc"
