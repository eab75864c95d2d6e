# Shared by kvm-patch/build.sh, tcg/run.sh, bochs/run.sh and dkms/mkdkms.sh
# (sourced).  The pinned source, the cache, the series file and the test
# guest's initramfs are defined here only.

# Debian's Linux 6.12 as the series is written against: the package
# version pinned in linux-version (NAP_LINUX_DEBIAN_VERSION overrides it;
# "newest" is the newest the archive serves: tox -e kvm-newest), the
# kernel version it holds and the packages of that version.
LINUX_DEBIAN_VERSION=${NAP_LINUX_DEBIAN_VERSION:-$(grep -v -e '^#' -e '^[[:space:]]*$' \
	"$(dirname "${BASH_SOURCE[0]}")/linux-version")}
LINUX_SOURCE_PACKAGE=linux-source-6.12
if [ "$LINUX_DEBIAN_VERSION" = newest ]; then
	LINUX_DEBIAN_VERSION=$(apt-cache madison "$LINUX_SOURCE_PACKAGE" |
		awk -F'|' '{gsub(/ /, "", $2); print $2}' | sort -V | tail -n 1)
	if [ -z "$LINUX_DEBIAN_VERSION" ]; then
		echo "lib.sh: apt serves no $LINUX_SOURCE_PACKAGE" \
			"(run apt-get update)" >&2
		return 1 2>/dev/null || exit 1
	fi
fi
KVER=${LINUX_DEBIAN_VERSION%%-*}
# Debian's ABI name of that kernel (its headers' and image's packages).
KABI=$KVER+deb12-amd64
LINUX_HEADERS_PACKAGE=linux-headers-$KABI
# The source tarball of that version: the installed package's when it is
# that version, else extracted from the package apt downloads into the
# cache (linux_tarball).
TARBALL=/usr/src/linux-source-6.12.tar.xz
# Sources, objects, ccache and logs: never in the checkout.  Objects and
# outputs are per kernel version, so that tox -e kvm-newest leaves the
# gate's warm.
CACHE=${NAP_CACHE:-/var/cache/nova-adaptive-paging}
BUILD_ROOT=$CACHE/build/$KVER
OUT_ROOT=$CACHE/out/$KVER
PATCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/patches

# The patch file names of the series, in order, one per line.
series_patches() {
	grep -v -e '^#' -e '^[[:space:]]*$' "$PATCH_DIR/series" || true
}

# linux_tarball: the path of the source tarball of LINUX_DEBIAN_VERSION:
# the installed linux-source-6.12's if that is the version (.ci/run
# installs it so), else the one in that version's package, which apt
# downloads into the cache once.
linux_tarball() {
	local debs=$CACHE/debs deb installed
	installed=$(dpkg-query -W -f='${Version}' "$LINUX_SOURCE_PACKAGE" \
		2>/dev/null || true)
	if [ "$installed" = "$LINUX_DEBIAN_VERSION" ] && [ -f "$TARBALL" ]; then
		echo "$TARBALL"
		return
	fi
	mkdir -p "$debs/linux-source-$LINUX_DEBIAN_VERSION"
	deb=$(ls "$debs/${LINUX_SOURCE_PACKAGE}_${LINUX_DEBIAN_VERSION}_"*.deb \
		2>/dev/null | head -n 1 || true)
	if [ -z "$deb" ]; then
		(cd "$debs" && apt-get download -q -o APT::Sandbox::User=root \
			"$LINUX_SOURCE_PACKAGE=$LINUX_DEBIAN_VERSION" >&2) ||
			return 1
		deb=$(ls "$debs/${LINUX_SOURCE_PACKAGE}_${LINUX_DEBIAN_VERSION}_"*.deb |
			head -n 1)
	fi
	[ -f "$debs/linux-source-$LINUX_DEBIAN_VERSION/usr/src/linux-source-6.12.tar.xz" ] ||
		dpkg-deb --fsys-tarfile "$deb" |
		tar -x -C "$debs/linux-source-$LINUX_DEBIAN_VERSION" \
			./usr/src/linux-source-6.12.tar.xz
	echo "$debs/linux-source-$LINUX_DEBIAN_VERSION/usr/src/linux-source-6.12.tar.xz"
}

# debian_mirror: the Debian archive this machine's apt is configured with
# (NAP_DEBIAN_MIRROR overrides it), for debootstrap of the bookworm root:
# a machine behind a proxy or a local mirror reaches no other.
debian_mirror() {
	local uri=${NAP_DEBIAN_MIRROR:-}
	[ -n "$uri" ] || uri=$(apt-get indextargets --format '$(REPO_URI)' \
		'Identifier: Packages' 'Codename: bookworm' 'Component: main' \
		'Origin: Debian' 2>/dev/null | head -n 1)
	if [ -z "$uri" ]; then
		echo "lib.sh: no Debian bookworm archive in apt's sources" \
			"(run apt-get update, or set NAP_DEBIAN_MIRROR)" >&2
		return 1
	fi
	echo "$uri"
}

