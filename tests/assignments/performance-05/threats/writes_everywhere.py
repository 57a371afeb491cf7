# Threat: walk the whole file system and try to drop files into every directory (results, grades, configs).
import os
import time

written = []
deadline = time.monotonic() + 5
for top, dirs, files in os.walk("/"):
    if top.startswith(("/proc", "/sys", "/dev")):
        dirs[:] = []
        continue
    if time.monotonic() > deadline:
        break
    for name in ("pwned-results.json", "pwned-grades.csv"):
        try:
            with open(os.path.join(top, name), "w") as stream:
                stream.write("{}")
            written.append(os.path.join(top, name))
        except OSError:
            pass
    for name in files:
        if name.endswith((".json", ".csv", ".toml", ".md")):
            try:
                with open(os.path.join(top, name), "a") as stream:
                    stream.write("pwned")
                written.append(os.path.join(top, name))
            except OSError:
                pass
print("writable places:", sorted({os.path.dirname(p) for p in written}))
