"""Typed messages: commands, results, errors, events, the step log and the wire codec.

Part of the pure core: nothing here does IO.
"""
