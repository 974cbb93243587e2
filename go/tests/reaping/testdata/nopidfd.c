/*
 * nopidfd: runs a command with pidfd_open refused (ENOSYS), the way a
 * kernel older than 5.3 or a seccomp profile without the call behaves.
 * reaping_test.go compiles it at test time and runs its host under it.
 *
 *   nopidfd COMMAND [ARG...]
 *
 * It sets no_new_privs (so no privilege is needed), installs a seccomp
 * filter that answers pidfd_open with ENOSYS and lets every other call
 * through, checks that the filter works, and execs COMMAND, which
 * inherits the filter, as do all its children.
 *
 * Exit status 77: seccomp filters are not available here (the test
 * skips); 78: the filter was installed but pidfd_open still succeeds;
 * 127: COMMAND could not be executed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

/* Since Linux 5.1 new calls have one number on every architecture. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: nopidfd COMMAND [ARG...]\n");
		return 2;
	}
#ifndef NATIVE_ARCH
	fprintf(stderr, "nopidfd: no filter for this architecture\n");
	return 77;
#else
	/*
	 * Calls of another ABI (i386 on x86_64, arm32 on arm64) have other
	 * numbers; they are let through untouched, as is x32, which the
	 * processes under test do not use.
	 */
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = sizeof(filter) / sizeof(filter[0]),
		.filter = filter,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		fprintf(stderr, "nopidfd: PR_SET_NO_NEW_PRIVS: %s\n", strerror(errno));
		return 77;
	}
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		fprintf(stderr, "nopidfd: seccomp filter refused: %s\n", strerror(errno));
		return 77;
	}

	errno = 0;
	long fd = syscall(SYS_pidfd_open, (long)getpid(), 0L);
	if (fd >= 0 || errno != ENOSYS) {
		fprintf(stderr, "nopidfd: pidfd_open still answers (%ld, %s)\n", fd, strerror(errno));
		return 78;
	}

	execvp(argv[1], argv + 1);
	fprintf(stderr, "nopidfd: %s: %s\n", argv[1], strerror(errno));
	return 127;
#endif
}
