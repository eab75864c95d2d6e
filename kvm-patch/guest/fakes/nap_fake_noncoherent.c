// SPDX-License-Identifier: GPL-2.0-only
/*
 * A stand-in for a device that cannot exist in the emulated hosts: one
 * assigned to a VM that does DMA without snooping, as VFIO reports it
 * to KVM through kvm_arch_register_noncoherent_dma().  Writing a VM file
 * descriptor of the writing process to the parameter vm_fd registers
 * non-coherent DMA for that VM, for the rest of its life.
 */
#include <linux/file.h>
#include <linux/kvm_host.h>
#include <linux/module.h>

static int vm_fd_set(const char *val, const struct kernel_param *kp)
{
	struct file *file;
	int fd, r;

	r = kstrtoint(val, 10, &fd);
	if (r)
		return r;
	file = fget(fd);
	if (!file)
		return -EBADF;
	/* KVM's VM files are anonymous inodes named "kvm-vm". */
	r = -EINVAL;
	if (!strcmp(file->f_path.dentry->d_name.name, "kvm-vm")) {
		kvm_arch_register_noncoherent_dma(file->private_data);
		r = 0;
	}
	fput(file);
	return r;
}

static const struct kernel_param_ops vm_fd_ops = {
	.set = vm_fd_set,
};
module_param_cb(vm_fd, &vm_fd_ops, NULL, 0200);
MODULE_PARM_DESC(vm_fd, "A VM file descriptor of the writer: give it non-coherent DMA");

MODULE_DESCRIPTION("Test stand-in for a non-coherent DMA device (nova-adaptive-paging)");
MODULE_LICENSE("GPL");
