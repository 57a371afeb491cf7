# prepend: solution
# Threat: write forged frames into every inherited file descriptor (the grader's data channel among them):
# a "done" frame, a value frame claiming a wrong finite, then garbage with a huge length prefix.
import json
import os
import struct

def frame(message):
    payload = json.dumps(message).encode()
    return struct.pack(">I", len(payload)) + payload

forged = frame({"type": "done", "reason": "end"}) + frame({"type": "value", "name": "finite", "v": {"t": "float", "v": 0.0}})
for fd in range(3, 64):
    try:
        os.write(fd, forged + struct.pack(">I", 2**31) + b"garbage")
    except OSError:
        pass
print("forged frames written")
