"""``sandbox`` isolation: each handler in a bubblewrap sandbox (new user, pid, network, ipc and
uts namespaces, a narrow read-only filesystem, an empty environment, rlimits), driven by the
``process`` pool and reached only through the context link."""
