"""One worker of the PostgreSQL fleet benchmark (benches/test_bench_postgres.py).

    python pg_fleet_worker.py DSN SCHEMA DURABILITY ROUNDS SESSION_ID...

For each round, for each of its sessions: opens it as the writer, appends a user and an
assistant message, rebuilds the context, closes. Prints one JSON line: the latency of
every append (seconds), the appends made, and how many opens found the session locked
(0 expected: each session belongs to one worker).
"""

from __future__ import annotations

import json
import sys
import time

import sessiontree as st


def main() -> int:
    dsn, schema, durability, rounds, *sids = sys.argv[1:]
    lat: list[float] = []
    locked = 0
    for r in range(int(rounds)):
        for sid in sids:
            try:
                storage = st.PostgresSessionStorage.open(
                    dsn,
                    sid,
                    schema=schema,
                    durability=durability,  # type: ignore[arg-type]
                )
            except st.SessionError as exc:
                if exc.code != "locked":
                    raise
                locked += 1
                continue
            with st.Session(storage) as session:
                for msg in (
                    st.UserMessage(f"question {r}", timestamp=1),
                    st.AssistantMessage([st.TextContent(f"answer {r}")], "p", "m", timestamp=1),
                ):
                    t0 = time.perf_counter()
                    session.append_message(msg)
                    lat.append(time.perf_counter() - t0)
                session.build_context()
    print(json.dumps({"latencies": lat, "appends": len(lat), "locked": locked}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
