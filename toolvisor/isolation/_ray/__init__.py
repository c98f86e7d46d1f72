"""``ray`` isolation: each call a Ray task, or a call on a ``RayActor``'s actor."""
