# Threat: fill the disk with many large files (each stays under the per-file limit), ignoring SIGXFSZ.
import os
import signal

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
chunk = b"\0" * (8 * 2**20)
total = 0
for folder in (".", "/tmp", "/dev/shm"):
    for index in range(200):
        try:
            with open(os.path.join(folder, f"pwned-fill-{index}.bin"), "wb") as stream:
                for _ in range(7):
                    stream.write(chunk)
                    total += len(chunk)
        except OSError as error:
            print(f"{folder}: stopped by {type(error).__name__} after {total // 2**20} MiB in all")
            break
print(f"wrote {total // 2**20} MiB")
