"""The composition root (`compose.py`) and what it runs a process with: its components and
their shutdown, signals and sockets, the database it provisions, the handler modules it
loads, and the loops and wake-ups several roles share."""
