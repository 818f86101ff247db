"""One workspace across coding agents: each agent's rules, workflows and skills read into one
model, merged (duplicates by content hash, conflicts listed for a person), and written into the
other agents' own formats, splicing only memloci's own block of a person's file."""
