"""A writer process for tests/test_crash.py, like a server: the library mounted, watched, and
written to. `crash_writer.py ROOT TAG COUNT`: COUNT observations to entities wTAG-0..19 (a
CONFLICT is retried), each printed "name<TAB>text" once acknowledged. `crash_writer.py ROOT
TAG 0 ENTITY`: observations to ENTITY until killed, a CONFLICT skipped; prints "written" once."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from services import service_for

from memloci.core.errors import ConflictError
from memloci.core.model import ObservationBatch


def main() -> None:
    root, tag, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    service = service_for("markdown", root)
    service.watch_libraries()
    service.store()
    if count:
        for i in range(count):
            name, text = f"w{tag}-{i % 20}", f"{tag} acknowledged {i}"
            while True:
                try:
                    service.add_observations([ObservationBatch(name, (text,))])
                    break
                except ConflictError:
                    time.sleep(0.05)  # the file changed under us: the watcher picks it up, then retry
            print(f"{name}\t{text}", flush=True)
            time.sleep(0.02)  # a server's pace, so the reindexes run while it writes
    else:
        said = False
        for i in range(10**9):
            try:
                service.add_observations([ObservationBatch(sys.argv[4], (f"server observation {i}",))])
            except ConflictError:
                continue
            if not said:
                print("written", flush=True)
                said = True
            time.sleep(0.005)
    service.close()


if __name__ == "__main__":
    main()
