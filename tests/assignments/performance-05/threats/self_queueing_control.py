# The control for self_queueing: an honest runaway loop, one process that wants a CPU all the time and ignores the
# soft limit. It never queues behind itself, so whatever it is allowed for waiting, the machine's other work caused;
# the attack beside it, graded at the same time and wanting far less CPU, must not be allowed more.
import signal

signal.signal(signal.SIGALRM, signal.SIG_IGN)
print("one busy process", flush=True)
while True:
    pass