# What the Debian root of tcg/run.sh --conformance, --agent, --validate
# and --linux (and bochs/run.sh --linux) holds: the interface's
# conformance suite needs python3, the agent's end-to-end step libvirtd
# with its QEMU driver, QEMU and the agent's dependencies, validate.yml
# the nova-paging command (click), all as Debian packages them
# (python3-ply: a dependency through a virtual package, which debootstrap
# does not resolve).
ROOT_PACKAGES=python3,python3-ply,python3-libvirt,python3-oslo.config,\
python3-oslo.log,python3-oslo.privsep,python3-prometheus-client,\
python3-keystoneauth1,python3-yaml,python3-bcrypt,python3-click,\
libvirt-daemon,libvirt-clients,qemu-system-x86

# debian_rootfs DIR: the Debian root of ROOT_PACKAGES at DIR
# (debootstrap from debian_mirror, cached; a root cached by an older list
# is built again) with this checkout's nova_adaptive_paging at
# DIR/opt/nap.
debian_rootfs() {
	local dir=$1
	(
	cache_lock rootfs "lib.sh: waiting for the Debian root in $CACHE"
	if [ "$(cat "$dir/.nap-packages" 2>/dev/null)" != "$ROOT_PACKAGES" ]
	then
		rm -rf "$dir"
		debootstrap --variant=minbase --include="$ROOT_PACKAGES" \
			bookworm "$dir" "$(debian_mirror)" >&2
		echo "$ROOT_PACKAGES" > "$dir/.nap-packages"
	fi
	mkdir -p "$dir/opt/nap"
	rsync -a --delete --exclude __pycache__ \
		"$(dirname "${BASH_SOURCE[0]}")/../nova_adaptive_paging" \
		"$dir/opt/nap/"
	)
}

# cache_lock NAME MESSAGE: take $CACHE/NAME.lock, saying MESSAGE on
# stderr if another holder makes us wait; held until the calling shell or
# subshell exits.  rootfs: the TCG and the Bochs host boot side by side
# from one cache (tox -e kvm), and both may want the Debian root (re)built
# or the Linux guest OS unpacked at the same time.
cache_lock() {
	local fd
	exec {fd}> "$CACHE/$1.lock"
	if ! flock -n "$fd"; then
		echo "$2" >&2
		flock "$fd"
	fi
}

# The Linux guest OS that the test guests boot with QEMU/KVM (guest/init,
# nap.linux=1): Debian's kernel for the release packages.txt builds
# against, as apt fetches it from this machine's archive.
LINUX_GUEST_PACKAGE=linux-image-$KABI-unsigned

# linux_guest DIR: DIR/vmlinuz (from LINUX_GUEST_PACKAGE, downloaded once
# into the cache; or NAP_LINUX_KERNEL, a bzImage whose System.map one has,
# to find where a guest stopped) and DIR/initramfs.cpio.gz (busybox,
# guest/linux-init).
linux_guest() {
	local dir=$1 debs=$CACHE/debs deb root
	(
	cache_lock rootfs "lib.sh: waiting for the Debian root in $CACHE"
	mkdir -p "$dir" "$debs"
	if [ -n "${NAP_LINUX_KERNEL:-}" ]; then
		cp "$NAP_LINUX_KERNEL" "$dir/vmlinuz"
	else
		deb=$(ls "$debs/${LINUX_GUEST_PACKAGE}_"*.deb 2>/dev/null |
			head -n 1 || true)
		if [ -z "$deb" ]; then
			(cd "$debs" && apt-get download -q \
				-o APT::Sandbox::User=root \
				"$LINUX_GUEST_PACKAGE=$LINUX_DEBIAN_VERSION" >&2)
			deb=$(ls "$debs/${LINUX_GUEST_PACKAGE}_"*.deb | head -n 1)
		fi
		dpkg-deb --fsys-tarfile "$deb" |
			tar -xO --wildcards './boot/vmlinuz-*' > "$dir/vmlinuz"
	fi
	root=$(busybox_root linux-init)
	pack_initramfs "$root" "$dir/initramfs.cpio.gz"
	)
}

# The upstream KVM selftests the test guests run (guest/init), in order.
GUEST_SELFTESTS="kvm_create_max_vcpus set_memory_region_test guest_print_test
kvm_binary_stats_test demand_paging_test dirty_log_test kvm_page_table_test
memslot_modification_stress_test"

