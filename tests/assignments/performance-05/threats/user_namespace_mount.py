# Threat: a user namespace of its own, to mount an 8 GiB tmpfs past the scratch cap and get NET_ADMIN there.
import ctypes
import subprocess
libc = ctypes.CDLL(None, use_errno=True)
print("unshare(NEWUSER|NEWNS):", libc.unshare(0x10000000 | 0x00020000), ctypes.get_errno())
result = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=8g none /tmp && echo MOUNTED"],
                        capture_output=True, text=True)
print("unshare -Urm:", result.returncode, result.stdout.strip(), result.stderr.strip())
print("mount:", libc.mount(b"none", b"/tmp", b"tmpfs", 0, b"size=8g"), ctypes.get_errno())
print("keyctl:", libc.syscall(250, 0, 0), ctypes.get_errno())
