#!/bin/bash
# Make the DKMS source tree of the patched kvm, kvm-amd and kvm-intel modules.
#
#   kvm-patch/dkms/mkdkms.sh [--dest DIR] [--version VERSION]
#                            [--kernel-regex REGEX] [--allow-abi-break]
#                            [--install --kernel KVER]
#   kvm-patch/dkms/mkdkms.sh --check-series
#
# 1. Takes pristine Linux 6.12 at the version kvm-patch/linux-version pins
#    (Debian linux-source-6.12): read-only from the git copy
#    kvm-patch/build.sh keeps ($NAP_CACHE/src/linux-$KVER, tag "pristine")
#    if it is there, else from that version's tarball (lib.sh
#    linux_tarball).
#    Only Makefile, arch/x86/kvm, virt/kvm and the headers the series
#    changes are taken, into a scratch directory ($NAP_CACHE/dkms-work).
# 2. Applies kvm-patch/patches/ in the order of patches/series (git apply,
#    limited to those files).  Files under Documentation/ and tools/ are
#    left out; a patch that changes anything else (code built into the
#    kernel image or into other modules) stops the script: DKMS cannot
#    ship it.
# 3. Writes DIR (default /usr/src/nova-adaptive-paging-kvm-VERSION):
#    dkms.conf, Makefile, nap.mk, nap-abi.c, arch/x86/kvm and virt/kvm as
#    patched, arch/x86/kvm/Kbuild and the patched headers at their own
#    paths (found before the kernel's, see Kbuild).
#    VERSION defaults to $KVER-<first 8 hex of the series' sha256>.
#    REGEX (dkms.conf BUILD_EXCLUSIVE_KERNEL) defaults to the source's
#    release, e.g. ^6\.12\.118([^0-9]|$): any flavour of that release only,
#    because all other headers and the kernel image come from the target.
#    --allow-abi-break builds even if the series moves fields that the
#    kernel image reads (see Kbuild); the modules are then not sound.
# 4. --install: dkms add, build and install for KVER.
# --check-series only does the sorting of step 2 and prints the version,
# the kernel regex, the include roots and the shipped files (no sources
# needed).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
GITSRC=$CACHE/src/linux-$KVER
PKG=nova-adaptive-paging-kvm
DEST=
VERSION=
REGEX=
ALLOW_ABI_BREAK=0
INSTALL=0
KERNEL=
CHECK=0

while [ $# -gt 0 ]; do
	case "$1" in
	--dest) DEST=$2; shift 2 ;;
	--version) VERSION=$2; shift 2 ;;
	--kernel-regex) REGEX=$2; shift 2 ;;
	--allow-abi-break) ALLOW_ABI_BREAK=1; shift ;;
	--install) INSTALL=1; shift ;;
	--kernel) KERNEL=$2; shift 2 ;;
	--check-series) CHECK=1; shift ;;
	-h|--help) sed -n '/^set -euo/q; 2,$p' "$0"; exit 0 ;;
	*) echo "unknown argument: $1" >&2; exit 2 ;;
	esac
done

log() { echo "mkdkms.sh: $*" >&2; }
die() { log "$*"; exit 1; }

if [ "$INSTALL" = 1 ] && [ -z "$KERNEL" ]; then
	die "--install needs --kernel KVER"
fi

mapfile -t SERIES < <(series_patches)
[ "${#SERIES[@]}" -gt 0 ] || die "empty series"
if [ -z "$VERSION" ]; then
	sum=$(cd "$PATCH_DIR" && cat series "${SERIES[@]}" | sha256sum | cut -c1-8)
	VERSION=$KVER-$sum
fi
case "$VERSION" in
*[!A-Za-z0-9.+~_-]*|'') die "bad version: $VERSION" ;;
esac
[ -n "$REGEX" ] || REGEX="^${KVER//./\\.}([^0-9]|\$)"
[ -n "$DEST" ] || DEST=/usr/src/$PKG-$VERSION

# Files the series touches, sorted into what the tree ships.
mapfile -t TOUCHED < <(cd "$PATCH_DIR" && sed -n \
	's|^diff --git a/\([^ ]*\) b/\([^ ]*\)$|\1\n\2|p' "${SERIES[@]}" |
	sort -u)
