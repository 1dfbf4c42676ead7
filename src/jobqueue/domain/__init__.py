"""The pure core: jobs, transitions, backoff, outcomes, errors, ports, handler registry.

Imports the standard library only; no I/O and no clock or randomness it was not handed.
"""
