"""Event tab: the raw record under the replay cursor (envelope and payload)."""

import json

from rich.text import Text

from tracetorch.tui.panes.base import Pane, code, heading, missing


class EventPane(Pane):
    FOLLOWS_EVENT = True  # re-rendered on every replay step
    TITLE = "Event"

    def show(self, model, c, event=None) -> None:
        if event is None or not (0 <= event < len(model.trace.events)):
            self.set_body(missing("Event (open the replay with r)"))
            return
        ev = model.trace.events[event]
        head = Text.assemble(
            (f"#{event} ", "bold"), (ev.key, "bold cyan"),
            f"  compile {ev.compile_id if ev.compile_id is not None else '-'}",
            f"  {model.trace.where(ev)}  {ev.time}  {ev.pathname}:{ev.source_line}")
        meta = json.dumps(ev.metadata, indent=1, default=repr)
        items = [head, heading("metadata"), code(meta[:20000], "json")]
        if ev.has_payload:
            payload = ev.payload
            items.append(heading("payload" + ("" if ev.payload_ok else
                                              "  (does not match its md5: truncated or edited)")))
            lang = "json" if ev.encoding == "json" else "python" if "def " in payload[:2000] else "text"
            items.append(code(payload, lang))
        self.set_body(*items)
