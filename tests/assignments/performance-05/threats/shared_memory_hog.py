# Threat: shared memory is not data: RLIMIT_DATA does not count a 3 GiB shared mapping. The cgroup does.
import mmap
size = 3 * 2**30
block = mmap.mmap(-1, size)
for offset in range(0, size, 4096):
    block[offset] = 1
print("3 GiB of shared memory touched")
