"""One kind of method evidence as it is sent, INSIDE the sandbox (see recorder.py): bounded per top-level statement
(its first half at once, its last half kept in a ring and sent when the statement ends, so a flood in the middle
cannot push out the statement's final calls) and per run; what is left out is counted."""

import collections
import threading


class Stream:
    """One kind of event, bounded per statement (first half at once, last half in a ring) and per run."""

    def __init__(self, send, kind, total, per_statement):
        self.send = send
        self.kind = kind
        self.total = total
        self.head = per_statement - per_statement // 2
        self.ring = collections.deque(maxlen=max(0, per_statement // 2))
        self.sent = 0
        self.in_statement = 0
        self.omitted = 0               # in the current statement
        self.omitted_total = 0
        self.lock = threading.Lock()

    def add(self, event):
        with self.lock:
            self.in_statement += 1
            if self.sent >= self.total:
                self._omit(1)
            elif self.in_statement <= self.head:
                self.sent += 1
                self.send(event)
            else:
                if len(self.ring) == self.ring.maxlen:
                    self._omit(1)
                if self.ring.maxlen:
                    self.ring.append(event)
                else:
                    self._omit(1)

    def _omit(self, count):
        self.omitted += count
        self.omitted_total += count

    def end_statement(self):
        """Send the ring; return how many events of the statement were left out."""
        with self.lock:
            while self.ring:
                event = self.ring.popleft()
                if self.sent >= self.total:
                    self._omit(1)
                    continue
                self.sent += 1
                self.send(event)
            omitted, self.omitted, self.in_statement = self.omitted, 0, 0
            return omitted
