# Threat: ignore every catchable signal and spin forever in a tight loop.
import signal

for name in ("SIGTERM", "SIGINT", "SIGALRM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGXCPU", "SIGVTALRM", "SIGPROF"):
    signal.signal(getattr(signal, name), signal.SIG_IGN)
print("spinning")
while True:
    pass
