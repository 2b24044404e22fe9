#!/bin/sh
# ensure-chromium.sh: make sure Debian's chromium, which the browser tests
# (internal/testkit/chrometest) drive headless, is installed (ensure-package.sh).
# `make test` runs it first.
exec sh "$(dirname "$0")/ensure-package.sh" /usr/bin/chromium chromium
