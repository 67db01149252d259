"""Memory: notes, archive, curation, dreaming, recall, the embedder, and a crash in the middle."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lovia import Agent, CheckpointOptions, Memory, OpenAIEmbedder, ProviderError, Runner, SQLiteCheckpointer, UserError
from lovia.plugins.memory import Doc, FileNotesStore, HybridIndex, KeywordIndex, VectorIndex
from lovia.stores import SQLiteSession
from lovia.testing import ScriptedProvider, call, fail, text
from lovia.testing.crash import Boundary, crash_test
from lovia.transcript import ToolResultEntry

from .memory_support import curator

FACTORY = "tests.plugins.memory_support:memory_scenario"


def notes_file(root: Path) -> list[str]:
    path = root / "MEMORY.md"
    return path.read_text().splitlines() if path.exists() else []


def archive(root: Path) -> list[tuple[str, str]]:
    path = root / "archive.db"
    if not path.exists():
        return []
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT id, text FROM memory_fts").fetchall())


def without_stamps(lines: list[str]) -> list[str]:
    return [line.split("] ", 1)[1] for line in lines]


# ----------------------------------------------------------------------------- unhappy paths


async def test_a_sigkilled_run_resumes_with_the_memory_a_finished_run_would_have(tmp_path: Path) -> None:
    async def open_sqlite(path: str):
        return SQLiteSession(path, wal=True), SQLiteCheckpointer(path, wal=True)

    report = await crash_test(
        FACTORY,
        store=str(tmp_path / "crash.db"),
        reference_store=str(tmp_path / "reference.db"),
        run_id="mem-1",
        boundary=Boundary.IN_TOOL,
        tool="step",
        workdir=tmp_path,
        open_stores=open_sqlite,
    )
    assert report.crashed.killed, report.crashed.stderr
    assert report.ok, report.problems
    crashed, reference = tmp_path / "crash.db.memory", tmp_path / "reference.db.memory"
    assert notes_file(crashed) == notes_file(reference)
    assert without_stamps(notes_file(crashed)) == ["Drinks green tea", "Lives in Lisbon"]
    assert archive(crashed) == archive(reference)
    assert [i for i, _ in archive(crashed)] == ["mem-1:0", "mem-1:5", "mem-1:episode"]


async def test_side_queries_fail_open(tmp_path: Path) -> None:
    broken = ScriptedProvider(lambda entries, tools: fail(RuntimeError("model down")))
    host = ScriptedProvider([call("recall", {"query": "car"}), text("ok")])
    mem = Memory(root=tmp_path, model=broken, dream_every_days=None)
    await mem._archive.add([Doc("old:1", "we talked about the car service", 1.0, {"role": "user"})])  # type: ignore[union-attr]
    result = await Runner.run(Agent(name="a", model=host, plugins=[mem]), "FACT: ignored when the digest fails")
    [recall] = [e.output for e in result.entries if isinstance(e, ToolResultEntry)]
    assert "car service" in recall  # raw excerpts when expansion and summary fail
    assert notes_file(tmp_path) == []  # no digest, nothing invented


async def test_a_bad_dream_answer_keeps_the_notes(tmp_path: Path) -> None:
    mem = Memory(root=tmp_path)
    await mem.remember("Prefers tea")
    garbage = ScriptedProvider([text("I'd rather not")])
    assert await mem.dream(garbage) == (1, 1)
    assert without_stamps(notes_file(tmp_path)) == ["Prefers tea"]
    with pytest.raises(UserError):
        await mem.dream()


def test_configuration_errors(tmp_path: Path) -> None:
    class Fixed:
        id = "fixed"

        async def embed(self, texts):
            return [[1.0] for _ in texts]

    with pytest.raises(UserError, match="cannot be combined"):
        Memory(root=tmp_path, embedder=Fixed(), index=None)
    with pytest.raises(UserError):
        Memory(root=tmp_path, recall_k=0)


# ----------------------------------------------------------------------------- notes


async def test_notes_verbs_and_the_file_format(tmp_path: Path) -> None:
    mem = Memory(root=tmp_path)
    assert await mem.remember("Prefers  concise answers.") is True
    assert await mem.remember("prefers concise answers") is False  # same fact
    assert await mem.remember("   ") is False
    assert await mem.remember("Works on lovia")
    lines = notes_file(tmp_path)
    assert len(lines) == 2 and all(line.startswith("- [20") for line in lines)
    (tmp_path / "MEMORY.md").write_text("# My notes\n" + "\n".join(lines) + "\nsome prose\n- [2020-01] Old fact\n")
    assert without_stamps([line for line in (await mem.notes_body()).splitlines()]) == [
        "Prefers concise answers.",
        "Works on lovia",
        "Old fact",
    ]
    assert await mem.forget("old FACT") is True and await mem.forget("nothing like it") is False
    body = await mem.replace_notes("- a\n- A\n* b\nnot a bullet\n")
    assert without_stamps(body.splitlines()) == ["a", "b"]


async def test_a_run_uses_the_tools_archives_and_curates(tmp_path: Path) -> None:
    host = ScriptedProvider([call("remember", {"fact": "Has a dog named Rex"}), text("Noted!")])
    mem = Memory(root=tmp_path, model=curator())
    result = await Runner.run(Agent(name="a", model=host, plugins=[mem]), "FACT: Lives in Porto")
    system = str(host.requests[0].entries[0].content)
    assert "## Memory" in system and "(no notes yet)" in system and "recall" in system
    assert {t.name for t in host.requests[0].tools} >= {"remember", "forget", "recall"}
    assert without_stamps(notes_file(tmp_path)) == ["Has a dog named Rex", "Lives in Porto"]
    ids = [i for i, _ in archive(tmp_path)]
    assert ids == [f"{result.run_id}:0", f"{result.run_id}:3", f"{result.run_id}:episode"]
    assert (tmp_path / ".dreamed").exists() and mem.dreamed_at() is not None  # first cadence dream ran


async def test_a_replayed_run_does_not_duplicate_the_archive(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    for _ in range(2):
        host = ScriptedProvider([text("hello")])
        mem = Memory(root=tmp_path / "m", model=curator(), dream_every_days=None)
        await Runner.run(
            Agent(name="a", model=host, plugins=[mem]),
            "FACT: Speaks Portuguese",
            checkpoint=CheckpointOptions(SQLiteCheckpointer(db), "same-run"),
        )
    assert [i for i, _ in archive(tmp_path / "m")] == ["same-run:0", "same-run:1", "same-run:episode"]
    assert without_stamps(notes_file(tmp_path / "m")) == ["Speaks Portuguese"]


async def test_notes_stay_pinned_per_session_until_idle(tmp_path: Path) -> None:
    session = SQLiteSession(str(tmp_path / "s.db"))
    mem = Memory(root=tmp_path / "m", auto_curate=False, dream_every_days=None)
    await mem.remember("First fact")
    seen = []
    for n in range(2):
        host = ScriptedProvider([text("ok")])
        await Runner.run(Agent(name="a", model=host, plugins=[mem]), f"hi {n}", session=session, session_id="s")
        seen.append(str(host.requests[0].entries[0].content))
        await mem.remember("Second fact")
    assert seen[0] == seen[1] and "Second fact" not in seen[1]  # byte-identical prompt in the session
    host = ScriptedProvider([text("ok")])
    await Runner.run(Agent(name="a", model=host, plugins=[mem]), "other", session=session, session_id="t")
    assert "Second fact" in str(host.requests[0].entries[0].content)  # another session reads live notes
    mem.notes_refresh_after = 0
    host = ScriptedProvider([text("ok")])
    await Runner.run(Agent(name="a", model=host, plugins=[mem]), "again", session=session, session_id="s")
    assert "Second fact" in str(host.requests[0].entries[0].content)


async def test_index_none_keeps_notes_only(tmp_path: Path) -> None:
    host = ScriptedProvider([text("ok")])
    mem = Memory(root=tmp_path, index=None, auto_curate=False)
    await Runner.run(Agent(name="a", model=host, plugins=[mem]), "hello")
    assert "recall" not in {t.name for t in host.requests[0].tools}
    assert not (tmp_path / "archive.db").exists()


async def test_background_curation_settles_on_drain(tmp_path: Path) -> None:
    host = ScriptedProvider([text("ok")])
    mem = Memory(root=tmp_path, model=curator(), curate_in_background=True, dream_every_days=None)
    await Runner.run(Agent(name="a", model=host, plugins=[mem]), "FACT: Likes jazz")
    await mem.drain()
    assert without_stamps(notes_file(tmp_path)) == ["Likes jazz"]


async def test_custom_notes_store(tmp_path: Path) -> None:
    class ListStore:
        def __init__(self) -> None:
            self.facts: list[str] = []

        async def load(self) -> list[str]:
            return list(self.facts)

        async def save(self, facts: list[str]) -> None:
            self.facts = list(facts)

    store = ListStore()
    mem = Memory(root=tmp_path, notes=store)
    await mem.remember("x")
    assert without_stamps(store.facts) == ["x"] and not (tmp_path / "MEMORY.md").exists()
    assert isinstance(FileNotesStore(tmp_path / "n.md"), FileNotesStore)


# ----------------------------------------------------------------------------- dreaming


async def test_dreams_on_overflow_and_on_cadence_with_a_backup(tmp_path: Path) -> None:
    mem = Memory(root=tmp_path, model=curator(), auto_curate=False, notes_budget=60, dream_every_days=3)
    for fact in ["Prefers tea", "prefers tea!", "Went to a one-off concert", "Lives in Lisbon"]:
        await mem.remember(fact)
    before = notes_file(tmp_path)
    host = ScriptedProvider([text("ok")])
    await Runner.run(Agent(name="a", model=host, plugins=[mem]), "hello")
    assert without_stamps(notes_file(tmp_path)) == ["Prefers tea", "Lives in Lisbon"]
    assert (tmp_path / "MEMORY.md.bak").read_text().splitlines() == before
    stamp = mem.dreamed_at()
    # within the cadence and nothing changed: no new dream
    mem.notes_budget = 8000
    await Runner.run(Agent(name="a", model=ScriptedProvider([text("ok")]), plugins=[mem]), "hello")
    assert mem.dreamed_at() == stamp
    # the cadence has passed but the notes are unchanged since the dream: still none
    old = time.time() - 4 * 86400
    os.utime(tmp_path / ".dreamed", (old, old))
    await Runner.run(Agent(name="a", model=ScriptedProvider([text("ok")]), plugins=[mem]), "hello")
    assert mem.dreamed_at() == old
    await mem.remember("Went to a one-off party")
    await Runner.run(Agent(name="a", model=ScriptedProvider([text("ok")]), plugins=[mem]), "hello")
    assert mem.dreamed_at() > old and "one-off" not in "".join(notes_file(tmp_path))


# ----------------------------------------------------------------------------- recall and indexes


async def test_recall_expands_lexical_queries_and_summarizes(tmp_path: Path) -> None:
    mem = Memory(root=tmp_path, model=curator(), auto_curate=False)
    await mem._archive.add([Doc("r:1", "My automobile broke down on the highway", 1.0, {"role": "user"})])  # type: ignore[union-attr]
    host = ScriptedProvider([call("recall", {"query": "car"}, call_id="a"), text("ok")])
    result = await Runner.run(Agent(name="a", model=host, plugins=[mem]), "hello")
    assert [e.output for e in result.entries if isinstance(e, ToolResultEntry)] == ["SUMMARY of 1 excerpt(s)"]
    raw = Memory(root=tmp_path, model=curator(), auto_curate=False, summarize_recall=False, expand_query=False)
    host = ScriptedProvider([call("recall", {"query": "car"}, call_id="a"), text("ok")])
    result = await Runner.run(Agent(name="a", model=host, plugins=[raw]), "and now?")
    [out] = [e.output for e in result.entries if isinstance(e, ToolResultEntry)]
    assert out == "Nothing about that in earlier conversations."  # no expansion: "car" misses "automobile"


async def test_keyword_index_bm25_cjk_and_upserts(tmp_path: Path) -> None:
    ix = KeywordIndex(tmp_path / "k.db")
    await ix.add(
        [
            Doc("1", "Deploying the service to production"),
            Doc("2", "我家的猫很可爱"),
            Doc("3", "The production database needs a backup before deploying"),
        ]
    )
    assert [h.doc.id for h in await ix.search("deployment production", 5)][:2] in (["3", "1"], ["1", "3"])
    assert [h.doc.id for h in await ix.search("猫", 5)] == ["2"]
    assert [h.doc.id for h in await ix.search("可爱的猫", 5)] == ["2"]
    await ix.add([Doc("1", "now about gardening")])
    assert await ix.count() == 3 and [h.doc.id for h in await ix.search("gardening")] == ["1"]
    await ix.remove(["1", "nope"])
    assert await ix.count() == 2
    assert await ix.search('"; DROP TABLE docs; --', 5) == []  # quoted tokens: no FTS syntax leaks in


class _Broken:
    async def add(self, docs):
        raise RuntimeError("down")

    async def remove(self, ids):
        raise RuntimeError("down")

    async def search(self, query, k=5):
        raise RuntimeError("down")


async def test_hybrid_reads_skip_a_broken_arm(tmp_path: Path) -> None:
    good = KeywordIndex(tmp_path / "k.db")
    await good.add([Doc("a", "apples and pears")])
    hybrid = good | _Broken()
    assert isinstance(hybrid, HybridIndex) and len(hybrid.indexes) == 2
    assert [h.doc.id for h in await hybrid.search("apples")] == ["a"]


# ----------------------------------------------------------------------------- the embedder over real HTTP


class _EmbeddingsServer(BaseHTTPRequestHandler):
    calls: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append({"auth": self.headers.get("Authorization"), **body})
        if self.headers.get("Authorization") != "Bearer good-key":
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "bad key"}}')
            return
        vocab = ["fruit", "apple", "car", "engine"]
        data = []
        for i, t in enumerate(body["input"]):
            low = t.lower()
            vec = [
                float("apple" in low or "pear" in low or "fruit" in low),
                float("apple" in low),
                float("car" in low or "engine" in low or "automobile" in low),
                float("engine" in low),
            ]
            data.append({"index": i, "embedding": vec[: len(vocab)] if any(vec) else [0.01, 0.01, 0.01, 0.01]})
        payload = json.dumps({"data": list(reversed(data))}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def embeddings_url():
    _EmbeddingsServer.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


async def test_openai_embedder_and_the_hybrid_default(tmp_path: Path, embeddings_url: str) -> None:
    embedder = OpenAIEmbedder("tiny", api_key="good-key", base_url=embeddings_url, batch_size=2, dimensions=4)
    try:
        vectors = await embedder.embed(["apple pie", "car engine", "pear"])
        assert vectors[0][1] == 1.0 and vectors[1][3] == 1.0 and len(vectors) == 3
        assert [len(c["input"]) for c in _EmbeddingsServer.calls] == [2, 1] and _EmbeddingsServer.calls[0][
            "dimensions"
        ] == 4
        mem = Memory(root=tmp_path, embedder=embedder, auto_curate=False)
        assert isinstance(mem._archive, HybridIndex)
        await mem._archive.add([Doc("1", "I bought pears at the market"), Doc("2", "The automobile needs oil")])
        hits = await mem._archive.search("fruit", 2)
        assert hits[0].doc.id == "1"  # only the vector arm knows pears are fruit
    finally:
        await embedder.aclose()


async def test_embedder_errors_and_a_changed_embedder_wipes_vectors(tmp_path: Path, embeddings_url: str) -> None:
    bad = OpenAIEmbedder("tiny", api_key="wrong", base_url=embeddings_url)
    with pytest.raises(ProviderError) as err:
        await bad.embed(["x"])
    assert err.value.status_code == 401 and "API key" in (err.value.hint or "")
    await bad.aclose()
    down = OpenAIEmbedder("tiny", api_key="k", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ProviderError):
        await down.embed(["x"])
    await down.aclose()

    class Fixed:
        def __init__(self, id: str) -> None:
            self.id = id

        async def embed(self, texts):
            return [[1.0, 0.0] for _ in texts]

    first = VectorIndex(tmp_path / "v.db", Fixed("a"))
    await first.add([Doc("1", "x")])
    assert len(await first.search("x")) == 1
    first.close()
    assert await VectorIndex(tmp_path / "v.db", Fixed("b")).search("x") == []


def test_recall_benchmark_hybrid_is_at_least_as_good_as_keywords(capsys) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "memory_recall", Path(__file__).parents[2] / "bench" / "memory_recall.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)  # type: ignore[union-attr]
    table = bench.main()
    assert len(bench.NOTES) >= 50 and len(bench.QUERIES) >= 20
    fts, hybrid = table["fts only"], table["hybrid (fts | vector)"]
    assert hybrid["lexical"] >= fts["lexical"] and hybrid["semantic"] > fts["semantic"]
    assert "recall@5" in capsys.readouterr().out
