#!/bin/bash
# Build the patched Linux 6.12 LTS kernel and KVM modules for the tests.
#
#   kvm-patch/build.sh [--variant test|debug] [--no-build] [--selftests]
#                      [--dev] [--mutation FILE]
#
# 1. Takes Debian's linux-source-6.12 at the version kvm-patch/linux-version
#    pins (the installed package's tarball if it is that version, else
#    the package apt downloads into the cache) and keeps one unpacked copy
#    as a git repository in the cache, tagged "pristine".
# 2. Resets that copy to "pristine" and applies kvm-patch/patches/ in the
#    order of kvm-patch/patches/series with "git am" (so "applies to
#    the pinned pristine source" is checked on every run).  Files the series does
#    not touch keep their timestamps, so the object directory stays warm.
#    --mutation FILE then applies FILE (kvm-patch/mutations/), a defect
#    planted on purpose that the selftests must catch (tox -e
#    kvm-mutation); use it with a NAP_CACHE of its own, as that env does.
# 3. Runs scripts/checkpatch.pl --strict on every patch and writes the
#    result to $OUT/checkpatch.txt.
# 4. Configures (x86_64 defconfig + kvm_guest.config + config/kvm-test.config,
#    plus config/debug.config for --variant debug) and builds bzImage and
#    modules out of tree with ccache.  With --selftests it also installs
#    the UAPI headers and builds the static KVM selftests.  The test
#    guest's modules in guest/fakes are built beside them.
#
# Nothing is written to the checkout: source, objects, ccache and logs
# live under $NAP_CACHE (default /var/cache/nova-adaptive-paging).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
SRC=$CACHE/src/linux-$KVER
VARIANT=test
BUILD=1
SELFTESTS=0
DEV=0
MUTATION=
JOBS=${NAP_JOBS:-2}

while [ $# -gt 0 ]; do
	case "$1" in
	--variant) VARIANT=$2; shift 2 ;;
	--no-build) BUILD=0; shift ;;
	--selftests) SELFTESTS=1; shift ;;
	--dev) DEV=1; shift ;;
	--mutation) MUTATION=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
	-h|--help) sed -n '2,27p' "$0"; exit 0 ;;
	*) echo "unknown argument: $1" >&2; exit 2 ;;
	esac
done

OBJ=$BUILD_ROOT/$VARIANT
OUT=$OUT_ROOT/$VARIANT
export CCACHE_DIR=$CACHE/ccache
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
mkdir -p "$CACHE/src" "$OBJ" "$OUT" "$CCACHE_DIR"

log() { echo "build.sh: $*" >&2; }

# One build at a time per cache: step 2 resets the shared source tree,
# which would pull the files from under another run's compiler.
cache_lock build "build.sh: waiting for another build.sh on $CACHE"

# 1. Pinned source.
if [ ! -d "$SRC/.git" ]; then
	tarball=$(linux_tarball)
	tmp=$(mktemp -d "$CACHE/src/unpack.XXXXXX")
	log "unpacking $tarball ($LINUX_SOURCE_PACKAGE $LINUX_DEBIAN_VERSION)"
	tar -C "$tmp" -xf "$tarball"
	sub=$(ls "$tmp")
	got=$(make -s -C "$tmp/$sub" kernelversion)
	if [ "$got" != "$KVER" ]; then
		log "expected Linux $KVER, the package holds $got"
		rm -rf "$tmp"
		exit 1
	fi
	(
		cd "$tmp/$sub"
		git init -q
		# Debian's top-level .gitignore ignores everything ("/*").
		git add -f -A .
		git -c user.name=pristine -c user.email=pristine@localhost \
			commit -q -m "Linux $KVER (Debian $LINUX_SOURCE_PACKAGE $LINUX_DEBIAN_VERSION)"
		git tag pristine
	)
	mv "$tmp/$sub" "$SRC"
	rmdir "$tmp"
fi

# 2. Apply the series to pristine (--dev: build the tree as it is, for
#    working on the series in $SRC itself).
cd "$SRC"
if [ "$DEV" = 1 ]; then
	n=$(git rev-list --count pristine..HEAD)
	log "--dev: building $SRC as it is ($n commits on pristine)"
	PATCHES=()
