# Threat: 250 busy processes (the process limit is 256) to starve whatever runs beside this run.
import os
children = 0
for _ in range(250):
    try:
        pid = os.fork()
    except OSError as error:
        print(f"fork refused after {children} children: {type(error).__name__}")
        break
    if pid == 0:
        while True:
            pass
    children += 1
print(f"{children} busy children", flush=True)
while True:
    pass
