// SPDX-License-Identifier: GPL-2.0-only
/*
 * A VM given a device that does DMA without snooping must leave shadow
 * paging for good.  This creates a VM, sets its policy to shadow, hands
 * its descriptor to nap_fake_noncoherent.ko (which registers non-coherent
 * DMA for it, as VFIO does for such a device) and prints what the VM
 * then says:
 *
 *   NAP-NONCOHERENT before=<mode> policy=<policy> mode=<mode>
 *                   adaptive=<errno of that write, or accepted>
 *                   refused=<switches_refused>
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/kvm.h>

#define PARAM "/sys/module/nap_fake_noncoherent/parameters/vm_fd"

static int io(int vm, const char *name, int write, char *buf, unsigned int *size)
{
	struct kvm_paging_switch_io p = {
		.flags = write ? KVM_PAGING_SWITCH_IO_WRITE : 0,
		.size = *size,
		.data = (unsigned long)buf,
	};

	snprintf(p.name, sizeof(p.name), "%s", name);
	if (ioctl(vm, KVM_PAGING_SWITCH_IO, &p))
		return errno;
	*size = p.size;
	return 0;
}

static int put(int vm, const char *name, const char *text)
{
	unsigned int size = strlen(text);

	return io(vm, name, 1, (char *)text, &size);
}

/* The first word of @vm's file @name (static storage, 4 in turn). */
static const char *get(int vm, const char *name)
{
	static char bufs[4][4096];
	static int turn;
	char *buf = bufs[turn++ % 4];
	unsigned int size = sizeof(bufs[0]) - 1;

	if (io(vm, name, 0, buf, &size))
		return "?";
	buf[size] = 0;
	buf[strcspn(buf, " \n")] = 0;
	return buf;
}

static unsigned long refused(int vm)
{
	static char buf[4096];
	unsigned int size = sizeof(buf) - 1;
	const char *at;

	if (io(vm, "paging_stats", 0, buf, &size))
		return -1UL;
	buf[size] = 0;
	at = strstr(buf, "\nswitches_refused ");
	return at ? strtoul(at + strlen("\nswitches_refused "), NULL, 10) : -1UL;
}

int main(void)
{
	const char *before, *policy, *mode;
	int kvm, vm, fd, r;
	char text[16];

	kvm = open("/dev/kvm", O_RDWR);
	vm = kvm < 0 ? -1 : ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0 || put(vm, "paging_policy", "shadow\n")) {
		printf("NAP-NONCOHERENT no VM in shadow mode: %s\n", strerror(errno));
		return 1;
	}
	before = get(vm, "paging_mode");
	snprintf(text, sizeof(text), "%d", vm);
	fd = open(PARAM, O_WRONLY);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		printf("NAP-NONCOHERENT %s: %s\n", PARAM, strerror(errno));
		return 1;
	}
	close(fd);
	policy = get(vm, "paging_policy");
	mode = get(vm, "paging_mode");
	r = put(vm, "paging_policy", "adaptive\n");
	printf("NAP-NONCOHERENT before=%s policy=%s mode=%s adaptive=%s refused=%lu\n",
	       before, policy, mode, r == EOPNOTSUPP ? "EOPNOTSUPP" :
	       r ? strerror(r) : "accepted", refused(vm));
	return 0;
}
