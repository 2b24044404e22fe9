#!/bin/sh
# ensure-chromium.sh: make sure Debian's chromium, which the browser tests
# (internal/testkit/chrometest) drive headless, is installed (ensure-package.sh),
# with fonts-noto-cjk: a bare Debian has no Japanese (or Chinese, Korean)
# font, and a page in Japanese would show empty boxes on its screenshots.
# `make test` runs it first.
set -eu
dir=$(dirname "$0")
sh "$dir/ensure-package.sh" /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc fonts-noto-cjk
exec sh "$dir/ensure-package.sh" /usr/bin/chromium chromium
