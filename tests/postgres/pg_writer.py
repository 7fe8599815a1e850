"""A writer process for the PostgreSQL fault tests.

    python pg_writer.py DSN SCHEMA SESSION_ID DURABILITY COUNT

Opens the session as its writer (prints ``locked`` and exits 3 if another holds it), then
appends COUNT user messages, printing ``ack <entry id>`` after each append returned (so
the parent knows exactly what was acknowledged), then ``done``. COUNT 0 appends until
killed. An error prints ``error <code>`` and exits 4.
"""

from __future__ import annotations

import sys

import sessiontree as st


def main() -> int:
    dsn, schema, sid, durability, count = sys.argv[1:6]
    try:
        storage = st.PostgresSessionStorage.open(
            dsn,
            sid,
            schema=schema,
            durability=durability,  # type: ignore[arg-type]
        )
    except st.SessionError as exc:
        print(exc.code if exc.code == "locked" else f"error {exc.code}", flush=True)
        return 3 if exc.code == "locked" else 4
    print("open", flush=True)
    n = int(count)
    i = 0
    try:
        while n == 0 or i < n:
            entry = storage.append_message(st.UserMessage(f"message {i}", timestamp=1))
            print(f"ack {entry.id}", flush=True)
            i += 1
    except st.SessionError as exc:
        print(f"error {exc.code}", flush=True)
        return 4
    storage.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
