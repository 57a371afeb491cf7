"""The syscall filter every student process runs under, compiled by libseccomp (the maintained C library,
through ctypes) into a classic BPF program that the harness loads before the first student statement.

What a grading run has no use for is refused with EPERM: new namespaces (`unshare`, `setns`, `clone`/`clone3`
with a namespace flag, so no user namespace and no private mounts), every mount call, the kernel keyring,
tracing other processes and reading their memory, bpf, perf events, userfaultfd, io_uring, kernel modules,
kexec, reboot, swap, clocks, host and domain names, raw I/O ports, file handles by number, quotas and the
kernel log, and Linux AIO (`io_setup` reserves from the host-wide `fs.aio-max-nr` pool, which no namespace or
cgroup divides: one run could take it all from every other process on the machine). Foreign system-call ABIs
(32-bit calls on a 64-bit kernel) are killed by libseccomp's default. `clone3` answers ENOSYS so that C
libraries fall back to `clone`, whose flags a filter can read.

The program is built once per grader process; where libseccomp is missing, `filter_program()` returns None
and every record says there was no syscall filter.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import tempfile
from functools import lru_cache

DENIED = (
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "keyctl", "add_key", "request_key", "ptrace", "process_vm_readv",
    "process_vm_writev", "process_madvise", "pidfd_getfd", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "sethostname", "setdomainname", "iopl", "ioperm", "open_by_handle_at", "name_to_handle_at",
    "quotactl", "quotactl_fd", "syslog", "vhangup", "lookup_dcookie", "fanotify_init", "nfsservctl",
    "personality", "uselib", "ustat", "sysfs", "_sysctl", "vm86", "vm86old", "modify_ldt", "get_kernel_syms",
    "query_module", "create_module", "landlock_create_ruleset",
    "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
)
NAMESPACE_FLAGS = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
                   "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
                   "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080}
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7


def _errno_action(number: int) -> int:
    return 0x00050000 | (number & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


@lru_cache(maxsize=1)
def filter_program() -> bytes | None:
    """The BPF program (struct sock_filter[]) for this machine's architecture, or None without libseccomp."""
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    context = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not context:
        return None
    try:
        deny = _errno_action(errno.EPERM)
        for syscall in DENIED:
            number = lib.seccomp_syscall_resolve_name(syscall.encode())
            if number >= 0 and lib.seccomp_rule_add_array(context, deny, number, 0, None) != 0:
                return None
        clone3 = lib.seccomp_syscall_resolve_name(b"clone3")
        if clone3 >= 0 and lib.seccomp_rule_add_array(context, _errno_action(errno.ENOSYS), clone3, 0, None) != 0:
            return None
        clone = lib.seccomp_syscall_resolve_name(b"clone")
        flags_arg = 0 if os.uname().machine not in ("s390x", "s390") else 1
        for flag in NAMESPACE_FLAGS.values():
            compare = (_ArgCmp * 1)(_ArgCmp(flags_arg, SCMP_CMP_MASKED_EQ, flag, flag))
            if lib.seccomp_rule_add_array(context, deny, clone, 1, compare) != 0:
                return None
        with tempfile.TemporaryFile() as stream:
            if lib.seccomp_export_bpf(context, stream.fileno()) != 0:
                return None
            stream.seek(0)
            program = stream.read()
        return program if program and len(program) % 8 == 0 else None
    finally:
        lib.seccomp_release(context)


def describe() -> str:
    return ("a syscall filter (no namespaces, mounts, keyring, ptrace, bpf, perf, userfaultfd, io_uring, AIO, modules)"
            if filter_program() else "no syscall filter (libseccomp missing)")
