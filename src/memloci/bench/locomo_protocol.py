"""The LoCoMo protocol of DESIGN.md §7, shared by `memloci bench locomo` (through MCP), the
in-process lab (bench/locomo_lab.py) and `memloci bench notes`: the turns a conversation stores,
the evidence ids a question names, and turn-level recall@k."""

from __future__ import annotations

import re
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def evidence_ids(evidence: list[Any]) -> list[str]:
    """Normalized dia ids: "D8:6; D9:17" is two ids, "D30:05" is "D30:5", "D:11:26" is "D11:26"."""
    out = []
    for item in evidence:
        for part in re.split(r"[;,]", str(item)):
            m = re.match(r"\s*D:?(\d+):(\d+)", part)
            if m:
                out.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    return list(dict.fromkeys(out))


def turns_of(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """Every dialogue turn of a conversation, as the memory it is stored as: content, dia id,
    session number and the session's date."""
    conv = sample["conversation"]
    turns, s = [], 1
    while f"session_{s}" in conv:
        date = conv.get(f"session_{s}_date_time", "")
        for t in conv[f"session_{s}"]:
            content = f"{t['speaker']}: {t['text']}"
            if t.get("blip_caption"):
                content += f" [image: {t['blip_caption']}]"
            turns.append({"content": content, "dia_id": t["dia_id"], "session": s, "date": date})
        s += 1
    return turns


def recall(rows: list[dict[str, Any]], k: int) -> float:
    """Turn-level recall@k: the share of each question's evidence turns among its first k hits,
    averaged over the questions (rows of {evidence, ranked})."""
    if not rows:
        return 0.0
    return sum(sum(e in r["ranked"][:k] for e in r["evidence"]) / len(r["evidence"]) for r in rows) / len(rows)
