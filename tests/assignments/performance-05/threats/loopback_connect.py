# Threat: reach the network: the grading host's loopback services (a port scan) and the internet.
import socket

PORT = int("__LISTENER_PORT__")      # the test replaces this with the port of a listener it opened
reached = []
for port in [PORT, *range(1, 65536)]:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as connection:
            connection.sendall(b"pwned")
            reached.append(port)
    except OSError:
        pass
    if port == PORT and not reached:
        print("listener port unreachable")
try:
    socket.create_connection(("pypi.org", 443), timeout=2)
    reached.append("pypi.org")
except OSError as error:
    print("internet unreachable:", type(error).__name__)
print("reached:", reached)
