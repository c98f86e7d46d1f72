"""``process`` isolation: a supervised pool of worker processes, killed at a deadline."""