# busybox_root INIT: a new directory (mktemp) with bin/busybox and
# guest/INIT as /init, the start of a test guest's initramfs.  Callers
# run it in $(...), where set -e does not reach: it fails, and removes
# the directory, by itself.
busybox_root() {
	local root
	root=$(mktemp -d /tmp/nap-initramfs.XXXXXX) || return
	if ! { mkdir -p "$root/bin" && cp /bin/busybox "$root/bin/busybox" &&
	       install -m 0755 "$(dirname "${BASH_SOURCE[0]}")/guest/$1" \
			"$root/init"; }; then
		rm -rf "$root"
		return 1
	fi
	echo "$root"
}

# pack_initramfs ROOT OUT: ROOT as a gzipped newc cpio archive at OUT;
# ROOT is removed.
pack_initramfs() {
	(cd "$1" && find . | cpio -o -H newc --quiet | gzip -1) > "$2"
	rm -rf "$1"
}

# make_initramfs OUT OBJ ST TESTS MODULE...
# Write the test guest's initramfs to OUT (gzipped cpio): busybox,
# guest/init, the KVM modules (kbuild paths under OBJ), the upstream
# selftests TESTS (listed in /selftests/list) and the series' own
# selftests, from the selftest build ST.
make_initramfs() {
	local out=$1 obj=$2 st=$3 tests=$4 root m t f
	shift 4
	root=$(busybox_root init)
	mkdir -p "$root"/{modules,selftests}
	for m in "$@"; do
		if [ ! -f "$obj/$m" ]; then
			echo "make_initramfs: $obj/$m not built" >&2
			rm -rf "$root"
			return 1
		fi
		cp "$obj/$m" "$root/modules/"
	done
	# The stand-ins of guest/fakes and their check (build.sh builds them
	# beside ST).
	cp "$st"/../fakes/nap_fake_*.ko "$root/modules/"
	cp "$st/../fakes/nap_noncoherent" "$root/selftests/"
	: > "$root/selftests/list"
	for t in $tests; do
		f=$st/$t
		[ -f "$f" ] || f=$st/x86_64/$t
		if [ ! -f "$f" ]; then
			echo "make_initramfs: selftest $t not built" >&2
			rm -rf "$root"
			return 1
		fi
		cp "$f" "$root/selftests/$t"
		echo "$t" >> "$root/selftests/list"
	done
	for t in paging_mode_test paging_switch_storm_test paging_switch_abi_test \
		paging_switch_latency_test paging_switch_cr0_test \
		paging_switch_cr3_test paging_switch_access_test \
		paging_switch_remap_test paging_switch_memcg_test \
		paging_switch_pmu_test paging_switch_cost_test \
		paging_switch_pae_test paging_switch_walk_test \
		paging_switch_cpuid_test paging_switch_nested_test; do
		if [ -f "$st/x86_64/$t" ]; then
			cp "$st/x86_64/$t" "$root/selftests/"
		fi
	done
	pack_initramfs "$root" "$out"
}

# emulator_status NAME RC START: one line on stderr saying how the
# emulator ended (timeout(1)'s 124 and 128+N for a signal spelled out)
# and how long it ran since START (seconds since the epoch).
emulator_status() {
	local name=$1 rc=$2 how
	case $rc in
	0) how="exited normally" ;;
	124) how="was stopped by its timeout" ;;
	12[89]|1[3-9][0-9]) how="died of signal $((rc - 128))" ;;
	*) how="exited with status $rc" ;;
	esac
	echo "run.sh: $name $how after $(( $(date +%s) - $3 )) s" >&2
}

# guest_report LOG [FILE...]: print the test guest's NAP- lines from its
# console log; fail unless it reached NAP-DONE with no failed test, no
# setup error and no kernel warning.  A guest that did not finish (the
# emulator died, the kernel panicked, the timeout struck) is explained on
# stderr by the tail of its console log and of each FILE (the emulator's
# own output and log): that is what a test shows, not an empty report.
guest_report() {
	local log=$1 f
	shift
	# No NAP- line at all is what a dead emulator leaves: explain it below
	# rather than let set -e end the script here.
	grep -a '^NAP-' "$log" | tr -d '\r' || true
	if ! grep -aq '^NAP-DONE' "$log"; then
		echo "guest did not finish, log $log" >&2
		for f in "$log" "$@"; do
			[ -s "$f" ] || continue
			echo "--- last lines of $f" >&2
			tail -n 25 "$f" | tr -d '\r' | cut -c 1-300 >&2
		done
		return 1
	fi
	! grep -aq -e '^NAP-RESULT .* FAIL' -e '^NAP-DMESG' -e '^NAP-ERROR' \
		-e '^NAP-CONFORMANCE .* FAIL' "$log"
}