else
	if [ -n "$(git status --porcelain --ignored)" ] &&
	   [ "${NAP_FORCE:-0}" != 1 ]; then
		log "$SRC has uncommitted changes; commit them or NAP_FORCE=1"
		exit 1
	fi
	git am --abort >/dev/null 2>&1 || true
	git checkout -q -f -B nap-build pristine
	git clean -q -f -d -x
	mapfile -t PATCHES < <(series_patches)
	for p in "${PATCHES[@]}"; do
		log "applying $p"
		git -c user.name=series -c user.email=series@localhost \
			am -q --committer-date-is-author-date \
			"$HERE/patches/$p"
	done
	log "series applied: ${#PATCHES[@]} patches on pristine $KVER"
	if [ -n "$MUTATION" ]; then
		git apply "$MUTATION"
		git -c user.name=series -c user.email=series@localhost \
			commit -q -a -m "mutation: $(basename "$MUTATION")"
		log "mutation applied: $MUTATION"
	fi
fi

# 3. checkpatch.
: > "$OUT/checkpatch.txt"
for p in "${PATCHES[@]}"; do
	{
		echo "=== $p"
		PATH=/usr/bin:/bin:$PATH ./scripts/checkpatch.pl --strict \
			--no-color --show-types --terse \
			"$HERE/patches/$p" 2>&1 | sed "s|^$HERE/patches/||" || true
	} >> "$OUT/checkpatch.txt"
done
grep -E '^(total:|=== )' "$OUT/checkpatch.txt" >&2 || true

[ "$BUILD" = 1 ] || exit 0

# 4. Configure and build.
frags=("$HERE/config/kvm-test.config")
[ "$VARIANT" = debug ] && frags+=("$HERE/config/debug.config")
cfgsum=$(cat "${frags[@]}" | sha256sum | cut -c1-16)
if [ ! -f "$OBJ/.config" ] || [ "$(cat "$OBJ/.nap-config" 2>/dev/null)" != \
		"$cfgsum" ]; then
	log "configuring $VARIANT"
	make -s O="$OBJ" x86_64_defconfig kvm_guest.config >/dev/null
	./scripts/kconfig/merge_config.sh -m -O "$OBJ" "$OBJ/.config" \
		"${frags[@]}" >/dev/null
	make -s O="$OBJ" olddefconfig
	# Kconfig drops an option whose dependencies are off without a word:
	# every option the fragments ask for must be in the result.
	missing=$(grep -h -E '^CONFIG_[A-Z0-9_]+=' "${frags[@]}" |
		grep -v -x -F -f "$OBJ/.config" || true)
	if [ -n "$missing" ]; then
		log "the configuration lacks what config/ asks for:" $missing
		exit 1
	fi
	echo "$cfgsum" > "$OBJ/.nap-config"
fi
start=$(date +%s)
make -s -j"$JOBS" O="$OBJ" CC="ccache gcc" bzImage modules \
	> "$OUT/make.log" 2>&1 || { tail -50 "$OUT/make.log" >&2; exit 1; }
log "kernel built in $(( $(date +%s) - start )) s ($OBJ)"
grep -E 'warning:' "$OUT/make.log" >&2 || true
# guest/fakes: the test guest's stand-ins for Hyper-V and for a device
# without snoop control, built out of tree from a copy (kbuild writes its
# objects beside the sources).
rsync -a --delete "$HERE/guest/fakes/" "$OUT/fakes/"
make -s O="$OBJ" M="$OUT/fakes" CC="ccache gcc" modules \
	>> "$OUT/make.log" 2>&1 || { tail -20 "$OUT/make.log" >&2; exit 1; }

if [ "$SELFTESTS" = 1 ]; then
	start=$(date +%s)
	make -s O="$OBJ" headers_install INSTALL_HDR_PATH="$OUT/usr" \
		>> "$OUT/make.log" 2>&1
	ccache gcc -static -O2 -Wall -isystem "$OUT/usr/include" \
		-o "$OUT/fakes/nap_noncoherent" \
		"$HERE/guest/fakes/nap_noncoherent.c" >> "$OUT/make.log" 2>&1 ||
		{ tail -20 "$OUT/make.log" >&2; exit 1; }
	make -s -j"$JOBS" -C tools/testing/selftests/kvm \
		OUTPUT="$OUT/selftests" CC="ccache gcc" \
		KHDR_INCLUDES="-isystem $OUT/usr/include" \
		EXTRA_CFLAGS="-static" \
		> "$OUT/selftests.log" 2>&1 || \
		{ tail -50 "$OUT/selftests.log" >&2; exit 1; }
	log "selftests built in $(( $(date +%s) - start )) s"
fi
