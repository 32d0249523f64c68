/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few kernel types perception.bpf.c needs, instead of a full vmlinux.h.
 *
 * Why: a vmlinux.h dumped from the build host's kernel ties the build to that
 * host (and is 3+ MB of generated text); a copy shipped by a crate ties it to
 * that crate. The program only reads task_struct::pid, so it declares that one
 * field with preserve_access_index: clang emits a CO-RE relocation and libbpf
 * resolves the real offset from the running kernel's BTF at load time. The
 * build is therefore offline, reproducible and kernel-independent; the kernel
 * needs BTF (CONFIG_DEBUG_INFO_BTF) at run time, as tp_btf programs do anyway.
 *
 * Constants below are the kernel's stable UAPI values (include/uapi/linux/bpf.h).
 */
#ifndef ASA_PERCEPTION_TYPES_H
#define ASA_PERCEPTION_TYPES_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;
typedef __u32 __wsum;
typedef __u8 u8;
typedef __u32 u32;
typedef __u64 u64;
typedef _Bool bool;
#define true 1
#define false 0

/* enum bpf_map_type (UAPI) */
enum {
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

/* map_flags (UAPI) */
enum {
	BPF_F_NO_PREALLOC = 1,
};

/* bpf_task_storage_get() flags (UAPI) */
enum {
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
};

/* map update flags (UAPI) */
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

/* Only the field the program reads; offset relocated by CO-RE at load time. */
struct task_struct {
	int pid;
} __attribute__((preserve_access_index));

#endif
