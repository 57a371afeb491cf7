# Threat: earn the CPU-wait allowance on purpose. A hundred processes sleep and wake together every second, so they
# queue behind one another for a moment; added up, their waits were once counted as time a busy machine cost the
# run, and it was granted the whole 60 s allowance on 2 s of CPU. The soft limit is ignored.
import os
import signal
import time

signal.signal(signal.SIGALRM, signal.SIG_IGN)
children = 0
while children < 99 and os.fork() != 0:
    children += 1
if children == 99:
    print("100 processes queueing", flush=True)
while True:
    time.sleep(1 - time.time() % 1)
    started = time.process_time()
    while time.process_time() - started < 0.0005:
        pass
