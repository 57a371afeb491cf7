"""From a scenario to a sandbox job and from its output to a Snapshot; runners and the compile cache."""
