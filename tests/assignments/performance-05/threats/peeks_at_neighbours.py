# prepend: solution
# Threat: look for the batch's variant seed (compile-cache marker names) and other runs' uids (/proc/key-users).
import os
for root in ("/tmp", "/grader-compile-cache", "/tmp/grader-compile-cache"):
    for top, dirs, files in os.walk(root):
        print("LISTED", top, sorted(dirs)[:50], sorted(files)[:50])
for path in ("/proc/key-users", "/proc/keys"):
    try:
        print("PROC", path, repr(open(path).read()))
    except OSError as error:
        print("PROC", path, type(error).__name__)
