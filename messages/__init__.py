"""Typed messages: commands, results, errors, events, the step log, the messages between nodes and the wire codec.

Part of the pure core: nothing here does IO.
"""
