#!/bin/bash
# The Debian packages of the pinned kernel (kvm-patch/linux-version), as
# `apt-get install` arguments, one per line: the source the series is
# built from and the headers the DKMS package is built against.  .ci/run
# installs exactly these.
#
#   kvm-patch/pinned-packages.sh
#
# Exit status 1 and one line on stderr if apt no longer serves the pinned
# version of one of them (or of the image the test guests boot), naming
# the pinned version, the newest served and the line to change: Debian's
# security archive keeps a handful of point releases and then drops the
# oldest, and a gate that waits for a kernel build to find that out
# wastes its first minutes and says less.  Run after apt-get update.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

served() {
	apt-cache madison "$1" 2>/dev/null |
		awk -F'|' '{gsub(/ /, "", $2); print $2}' | sort -V
}

for pkg in "$LINUX_SOURCE_PACKAGE" "$LINUX_HEADERS_PACKAGE" \
	"$LINUX_GUEST_PACKAGE"; do
	if ! served "$pkg" | grep -qxF "$LINUX_DEBIAN_VERSION"; then
		newest=$(served "$LINUX_SOURCE_PACKAGE" | tail -n 1)
		echo "kvm-patch/linux-version pins Debian's Linux" \
			"$LINUX_DEBIAN_VERSION, but apt no longer serves $pkg" \
			"at that version (newest $LINUX_SOURCE_PACKAGE:" \
			"${newest:-none}); run tox -e kvm-newest, then change" \
			"that file's last line to ${newest:-the version it passed}" >&2
		exit 1
	fi
done
echo "$LINUX_SOURCE_PACKAGE=$LINUX_DEBIAN_VERSION"
echo "$LINUX_HEADERS_PACKAGE=$LINUX_DEBIAN_VERSION"
