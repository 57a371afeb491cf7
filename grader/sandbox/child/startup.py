"""What a run's process sets up before the harness starts: the syscall filter and JAX's compilation cache."""

import base64

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def install_syscall_filter(program_b64):
    """Load the grader's seccomp filter (a BPF program compiled by libseccomp in the grader) for this process and
    every process it starts. Before any student code; no new privileges first, as the kernel requires."""
    if not program_b64:
        return False
    import ctypes

    program = base64.b64decode(program_b64)

    class Filter(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = Filter(len(program) // 8, ctypes.cast(buffer, ctypes.c_char_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS)")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(SECCOMP)")
    return True


def use_compilation_cache(path):
    """Let JAX reuse (and add to) compiled programs in `path`: every compile, however fast, is cached."""
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
