"""The context link: a call's context served to a handler in another process (``process``,
``ray``): proxies in the worker, the server in the agent, the handler's spans forwarded."""
