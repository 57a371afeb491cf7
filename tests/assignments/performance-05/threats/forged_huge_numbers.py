# prepend: solution
# Threat: forge frames on the data channel whose numbers are beyond float64 (an integer of 401 digits): a value
# for `cotangent`, the last result of the grad_whole probe, and a statement whose `seconds` and index overflow.
# float() of such a number raises OverflowError: in a check it used to excuse the check, in `seconds` it failed
# the whole record.
import fcntl
import json
import os
import stat
import struct

HUGE = 10**400

def frame(message):
    payload = json.dumps(message).encode()
    return struct.pack(">I", len(payload)) + payload

def channels():
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                yield fd
        except OSError:
            pass

forged = b"".join(frame(message) for message in (
    {"type": "value", "name": "cotangent", "stmt": 0, "value": {"t": "int", "v": HUGE}},
    {"type": "value", "name": "finite", "stmt": HUGE, "value": {"t": "float", "v": HUGE}},
    {"type": "probe", "name": "grad_whole", "stmt": 0, "inputs": {}, "value": {"t": "int", "v": -HUGE}},
    {"type": "statement", "index": HUGE, "line": HUGE, "end_line": HUGE, "status": "ok", "seconds": HUGE,
     "assigns": ["cotangent"], "calls_omitted": HUGE},
))
for fd in channels():
    os.write(fd, forged)
print("forged", len(forged), "bytes")
