"""Capture from agent hooks: `memloci hook AGENT` reads one hook event on stdin and, when it
is worth remembering, stores it as a memory (events.py reads the agents' payloads,
classify.py decides and labels, capture.py runs it under a deadline and never fails the agent)."""
