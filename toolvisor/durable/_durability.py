"""``Durability``: the settings that make an agent's runs outlive its process, in one place.

The agent reads them once, when it is built: the store it checkpoints to (or what names one
for ``open_store``: a SQLite file's path or a PostgreSQL URL, which it opens and closes), the
keys it signs ``Suspended`` outcomes with, and how long a run's lease outlives its host's last
renewal.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from toolvisor.contract import check_seconds
from toolvisor.durable._open import open_store
from toolvisor.durable._signing import KeyRing, Signer
from toolvisor.durable._store import RunStore


@dataclass(frozen=True, slots=True)
class Durability:
    """How an agent's runs outlive its process.

    ``store`` (a :class:`RunStore`, or a SQLite file's path or ``postgresql://`` URL that
    the agent opens with :func:`open_store` and closes)
    makes runs durable: a checkpoint after every step, completion keys, ``resume_run`` in any
    process. ``signing_keys`` (bytes, newest first) sign the ``Suspended`` outcomes the agent
    gives out, so that agents sharing them resume each other's; by default the store signs,
    and without one a random key of the agent's own. ``lease_ttl`` is how many seconds a run's
    lease outlives its host's last renewal, before another process may take the run over.
    """

    store: RunStore | str | os.PathLike[str] | None = None
    signing_keys: Sequence[bytes] | None = None
    lease_ttl: float = 30.0

    def __post_init__(self) -> None:
        store = self.store
        if store is not None and not isinstance(store, RunStore | str | os.PathLike):
            raise TypeError(f"store must be a RunStore, a SQLite file's path, a "
                            f"postgresql:// URL, or None; got {type(store).__name__}")
        if self.signing_keys is not None:
            KeyRing(self.signing_keys)  # refuses bad keys now, naming what is wrong
        check_seconds("lease_ttl", self.lease_ttl, positive=True)

    @classmethod
    def given(cls, store: RunStore | str | os.PathLike[str] | None,
              durability: Durability | None) -> Durability:
        """An agent's durability: ``durability``, or ``store=`` as its shorthand (not both)."""
        if durability is None:
            return cls(store=store)
        if not isinstance(durability, Durability):
            raise TypeError(f"durability must be a Durability, got {type(durability).__name__}")
        if store is not None:
            raise TypeError("give the store once: Agent(store=...) is short for "
                            "Agent(durability=Durability(store=...)); pass it in the Durability")
        return durability

    def opened(self) -> tuple[RunStore | None, bool]:
        """The store runs use, and whether the agent opened it (from a path: it closes it)."""
        if isinstance(self.store, str | os.PathLike):
            return open_store(self.store), True
        return self.store, False

    def signer(self, store: RunStore | None) -> Signer:
        """What signs the agent's ``Suspended`` outcomes: its keys, else its (opened)
        ``store``, else a random key of its own."""
        if self.signing_keys is not None:
            return KeyRing(self.signing_keys)
        if store is not None:
            return store
        return KeyRing([secrets.token_bytes(32)])
