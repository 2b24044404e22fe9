#!/bin/sh
# ensure-smtp.sh: make sure Debian's Exim (exim4-daemon-light, the GnuTLS
# build) is installed (ensure-package.sh). The mail tests
# (internal/testkit/smtptest) start their own exim on 127.0.0.1 with a
# generated config and CA; the package's own daemon is not used, so it is
# stopped and kept from listening on port 25. OpenSMTPD, which conflicts
# with every other MTA and cannot do TLS under OpenSSL 3 on Debian 12, is
# purged first when present. `make test` runs it first.
set -eu
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
	SUDO="sudo"
fi
if [ ! -x /usr/sbin/exim4 ] && command -v dpkg-query >/dev/null 2>&1 &&
	dpkg-query -W -f='${Status}' opensmtpd 2>/dev/null | grep -q 'install ok installed'; then
	echo "ensure-smtp: purging opensmtpd (conflicts with exim4)" >&2
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get purge -y opensmtpd
fi
sh "$(dirname "$0")/ensure-package.sh" /usr/sbin/exim4 exim4-daemon-light
# The system daemon: not wanted. Stop it whichever way the machine runs
# services (systemd, sysvinit, or none at all in a container).
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	$SUDO systemctl disable --now exim4 >/dev/null 2>&1 || true
elif [ -x /etc/init.d/exim4 ]; then
	$SUDO /etc/init.d/exim4 stop >/dev/null 2>&1 || true
fi
if [ -r /run/exim4/exim.pid ]; then
	$SUDO kill "$(cat /run/exim4/exim.pid)" 2>/dev/null || true
fi
exit 0
