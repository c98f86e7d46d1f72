"""What several test folders share: handlers importable by name, servers, hosts, helpers."""