SHIP=()      # files taken from the patched tree
HEADERS=()   # of those, headers that override the kernel's
for f in "${TOUCHED[@]}"; do
	case "$f" in
	Documentation/*|tools/*) ;;
	arch/x86/kvm/*|virt/kvm/*) SHIP+=("$f") ;;
	arch/x86/include/asm/kvm*.h|arch/x86/include/uapi/asm/kvm*.h|\
	include/linux/kvm*.h|include/uapi/linux/kvm*.h|include/kvm/*.h|\
	include/trace/events/kvm.h)
		SHIP+=("$f"); HEADERS+=("$f") ;;
	*) die "the series changes $f, which is not part of the KVM" \
		"modules: it needs a kernel built with the series" ;;
	esac
done
# Include roots, in the order of the kernel's LINUXINCLUDE.
INCDIRS=()
for d in arch/x86/include arch/x86/include/uapi include include/uapi; do
	for h in "${HEADERS[@]}"; do
		rest=${h#"$d"/}
		# A header belongs to the longest root: asm/..., linux/..., kvm/...
		if [ "$rest" != "$h" ] && [ "${rest%%/*}" != uapi ]; then
			INCDIRS+=("$d"); break
		fi
	done
done

if [ "$CHECK" = 1 ]; then
	echo "version $VERSION"
	echo "kernel-regex $REGEX"
	echo "include-dirs ${INCDIRS[*]}"
	printf 'ship %s\n' "${SHIP[@]}"
	exit 0
fi

WORK=$CACHE/dkms-work
mkdir -p "$WORK"
TMP=$(mktemp -d "$WORK/tree.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PRISTINE=$TMP/pristine
TREE=$TMP/tree
mkdir -p "$PRISTINE"

# 1. Pristine files (read-only use of the shared git copy).
TAKE=(Makefile arch/x86/kvm virt/kvm)
if git -C "$GITSRC" rev-parse -q --verify pristine^{commit} >/dev/null 2>&1
then
	for h in "${HEADERS[@]}"; do
		git -C "$GITSRC" cat-file -e "pristine:$h" 2>/dev/null &&
			TAKE+=("$h")
	done
	log "taking pristine $KVER from $GITSRC (tag pristine)"
	git -C "$GITSRC" archive --format=tar pristine -- "${TAKE[@]}" |
		tar -C "$PRISTINE" -xf -
else
	tarball=$(linux_tarball) || die "neither $GITSRC nor" \
		"$LINUX_SOURCE_PACKAGE $LINUX_DEBIAN_VERSION from apt"
	top=$( (tar -tJf "$tarball" || true) | head -1 | cut -d/ -f1)
	log "taking pristine sources from $tarball"
	tar -C "$PRISTINE" -xJf "$tarball" --strip-components=1 \
		"${TAKE[@]/#/$top/}" "$top/arch/x86/include" "$top/include"
fi
got=$(sed -n 's/^\(VERSION\|PATCHLEVEL\|SUBLEVEL\) = //p' \
	"$PRISTINE/Makefile" | paste -sd.)
[ "$got" = "$KVER" ] || die "expected Linux $KVER, the source is $got"

# 2. Apply the series to a copy, limited to the shipped files.
cp -a "$PRISTINE" "$TREE"
inc=()
for f in "${SHIP[@]}"; do inc+=("--include=$f"); done
for p in "${SERIES[@]}"; do
	GIT_CEILING_DIRECTORIES=$TMP git -C "$TREE" apply "${inc[@]}" \
		--exclude='*' "$PATCH_DIR/$p" || die "$p does not apply"
done
log "series applied: ${#SERIES[@]} patches, ${#SHIP[@]} module files"

# 3. The DKMS tree.
mkf=$TREE/arch/x86/kvm/Makefile
grep -o '$(srctree)/[^ ]*' "$mkf" "$TREE/virt/kvm/Makefile.kvm" |
	grep -v -E ':\$\(srctree\)/(arch/x86/kvm|virt/kvm/Makefile\.kvm)$' &&
	die "the KVM Makefiles refer to other kernel files; update Kbuild"
stage=$TMP/stage
mkdir -p "$stage/arch/x86" "$stage/virt"
cp -a "$TREE/arch/x86/kvm" "$stage/arch/x86/kvm"
cp -a "$TREE/virt/kvm" "$stage/virt/kvm"
sed 's|\$(srctree)/|$(NAP_TOP)/|g' "$mkf" > "$stage/arch/x86/kvm/Makefile.nap"
for h in "${HEADERS[@]}"; do
	install -D -m 0644 "$TREE/$h" "$stage/$h"
done
install -m 0644 "$HERE/Kbuild" "$stage/arch/x86/kvm/Kbuild"
install -m 0644 "$HERE/Makefile" "$HERE/nap-abi.c" "$stage/"
conf=$(< "$HERE/dkms.conf")
conf=${conf//'#MODULE_VERSION#'/"$VERSION"}
conf=${conf//'#KERNEL_REGEX#'/"$REGEX"}
printf '%s\n' "$conf" > "$stage/dkms.conf"
{
	echo "# Written by kvm-patch/dkms/mkdkms.sh."
	echo "NAP_SRC_VERSION := $KVER"
	echo "NAP_INCLUDE_DIRS := ${INCDIRS[*]}"
	echo "NAP_ALLOW_ABI_BREAK ?= $ALLOW_ABI_BREAK"
} > "$stage/nap.mk"
{
	echo "Linux $KVER (Debian $LINUX_SOURCE_PACKAGE $LINUX_DEBIAN_VERSION) with, in order:"
	for p in "${SERIES[@]}"; do
		echo "$(sha256sum < "$PATCH_DIR/$p" | cut -c1-16)  $p"
	done
} > "$stage/nap-series.txt"

if [ -e "$DEST" ]; then
	[ -f "$DEST/nap.mk" ] || [ -z "$(ls -A "$DEST")" ] ||
		die "$DEST exists and is not a tree of this script"
	log "replacing $DEST"
	rm -rf "$DEST"
fi
mkdir -p "$(dirname "$DEST")"
cp -a "$stage" "$DEST"
log "wrote $DEST (version $VERSION, kernels $REGEX)"

# 4. dkms.
if [ "$INSTALL" = 1 ]; then
	if dkms status -m "$PKG" -v "$VERSION" | grep -q .; then
		dkms remove -m "$PKG" -v "$VERSION" --all
	fi
	if [ "$DEST" != "/usr/src/$PKG-$VERSION" ]; then
		dkms add "$DEST"
	else
		dkms add -m "$PKG" -v "$VERSION"
	fi
	dkms build -m "$PKG" -v "$VERSION" -k "$KERNEL"
	dkms install -m "$PKG" -v "$VERSION" -k "$KERNEL"
fi
echo "$DEST"
