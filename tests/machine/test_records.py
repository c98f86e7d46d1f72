"""The records a machine keeps while its calls and model calls run are slots objects: each one
object for the cyclic garbage collector, with no ``__dict__`` or pydantic fields-set beside it,
and a checkpoint of them still written and read by pydantic as before."""

from __future__ import annotations

import gc

from toolvisor import Ok, Tool
from toolvisor.contract import ModelResponse, ToolCall, Usage
from toolvisor.machine import MachineConfig, ModelReplied, TurnMachine


def _noop(arguments: dict[str, object]) -> Ok:
    return Ok(None)


def test_a_running_batch_keeps_one_tracked_object_per_record() -> None:
    machine = TurnMachine(MachineConfig(tools=[Tool("noop", handler=_noop)]))
    waiting = machine.start("go")[-1]
    awaiting_model = machine._run.outstanding
    assert not hasattr(awaiting_model, "__dict__") and gc.is_tracked(awaiting_model)
    other = TurnMachine(machine.config)  # a run that spent nothing shares one zero Usage
    assert machine._run.usage is other._run.usage == Usage()
    calls = tuple(ToolCall(id=f"c{i}", name="noop") for i in range(3))
    machine.send(ModelReplied(waiting.id, ModelResponse(tool_calls=calls)))
    run = machine._run
    for record in [run, *run.calls, *run.steps]:
        assert not hasattr(record, "__dict__") and gc.is_tracked(record)
        assert not any(isinstance(part, set) for part in gc.get_referents(record))
    restored = TurnMachine.restore(machine.config, machine.checkpoint().to_json())
    assert restored.checkpoint() == machine.checkpoint()
    assert restored.checkpoint().to_json() == machine.checkpoint().to_json()
