#!/bin/sh
# ensure-slapd.sh: make sure Debian's OpenLDAP server (slapd, with slapadd
# and the schema files) is installed (ensure-package.sh). The directory
# tests (internal/testkit/ldaptest) start their own slapd on 127.0.0.1 with a
# generated CA; the package's own instance is not used. `make test` runs
# it first.
exec sh "$(dirname "$0")/ensure-package.sh" /usr/sbin/slapd slapd
