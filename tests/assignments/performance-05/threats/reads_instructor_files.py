# Threat: look for the instructor's material (reference solution, configs, checks) and copy its answers.
import os
import time

found = []
deadline = time.monotonic() + 8
for top, dirs, files in os.walk("/"):
    if top.startswith(("/proc", "/sys", "/dev", "/usr", "/etc")) or time.monotonic() > deadline:
        dirs[:] = []
        continue
    for name in files:
        if (name in ("assignment.toml", "checks.py", "oracle.py", "grades.csv")
                or name.startswith("performance-05") or name.endswith(".expected.toml")):
            found.append(os.path.join(top, name))
print(f"found {len(found)} instructor files:", found[:20])
for path in found:
    if path.endswith(".py") and "solutions" in path:
        exec(open(path).read())   # take the reference solution's answers wholesale
