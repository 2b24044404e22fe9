#!/bin/sh
# ensure-chromium.sh: make sure Debian's chromium, which the browser tests
# (internal/chrometest) drive headless, is installed. A no-op when
# /usr/bin/chromium exists; otherwise installs the package with apt-get,
# through sudo when not root. `make test` runs it first.
set -eu

if [ -x /usr/bin/chromium ]; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure-chromium: /usr/bin/chromium missing and no apt-get; install Chromium by hand" >&2
	exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "ensure-chromium: /usr/bin/chromium missing; run as root: apt-get install chromium" >&2
		exit 1
	fi
fi
echo "ensure-chromium: installing chromium" >&2
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
test -x /usr/bin/chromium
