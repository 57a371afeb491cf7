# Threat: read the compiled programs in the run's JAX compilation cache, hoping the reference solution's are there:
# their file names (jit_vdot) and metadata (the transformations applied) would tell how the exercises were solved.
import os
import zlib

folder = "/tmp/grader-compile-cache"
names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
print("cache entries seen:", "some" if names else "none")
naming = 0
for name in names:
    with open(os.path.join(folder, name), "rb") as stream:
        data = stream.read()
    try:
        data = zlib.decompress(data)
    except zlib.error:
        pass
    if any(word in name.encode() + data for word in (b"vdot", b"linspace")):
        naming += 1
        print("names a method:", name)
print("entries naming a method of the exercises:", naming)
