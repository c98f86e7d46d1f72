"""Invoking one handler: arity dispatch, validation, normalisation, encoding."""

from toolvisor.executor._encoding import encode, encode_checked
from toolvisor.executor._execute import aexecute, execute

__all__ = ["aexecute", "encode", "encode_checked", "execute"]
