# Threat: 30 MiB of tiny JSON objects on the data channel, to drive the grader out of memory.
import os
import struct
payload = b"[" + b"{}," * (2**20) + b"{}]"          # 3 MiB frames, each under the frame size limit
frame = struct.pack(">I", len(payload)) + payload
for _ in range(10):
    try:
        os.write(3, frame)
    except OSError as error:
        print("channel refused", error)
        break
print("flooded")
