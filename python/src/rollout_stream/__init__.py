"""Trainer-side client for the ``rollout.packed`` topic."""
