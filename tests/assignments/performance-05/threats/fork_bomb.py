# Threat: spawn processes until the machine gives out (each child sleeps, holding its slot).
import os
import time

spawned = 0
for _ in range(5000):
    try:
        pid = os.fork()
    except OSError as error:
        print(f"fork refused after {spawned} children: {type(error).__name__}")
        break
    if pid == 0:
        try:
            os.execv("/bin/sleep", ["sleep", "64.1414"])
        finally:
            os._exit(0)
    spawned += 1
else:
    print(f"fork never refused: {spawned} children")
