"""The rows of a run over several GPUs as they arrive: one JSON-lines file per GPU, and the merge.

Every rank appends each row the moment its child sends it (flushed and synced), so a worker
that dies loses only what it had in flight. The files of one plan share a directory:

    <journal root>/<gpu model>/<fingerprint>/<device uuid>.jsonl

journal root: STUDY_JOURNAL_DIR, default <state root>/build/journal. The fingerprint hashes
what decides the rows (reports root, plan, shapes, settings, --replicate, and the bytes of the
stage files and of study/), so a re-run of the same command finds the rows of the attempt that
failed and measures only what is missing, and a changed kernel never resumes stale rows.
Records, one a line (a: the attempt, the time.time() its rank started; w: the time.time() the
record was written; dev: the GPU's uuid):

    {"t": "assigned", "a", "dev", "device": {...}, "units": [[precision, M, N, K], ...]}
    {"t": "row", "a", "dev", "unit": [precision, M, N, K], "row": {...}}
    {"t": "resources" | "autotune" | "crashes" | "split" | "ceilings" | "builds", "a", "dev", "rows": [...]}
    {"t": "split", ..., "seconds": the group's wall on this GPU in this attempt}
    {"t": "env", "a", "dev", "env": {...}}

pick() is the merge: per unit (per unit and GPU with --replicate) the rows of the latest attempt
that has all of them, else of the latest attempt that has some (the unit is then missing).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .plan import Entry
from .registry import PACKAGE_PARENT, ROOT, STATE_ROOT
from .results import AUTOTUNE_KEY


def journal_root() -> Path:
    return Path(os.environ.get("STUDY_JOURNAL_DIR", STATE_ROOT / "build" / "journal"))


def files_digest(files) -> str:
    """sha1 of files' names and bytes, in the order given."""
    h = hashlib.sha1()
    for p in files:
        h.update(Path(p).name.encode() + b"\0" + Path(p).read_bytes())
    return h.hexdigest()


def sources_digest() -> str:
    """sha1 of the stage files and the package's modules (names and bytes)."""
    files = [p for d in (ROOT / "cuda_src", ROOT / "triton_kernels") if d.is_dir() for p in sorted(d.rglob("*"))]
    files += sorted((PACKAGE_PARENT / "study").glob("*.py"))
    return files_digest(p for p in files if p.is_file() and "__pycache__" not in p.parts)


def fingerprint(**parts) -> str:
    """A short hash of what decides a run's rows (json-able parts) and of the sources."""
    text = json.dumps(parts, sort_keys=True, default=str) + sources_digest()
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def directory(gpu: str, fp: str) -> Path:
    return journal_root() / gpu / fp


class Journal:
    """One GPU's file: append(record) writes one line, flushed and fsync'd."""

    def __init__(self, folder: Path, dev: str, attempt: float):
        self.path = Path(folder) / f"{''.join(c if c.isalnum() or c in '-_' else '_' for c in dev)}.jsonl"
        self.dev, self.attempt, self.records = dev, attempt, []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a")

    def append(self, t: str, **fields) -> dict:
        rec = {"t": t, "a": self.attempt, "w": time.time(), "dev": self.dev, **fields}
        self._f.write(json.dumps(rec, default=str) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())
        self.records.append(rec)
        return rec

    def close(self):
        self._f.close()


def read(folder: Path) -> list:
    """Every record of the files in folder; a line cut short by a killed writer is left out."""
    out = []
    for p in sorted(Path(folder).glob("*.jsonl")):
        for line in p.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "t" in rec:
                out.append(rec)
    return out


def unique(records: list) -> list:
    """records without repeats (the same file read on two ranks of a shared file system)."""
    seen, out = set(), []
    for r in records:
        k = json.dumps(r, sort_keys=True, default=str)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


def label(row: dict) -> str:
    """The plan's entry label of a row (plan.Entry.label)."""
    return Entry(row["family"], row["stage"], row["dtype"], row["layout"], row.get("kind", "stage"),
                 scaling=row.get("scaling") or "").label


