/*
 * The guest that the agent's end-to-end step (guest/init, nap.agent=1)
 * boots with libvirt and QEMU on the patched KVM: a Multiboot image that
 * QEMU loads with -kernel, small enough to start in seconds under two
 * layers of emulation.  It turns paging on (4 MiB pages, identity) and
 * then, forever, writes to every page of 16 MiB and switches between two
 * address spaces with a CR3 load, as a context-switching guest does: a
 * VM the kernel can run in either mode, with work in both.
 *
 * Prints "NAP-L2 paging on" on COM1 once paging is on.
 */
	.code32
	.text
	.globl	_start
	.align	4
	/* Multiboot 1 header: magic, flags (none: QEMU loads the ELF), sum */
	.long	0x1badb002, 0, -0x1badb002

_start:
	cli
	mov	$stack_top, %esp
	/* Page directory entries 0..15: 4 MiB pages, present, writable. */
	xor	%ecx, %ecx
1:	mov	%ecx, %eax
	shl	$22, %eax
	or	$0x83, %eax
	mov	%eax, pd0(, %ecx, 4)
	mov	%eax, pd1(, %ecx, 4)
	inc	%ecx
	cmp	$16, %ecx
	jb	1b
	mov	%cr4, %eax
	or	$0x10, %eax		/* CR4.PSE */
	mov	%eax, %cr4
	mov	$pd0, %eax
	mov	%eax, %cr3
	mov	%cr0, %eax
	or	$0x80000000, %eax	/* CR0.PG */
	mov	%eax, %cr0

	mov	$banner, %esi
2:	lodsb
	test	%al, %al
	jz	3f
	mov	$0x3f8, %dx
	outb	%al, %dx
	jmp	2b

3:	mov	$0x1000000, %edi	/* 16 MiB .. 32 MiB, a write a page */
4:	incl	(%edi)
	add	$4096, %edi
	cmp	$0x2000000, %edi
	jb	4b
	mov	$pd1, %eax		/* the other address space */
	mov	%cr3, %ebx
	cmp	%eax, %ebx
	jne	5f
	mov	$pd0, %eax
5:	mov	%eax, %cr3
	jmp	3b

banner:
	.asciz	"NAP-L2 paging on\n"

	.bss
	.align	4096
pd0:	.skip	4096
pd1:	.skip	4096
	.skip	4096
stack_top:
