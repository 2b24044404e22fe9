#!/bin/sh
# ensure-node.sh: make sure Node.js (20 or later, Debian's nodejs package)
# and npm are installed (ensure-package.sh), and that the relying-party
# libraries of internal/testkit/noderp (openid-client, oauth4webapi, jose),
# the accessibility rules of internal/testkit/axe (axe-core), the
# single-page app library of internal/testkit/spa (oidc-client-ts, which the
# test's pages load from node_modules in Chromium) and the native-app
# library of internal/testkit/native (@openid/appauth) and the upstream
# OpenID provider of internal/testkit/oidcprovider (oidc-provider, an OpenID
# Certified provider nobody here wrote, which the federation tests sign in
# at) are installed at the versions their package-lock.json locks (npm ci,
# from the npm registry; no package downloads a browser). `make test` runs
# it first.
set -eu
here=$(dirname "$0")
sh "$here/ensure-package.sh" /usr/bin/node nodejs
command -v npm >/dev/null 2>&1 || sh "$here/ensure-package.sh" /usr/bin/npm npm
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
	echo "ensure-node: node $(node --version) is too old; openid-client 6 needs 20 or later" >&2
	exit 1
fi
for kit in noderp axe spa native oidcprovider; do
	dir="$here/../internal/testkit/$kit"
	# npm ci only when the lock file changed since the last install.
	if [ ! -f "$dir/node_modules/.package-lock.json" ] || ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.oidcd-lock"; then
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
		cp "$dir/package-lock.json" "$dir/node_modules/.oidcd-lock"
	fi
done
