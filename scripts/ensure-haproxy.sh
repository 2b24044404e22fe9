#!/bin/sh
# ensure-haproxy.sh: make sure Debian's haproxy, the real load balancer of
# node's HAProxy test, is installed (ensure-package.sh). `make test` runs it.
exec sh "$(dirname "$0")/ensure-package.sh" /usr/sbin/haproxy haproxy
