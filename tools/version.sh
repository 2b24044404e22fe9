#!/bin/sh
# version.sh prints the version of the oidcd source tree it sits in: what
# `make build` stamps into the binary (-X main.version=...; `oidcd
# version`, /metrics' oidcd_build_info) and `make package` turns into the
# .deb's version. RELEASES explains the scheme; tools/packaging
# TestVersionScheme checks it in a scratch repository.
#
#   0.2.0                   the commit that last changed VERSION, clean
#   0.2.0+git.5.1a2b3c4     5 commits after that one (1a2b3c4 is HEAD)
#   0.2.0+git.5.1a2b3c4.dirty   ... with files changed or added since
#   0.2.0+shallow.1a2b3c4   a shallow clone: the commits cannot be counted
#   0.2.0+nogit             no git history (a source archive)
#
# dpkg --compare-versions and semantic-version tools both order these as
# builds of main follow each other, until VERSION is bumped.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd -P)

v=$(tr -d ' \t\r\n' <VERSION)
if ! printf '%s\n' "$v" | grep -Eqx '(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)'; then
	echo "version.sh: VERSION holds \"$v\"; want MAJOR.MINOR.PATCH, e.g. 0.2.0" >&2
	exit 1
fi

# Reading only: never take git's optional index lock (another git command
# may be running in this tree).
export GIT_OPTIONAL_LOCKS=0
top=$(git rev-parse --show-toplevel 2>/dev/null || true)
if [ -z "$top" ] || [ "$(cd "$top" && pwd -P)" != "$root" ]; then
	echo "$v+nogit"
	exit 0
fi
hash=$(git rev-parse --short HEAD 2>/dev/null || true)
if [ -z "$hash" ]; then
	echo "$v+nogit"
	exit 0
fi
dirty=
if [ -n "$(git status --porcelain 2>/dev/null | head -n 1)" ]; then
	dirty=.dirty
fi
if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
	echo "$v+shallow.$hash$dirty"
	exit 0
fi
base=$(git log -1 --format=%H -- VERSION)
count=0
if [ -n "$base" ]; then
	count=$(git rev-list --count "$base..HEAD")
fi
if [ "$count" = 0 ] && [ -n "$base" ] && [ -z "$dirty" ]; then
	echo "$v"
else
	echo "$v+git.$count.$hash$dirty"
fi
