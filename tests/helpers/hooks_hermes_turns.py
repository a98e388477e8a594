"""Run in a subprocess with hermes-agent on the path (test_hooks_hermes.py): Hermes's own plugin
loader finds the recall provider in $HERMES_HOME/plugins/recall/, Hermes's MemoryManager drives
three turns, and the script prints what each turn injected (JSON)."""

import json
import os
import threading

from agent.memory_manager import MemoryManager
from agent.memory_provider import MemoryProvider
from plugins.memory import discover_memory_providers, load_memory_provider

from pipeline.hooks.source import Source
from tests.helpers.hooks_fakes import HIT, MISS, FakeCache, FakeService

home = os.environ["HERMES_HOME"]
names = [name for name, _desc, _ok in discover_memory_providers()]
provider = load_memory_provider("recall")
gate = threading.Event()
service = FakeService(gate=gate)
out = {
    "discovered": "recall" in names,
    "is_provider": isinstance(provider, MemoryProvider),
    "name": provider.name,
    "available": provider.is_available(),  # from $HERMES_HOME/recall.json
}
provider.source = Source(cache=FakeCache("oks"), recaller=service, format="oks")
provider.initialize("s1", hermes_home=home, platform="cli")
manager = MemoryManager()
manager.add_provider(provider)
out["turn1"] = manager.prefetch_all(HIT, session_id="s1")  # a cache hit
manager.queue_prefetch_all(HIT, session_id="s1")  # after turn 1, as Hermes does: turn 1's text
# turn 2 asks MISS: computed now, for this turn (the service waits at the gate until set below)
threading.Timer(0.2, gate.set).start()
out["turn2"] = manager.prefetch_all(MISS, session_id="s1")
manager.flush_pending(timeout=30)
provider.wait("s1", timeout=30)
# a text nothing recalls injects nothing (never an earlier turn's recall)
out["turn3"] = manager.prefetch_all("something new entirely", session_id="s1")
out["calls"] = service.calls
provider.shutdown()

# a provider as Hermes sets it up: its source from $HERMES_HOME/recall.json (an endpoint only)
http = load_memory_provider("recall")
http.initialize("s2", hermes_home=home, platform="cli")
manager = MemoryManager()
manager.add_provider(http)
out["http_turn1"] = manager.prefetch_all(HIT, session_id="s2")  # the service's hit, this turn
out["http_turn2"] = manager.prefetch_all(MISS, session_id="s2")  # computed by the service now
out["http_turn3"] = manager.prefetch_all("something new entirely", session_id="s2")
print(json.dumps(out))
