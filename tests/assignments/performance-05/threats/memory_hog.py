# Threat: allocate tens of gigabytes, first in one block, then piece by piece.
import numpy as np

try:
    huge = np.ones(5 * 10**9)          # 40 GB of float64
    print("40 GB allocated")
except MemoryError:
    print("one block refused")
blocks = []
while True:
    blocks.append(bytearray(256 * 2**20))
