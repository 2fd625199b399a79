"""Sweeps: many configurations of one search, each trial an ordinary run of the workspace (issue 15)."""
