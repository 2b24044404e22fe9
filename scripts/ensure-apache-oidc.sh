#!/bin/sh
# ensure-apache-oidc.sh: make sure Debian's apache2 and its OpenID Connect
# module, libapache2-mod-auth-openidc, are installed (ensure-package.sh).
# node's Apache test (node/modauthopenidc_test.go) runs them with the
# recipe deploy/apache/oidcd-mod_auth_openidc.conf, in a configuration of
# its own; the package's own site is not used. `make test` runs it first.
set -eu
here=$(dirname "$0")
sh "$here/ensure-package.sh" /usr/sbin/apache2 apache2
module=/usr/lib/apache2/modules/mod_auth_openidc.so
if [ ! -f "$module" ]; then
	# ensure-package.sh checks for an executable, which a module is not:
	# it installs the package, then its own check fails, and this one
	# below decides.
	sh "$here/ensure-package.sh" "$module" libapache2-mod-auth-openidc || true
	if [ ! -f "$module" ]; then
		echo "ensure-apache-oidc: $module missing after installing libapache2-mod-auth-openidc" >&2
		exit 1
	fi
fi
