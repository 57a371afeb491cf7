# Threat: close stdout, stderr and the data channel, then linger past the wall limit, ignoring the soft limit: the
# grader once took a run whose pipes closed without a status for a dead fork server, restarted the server (from the
# thread grading this file, so the new server died when this file was done, with the runs in flight on it) and ran
# the file again, then in a fresh interpreter.
import os
import signal
import time

signal.signal(signal.SIGALRM, signal.SIG_IGN)
print("closing my pipes", flush=True)
for fd in (1, 2, 3):
    os.close(fd)
time.sleep(600)