@dataclass
class Picked:
    rows: dict = field(default_factory=dict)      # {(unit key, dev or ""): [rows]} chosen
    done: set = field(default_factory=set)        # {(unit key, dev or "")} complete
    assigned: dict = field(default_factory=dict)  # {unit key: {dev}} of the latest attempts
    started: dict = field(default_factory=dict)   # {unit key: {dev}} with rows of it (claimed units)
    devices: dict = field(default_factory=dict)   # {dev: device info}
    latest: dict = field(default_factory=dict)    # {dev: latest attempt}

    def extras(self, records: list, t: str) -> list:
        """The rows of records of type t from every attempt, the newest attempt's first (a resumed
        run keeps what its earlier attempts' groups recorded; a de-duplication keeps the newest)."""
        return [x for r in sorted((r for r in records if r["t"] == t), key=lambda r: -r["a"]) for x in r["rows"]]

    def attempts(self, records: list) -> list:
        """Each GPU's attempts at this run, oldest first: when it started, its groups' seconds, and
        the seconds to its last journaled record (a run resumed after a time limit spans several)."""
        out: dict = {}
        for r in records:
            if r["dev"] in self.devices:
                at = out.setdefault((r["a"], r["dev"]), {"started_utc": time.strftime(
                    "%Y-%m-%d %H:%M:%S", time.gmtime(r["a"])), "gpu": self.describe(r["dev"]), "groups_s": {},
                    "journaled_s": 0.0})
                at["journaled_s"] = round(max(at["journaled_s"], r.get("w", r["a"]) - r["a"]), 1)
                if r["t"] == "split" and "seconds" in r:
                    at["groups_s"].update({x["precision"]: round(r["seconds"], 1) for x in r["rows"]})
        return [out[k] for k in sorted(out)]

    def describe(self, dev: str) -> str:
        """A GPU as the run's messages name it: node, index and uuid."""
        d = self.devices.get(dev, {})
        return f"node {d.get('node', '?')} GPU {d.get('device_index', '?')} ({dev})"

    def lost(self, work: dict, replicate: bool, folder) -> list:
        """One line per GPU whose shard lost units (what it was last given and did not finish);
        the rows that came are kept in the journal and the same command measures only these."""
        out = []
        for dev in (sorted(self.devices) if replicate else [""]):
            by: dict = {}
            for u in work:
                if (u.key, dev) not in self.done:
                    # claimed units (claims.py) are no rank's in advance: the one that began it
                    holders = self.assigned.get(u.key, ()) or self.started.get(u.key, ())
                    for holder in ([dev] if replicate else sorted(holders) or [""]):
                        by.setdefault(holder, []).append(u.name)
            for holder, names in by.items():
                who = f"shard of {self.describe(holder) if holder in self.devices else holder}" if holder \
                    else "begun by no GPU"
                out.append(f"{who}: {len(names)} unit(s) missing ({', '.join(names[:4])}"
                           f"{', ...' if len(names) > 4 else ''}); the rows that came are kept in {folder}: "
                           "the same command measures only what is missing")
        return out


def pick(records: list, work: dict, replicate: bool = False) -> Picked:
    """The merge of every attempt's records. work: {shard.Unit: [entry labels]} of the plan."""
    want = {u.key: set(labels) for u, labels in work.items()}
    groups: dict = {}
    out = Picked()
    for r in records:
        dev, a = r["dev"], r["a"]
        out.latest[dev] = max(a, out.latest.get(dev, a))
        if r["t"] == "assigned":
            out.devices[dev] = r.get("device", {})
        if r["t"] == "row" and tuple(r["unit"]) in want:
            key = (tuple(r["unit"]), dev if replicate else "")
            groups.setdefault(key, {}).setdefault((a, dev), {})[label(r["row"])] = r["row"]
            out.started.setdefault(key[0], set()).add(dev)
    for r in records:
        if r["t"] == "assigned" and r["a"] == out.latest[r["dev"]]:
            for u in r["units"]:
                out.assigned.setdefault(tuple(u), set()).add(r["dev"])
    for key, by_attempt in groups.items():
        full = [k for k, rows in by_attempt.items() if want[key[0]] <= set(rows)]
        best = max(full or by_attempt, key=lambda k: (k[0], len(by_attempt[k])))
        out.rows[key] = list(by_attempt[best].values())
        if full:
            out.done.add(key)
    return out


def gathered(picked: Picked, records: list, replicate: bool, order: list) -> tuple:
    """(got for sweep.finish, every GPU's rows or None): the rows picked, every attempt's
    resources, autotune choices (one per AUTOTUNE_KEY), crashes and time splits, the attempts,
    the newest model group and Nsight Compute profile. With replicate, results.csv takes each
    unit from the first GPU in `order` (rank order) that finished it."""
    def dedupe(rows, key=None):   # the same Triton kernel compiled on several GPUs: its rows once
        seen: set = set()
        keys = [tuple(str(x.get(c)) for c in key) if key else json.dumps(x, sort_keys=True, default=str) for x in rows]
        return [x for x, k in zip(rows, keys) if not (k in seen or seen.add(k))]
    rows, every = [], None
    if replicate:
        every = [x for rs in picked.rows.values() for x in rs]
        for k in {k for k, _ in picked.rows}:
            have = [d for d in order if (k, d) in picked.rows]
            best = next((d for d in have if (k, d) in picked.done), have[0])
            rows += picked.rows[(k, best)]
    else:
        rows = [x for rs in picked.rows.values() for x in rs]
    got = {"rows": rows, "resources": dedupe(picked.extras(records, "resources")),
           "autotune": dedupe(picked.extras(records, "autotune"), AUTOTUNE_KEY + (["device_uuid"] if replicate else [])),
           "crashes": list(dict.fromkeys(picked.extras(records, "crashes")))}
    for x in picked.extras(records, "split"):   # seconds by step, summed over the GPUs and attempts
        mine = got.setdefault("split", {}).setdefault(x["precision"], {})
        mine.update({k: round(mine.get(k, 0.0) + v, 1) for k, v in x.items() if k != "precision"})
    got["attempts"] = picked.attempts(records)
    for m in sorted((x for x in records if x["t"] == "model"), key=lambda x: -x["a"])[:1]:   # the newest
        got["model"], got["model_s"] = m["rows"], m.get("seconds")
    for m in sorted((x for x in records if x["t"] == "ncu"), key=lambda x: -x["a"])[:1]:
        got["profile"], got["profile_s"] = m["rows"], m.get("seconds")
    return got, every
