#!/bin/bash
# Boot the kernel built by kvm-patch/build.sh under QEMU TCG with an
# initramfs of busybox, the patched KVM modules and the static upstream
# KVM selftests, run kvm-patch/guest/init in it and print its report.
#
#   kvm-patch/tcg/run.sh [--variant test|debug] [--timeout S] [--conformance]
#                        [KEY=VALUE...]
#
# KEY=VALUE pairs go on the guest's kernel command line, e.g.
# nap.modes=storm nap.tests=dirty_log_test.  Exit status 0 if every
# selftest passed (or skipped), the guest reached "NAP-DONE" and its
# kernel log holds no warning.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
ROOTFS=
VARIANT=test
TIMEOUT=1500
EXTRA=()
VIRTFS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--conformance)
		# A Debian root with python3 (debootstrap, cached) and this
		# checkout's nova_adaptive_paging, shared with the guest.
		ROOTFS=$CACHE/rootfs
		if [ ! -x "$ROOTFS/usr/bin/python3" ]; then
			mirror=$(debian_mirror)
			debootstrap --variant=minbase --include=python3 bookworm \
				"$ROOTFS" "$mirror" >&2
		fi
		mkdir -p "$ROOTFS/opt/nap"
		rsync -a --delete --exclude __pycache__ \
			"$HERE/../../nova_adaptive_paging" "$ROOTFS/opt/nap/"
		VIRTFS=(-virtfs "local,path=$ROOTFS,mount_tag=nap,security_model=none,readonly=on")
		EXTRA+=(nap.conformance=1)
		shift ;;
	--variant) VARIANT=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	*) EXTRA+=("$1"); shift ;;
	esac
done

OBJ=$CACHE/build/$VARIANT
OUT=$CACHE/out/$VARIANT
ST=$OUT/selftests
make_initramfs "$OUT/initramfs.cpio.gz" "$OBJ" "$ST" "$GUEST_SELFTESTS" \
	virt/lib/irqbypass.ko arch/x86/kvm/kvm.ko arch/x86/kvm/kvm-amd.ko

log=$OUT/tcg-$(date +%Y%m%d-%H%M%S).log
start=$(date +%s)
qrc=0
timeout "$TIMEOUT" qemu-system-x86_64 -accel tcg,thread=single -cpu EPYC \
	-m 2G -smp 2 -kernel "$OBJ/arch/x86/boot/bzImage" \
	-initrd "$OUT/initramfs.cpio.gz" "${VIRTFS[@]}" \
	-append "console=ttyS0 panic=-1 quiet ${EXTRA[*]}" \
	-nographic -no-reboot < /dev/null > "$log" 2>&1 || qrc=$?
# QEMU's own errors go to the console log too: guest_report shows its
# tail if the guest did not finish.
emulator_status QEMU "$qrc" "$start"
guest_report "$log"
