#!/bin/sh
# ensure-package.sh FILE PACKAGE: make sure Debian's PACKAGE, which
# provides FILE (a program, or a data file such as a font), is installed.
# A no-op when FILE exists; otherwise
# installs the package with apt-get, through sudo when not root. The
# tests that need a real program (Chromium, HAProxy) call it through
# `make test`.
set -eu
bin=$1
pkg=$2
if [ -e "$bin" ]; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure-package: $bin missing and no apt-get; install $pkg by hand" >&2
	exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "ensure-package: $bin missing; run as root: apt-get install $pkg" >&2
		exit 1
	fi
fi
echo "ensure-package: installing $pkg" >&2
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$pkg"
test -e "$bin"
