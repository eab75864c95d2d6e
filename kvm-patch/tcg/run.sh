#!/bin/bash
# Boot the kernel built by kvm-patch/build.sh under QEMU TCG with an
# initramfs of busybox, the patched KVM modules and the static upstream
# KVM selftests, run kvm-patch/guest/init in it and print its report.
#
#   kvm-patch/tcg/run.sh [--variant test|debug] [--timeout S] [--conformance]
#                        [--agent DIR] [--validate] [--linux]
#                        [--thread single|multi] [KEY=VALUE...]
#
# --conformance runs the interface's conformance suite and --agent the
# agent's end-to-end step (guest/agent_e2e.py, its inputs from DIR) in a
# Debian root shared over 9p; --linux boots a Linux guest OS there with
# QEMU/KVM (Debian's kernel, guest/linux-init).
#
# --thread is QEMU's TCG threading.  "single" (the default) runs both
# vCPUs on one host thread, so the gate's TCG host takes one core and
# Bochs the other; a Linux guest OS stalls there, with or without the
# series (kvm-patch/doc/findings.md, "Known failure: a Linux guest OS under
# nested TCG").  "multi" gives each vCPU a thread of its own, and a core
# when there is one; a Linux guest OS then keeps its vCPUs on host CPU 1
# (see below).
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
AGENT_INPUTS=
VALIDATE=
LINUX=
THREAD=single
while [ $# -gt 0 ]; do
	case "$1" in
	--conformance)
		ROOTFS=$CACHE/rootfs
		EXTRA+=(nap.conformance=1)
		shift ;;
	--validate)
		# The Ansible collection's validate.yml in the emulated host
		# (guest/init, nap.validate=1): the operator's check that the
		# patch works on this CPU.
		ROOTFS=$CACHE/rootfs
		VALIDATE=1
		EXTRA+=(nap.validate=1)
		shift ;;
	--agent)
		# The agent end to end (guest/agent_e2e.py) from the inputs in
		# DIR (tests/kernel/agent_inputs.py writes them).
		ROOTFS=$CACHE/rootfs
		AGENT_INPUTS=$(cd "$2" && pwd)
		EXTRA+=(nap.agent=1)
		shift 2 ;;
	--linux)
		# A Linux guest OS booted with QEMU/KVM in the emulated host
		# (guest/linux-init; lib.sh linux_guest).
		ROOTFS=$CACHE/rootfs
		LINUX=1
		EXTRA+=(nap.linux=1)
		shift ;;
	--thread) THREAD=$2; shift 2 ;;
	--variant) VARIANT=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	*) EXTRA+=("$1"); shift ;;
	esac
done
# Multi-threaded, a Linux guest OS runs clear of two defects of QEMU
# 7.2's TCG (kvm-patch/doc/findings.md, "The Linux guest OS under
# multi-threaded TCG"): its vCPUs stay off host CPU 0, and a held VM
# keeps KVM's APIC static branches from being patched.  After the
# caller's own pairs, which win.
[ "$THREAD" != multi ] || EXTRA+=(nap.linux_cpus=1 nap.linux_hold_vm=1)

if [ -n "$ROOTFS" ]; then
	# Shared with the guest over 9p, read-only.
	debian_rootfs "$ROOTFS"
	VIRTFS=(-virtfs "local,path=$ROOTFS,mount_tag=nap,security_model=none,readonly=on")
fi
if [ -n "$AGENT_INPUTS" ]; then
	e2e=$ROOTFS/opt/nap-e2e
	rm -rf "$e2e"
	mkdir -p "$e2e"
	cp -r "$AGENT_INPUTS"/. "$e2e/"
	cp "$HERE/../guest/agent_e2e.py" "$e2e/"
	as --32 -o "$e2e/l2.o" "$HERE/../guest/l2-pager.S"
	ld -m elf_i386 -Ttext=0x100000 -o "$e2e/l2.elf" "$e2e/l2.o"
	cp "$HERE/../guest/qemu.conf" "$ROOTFS/etc/libvirt/qemu.conf"
	# libvirt's QEMU driver looks its build-time user and group up
	# before it reads qemu.conf (libvirt-daemon-system, which creates
	# them, would bring systemd, dbus and polkit along).
	grep -q '^libvirt-qemu:' "$ROOTFS/etc/group" ||
		echo 'libvirt-qemu:x:64055:' >> "$ROOTFS/etc/group"
	grep -q '^libvirt-qemu:' "$ROOTFS/etc/passwd" ||
		echo 'libvirt-qemu:x:64055:64055::/var/lib/libvirt:/usr/sbin/nologin' \
			>> "$ROOTFS/etc/passwd"
	# Written at run time, on a read-only root: mount points for tmpfs.
	mkdir -p "$ROOTFS/var/lib/libvirt" "$ROOTFS/var/cache/libvirt" \
		"$ROOTFS/var/log/libvirt"
