#!/bin/bash
# Boot the kernel built by kvm-patch/build.sh under Bochs, which emulates
# Intel VMX with EPT (QEMU emulates none), with the test guest's initramfs
# (kvm-intel instead of kvm-amd), run kvm-patch/guest/init in it and print
# its report.  Bochs 2.7 has no direct kernel boot: the kernel and the
# initramfs go on an isolinux ISO.
#
#   kvm-patch/bochs/run.sh [--variant test|debug] [--timeout S] [--ips N]
#                          [--vendor intel|amd] [--cpu MODEL] [--smp N]
#                          [--megs M] [--linux] [KEY=VALUE...]
#
# --vendor amd emulates AMD SVM instead (an FX-4100, "zambezi": SVM with
# NPT, NRIP save, flush by ASID and pause filter; no VMCB clean bits,
# decode assists or virtual VMLOAD/VMSAVE) and loads kvm-amd: a second
# emulator of the SVM half beside QEMU's TCG.  It runs NPT, not shadow
# paging: its VMRUN does not load the guest's CR2 from the VMCB, so every
# #PF KVM injects arrives with a stale CR2 (kvm-patch/doc/findings.md, "Known
# failure: a Linux guest OS under nested TCG").
#
# --linux boots a Linux guest OS with QEMU/KVM (Debian's kernel,
# guest/linux-init) from the Debian root of tcg/run.sh, which Bochs, with
# no 9p, gets as a second CD (ISO 9660 with Rock Ridge, /dev/sr1).
#
# KEY=VALUE pairs go on the guest's kernel command line (see guest/init),
# e.g. nap.modes=shadow nap.tests=guest_print_test.  Exit status as
# tcg/run.sh.  Bochs interprets every instruction: a selftest runs an
# order of magnitude slower than under TCG or worse, so pick small ones.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
VARIANT=test
TIMEOUT=3000
IPS=100000000
VENDOR=intel
CPU=
SMP=2
MEGS=1024
EXTRA=()
LINUX=
while [ $# -gt 0 ]; do
	case "$1" in
	--linux) LINUX=1; EXTRA+=(nap.linux=1 nap.root=sr1); shift ;;
	--variant) VARIANT=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--ips) IPS=$2; shift 2 ;;
	--vendor) VENDOR=$2; shift 2 ;;
	--cpu) CPU=$2; shift 2 ;;
	--smp) SMP=$2; shift 2 ;;
	--megs) MEGS=$2; shift 2 ;;
	*) EXTRA+=("$1"); shift ;;
	esac
done

case "$VENDOR" in
intel) KVM_MOD=kvm-intel; CPU=${CPU:-corei7_skylake_x}; TAG=bochs ;;
amd) KVM_MOD=kvm-amd; CPU=${CPU:-zambezi}; TAG=bochs-svm ;;
*) echo "bochs/run.sh: --vendor $VENDOR: expected intel or amd" >&2; exit 2 ;;
esac
OBJ=$BUILD_ROOT/$VARIANT
OUT=$OUT_ROOT/$VARIANT
ISOLINUX=/usr/lib/ISOLINUX/isolinux.bin
LDLINUX=/usr/lib/syslinux/modules/bios/ldlinux.c32

tmp=$(mktemp -d /tmp/nap-bochs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/iso/isolinux"
make_initramfs "$tmp/iso/initrd.gz" "$OBJ" "$OUT/selftests" \
	"$GUEST_SELFTESTS" virt/lib/irqbypass.ko arch/x86/kvm/kvm.ko \
	"arch/x86/kvm/$KVM_MOD.ko"
cp "$OBJ/arch/x86/boot/bzImage" "$tmp/iso/bzImage"
CDROM2=
if [ -n "$LINUX" ]; then
	ROOTFS=$CACHE/rootfs
	debian_rootfs "$ROOTFS"
	linux_guest "$ROOTFS/opt/nap-linux"
	xorriso -as mkisofs -quiet -R -o "$tmp/root.iso" "$ROOTFS" 2>/dev/null
	CDROM2="ata0-slave: type=cdrom, path=$tmp/root.iso, status=inserted"
fi
cp "$ISOLINUX" "$LDLINUX" "$tmp/iso/isolinux/"
# Bochs's TSC counts one tick per instruction, at "ips" a second, while
# its CPU model claims 3.5 GHz: a kernel that believed the model would
# see one guest second in 35 of Bochs's, and every timed wait (the
# sampler's intervals, the selftests' sleeps) would take 35 times the
# instructions.  paging_switch_abi_test locked down took about 14
# minutes that way and 39 s with the TSC's true rate.
# idle=halt: an idle CPU of the host waits in HLT, not in MWAIT.  A task
# woken onto an MWAIT-idle CPU is announced by a locked store to the
# monitored thread flags instead of an IPI (set_nr_if_polling()), and
# Bochs can miss that store: CPU 0 then slept with the wakeup queued
# until RCU's stall detector sent an NMI, 21 s of guest time later
# ("rcu_preempt kthread starved ... ->state=0x200", i.e. TASK_WAKING;
# "NMI backtrace for cpu 0 skipped: idling at mwait_idle"), twice in about
# 27 runs of paging_switch_abi_test.  A halted CPU is woken by an IPI.
cat > "$tmp/iso/isolinux/isolinux.cfg" <<CFG
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  KERNEL /bzImage
  INITRD /initrd.gz
  APPEND console=ttyS0,115200 panic=-1 quiet nap.vendor=$VENDOR tsc_early_khz=$((IPS / 1000)) idle=halt ${EXTRA[*]}
CFG
xorriso -as mkisofs -quiet -o "$tmp/boot.iso" -b isolinux/isolinux.bin \
	-c isolinux/boot.cat -no-emul-boot -boot-load-size 4 \
	-boot-info-table "$tmp/iso" 2>/dev/null

log=$OUT/$TAG-$(date +%Y%m%d-%H%M%S).log
sed -e "s|@CPU@|$CPU|" -e "s|@SMP@|$SMP|" -e "s|@IPS@|$IPS|" -e "s|@MEGS@|$MEGS|g" \
	-e "s|@ISO@|$tmp/boot.iso|" -e "s|@SERIAL@|$log|" \
	-e "s|@LOG@|$tmp/bochs.log|" "$HERE/bochsrc.in" > "$tmp/bochsrc"
[ -z "$CDROM2" ] || echo "$CDROM2" >> "$tmp/bochsrc"
: > "$log"
# Debian's Bochs has its debugger built in: "c" starts the machine, and
# the debugger quits on /dev/null when the guest powers off.
printf 'c\n' > "$tmp/debugger.rc"
start=$(date +%s)
timeout --kill-after=10 "$TIMEOUT" bochs -q -f "$tmp/bochsrc" \
	-rc "$tmp/debugger.rc" < /dev/null > "$tmp/bochs.out" 2>&1 &
bpid=$!
# Bochs normally quits at the guest's power-off; end it if it does not.
done_at=
stopped=
while kill -0 "$bpid" 2>/dev/null; do
	if [ -z "$done_at" ] && grep -aq '^NAP-DONE' "$log"; then
		done_at=$(date +%s)
	fi
	if [ -n "$done_at" ] && [ $(( $(date +%s) - done_at )) -ge 30 ]; then
		kill "$bpid" 2>/dev/null || true
		stopped=" (stopped by run.sh 30 s after NAP-DONE)"
		break
	fi
	sleep 2
done
brc=0
wait "$bpid" 2>/dev/null || brc=$?
emulator_status "Bochs$stopped" "$brc" "$start"
guest_report "$log" "$tmp/bochs.out" "$tmp/bochs.log"
