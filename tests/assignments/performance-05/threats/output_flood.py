# Threat: flood stdout and stderr with hundreds of megabytes.
import os
import sys

line = ("x" * 1023 + "\n").encode()
block = line * 1024                       # 1 MiB
for _ in range(300):
    os.write(1, block)
sys.stderr.write("flood done\n")