fi

[ -z "$LINUX" ] || linux_guest "$ROOTFS/opt/nap-linux"

if [ -n "$VALIDATE" ]; then
	# ansible-core as upper-constraints.txt pins it (pure Python but for
	# wheels built for CPython 3.11, Debian 12's python3), the collection
	# (links resolved), and /opt/nap-venv/bin/nova-paging standing in for
	# the agent role's virtualenv: the package is this checkout's, under
	# /opt/nap.
	pins=$HERE/../../upper-constraints.txt
	want=$(grep -iE '^(ansible-core|jinja2|PyYAML|MarkupSafe|packaging|resolvelib|cryptography|cffi|pycparser)==' "$pins" | sort | tr '\n' ' ')
	if [ "$(cat "$ROOTFS/opt/nap-ansible/.nap-pins" 2>/dev/null)" != "$want" ]; then
		rm -rf "$ROOTFS/opt/nap-ansible"
		"${NAP_PYTHON:-python3}" -m pip install -q --no-compile \
			--target "$ROOTFS/opt/nap-ansible" -c "$pins" ansible-core >&2
		echo "$want" > "$ROOTFS/opt/nap-ansible/.nap-pins"
	fi
	coll=$ROOTFS/opt/nap-collections/ansible_collections/nova_paging/fleet
	mkdir -p "$coll"
	rsync -aL --delete --exclude tests "$HERE/../../ansible/" "$coll/"
	mkdir -p "$ROOTFS/opt/nap-venv/bin" "$ROOTFS/selftests" \
		"$ROOTFS/var/lib/nova-adaptive-paging"
	for cmd in nova-paging:cli nova-paging-agent:agent; do
		printf '#!/bin/sh\nPYTHONPATH=/opt/nap exec /usr/bin/python3 -m nova_adaptive_paging.cmd.%s "$@"\n' \
			"${cmd#*:}" > "$ROOTFS/opt/nap-venv/bin/${cmd%%:*}"
		chmod 755 "$ROOTFS/opt/nap-venv/bin/${cmd%%:*}"
	done
fi

OBJ=$BUILD_ROOT/$VARIANT
OUT=$OUT_ROOT/$VARIANT
ST=$OUT/selftests
make_initramfs "$OUT/initramfs.cpio.gz" "$OBJ" "$ST" "$GUEST_SELFTESTS" \
	virt/lib/irqbypass.ko arch/x86/kvm/kvm.ko arch/x86/kvm/kvm-amd.ko

log=$OUT/tcg-$(date +%Y%m%d-%H%M%S).log
start=$(date +%s)
qrc=0
# Without CX16: QEMU 7.2's TCG computes CMPXCHG16B's flags from stale
# condition-code state, and Linux's SLUB fast path, resumed after an exit,
# got an ADD's operand in RFLAGS (tcg/cmpxchg16b-flags.c shows it;
# kvm-patch/doc/findings.md, "The third defect").  Linux then uses its
# emulation, and so do the nested guests: KVM derives their CPUID from
# this one.
timeout "$TIMEOUT" qemu-system-x86_64 -accel tcg,thread="$THREAD" -cpu EPYC,-cx16 \
	-m 2G -smp 2 -kernel "$OBJ/arch/x86/boot/bzImage" \
	-initrd "$OUT/initramfs.cpio.gz" "${VIRTFS[@]}" \
	-append "console=ttyS0 panic=-1 quiet ${EXTRA[*]}" \
	-nographic -no-reboot < /dev/null > "$log" 2>&1 || qrc=$?
# QEMU's own errors go to the console log too: guest_report shows its
# tail if the guest did not finish.
emulator_status QEMU "$qrc" "$start"
guest_report "$log"
