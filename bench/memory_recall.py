"""Memory recall quality: recall@5 of the keyword index alone and of the keyword | vector hybrid.

Run it: ``.venv/bin/python bench/memory_recall.py`` (offline, a few seconds).

The labelled set is built here: 60 notes about one user and 24 queries, each with the one note
that answers it. Half of the queries share words with their note (lexical), half only paraphrase
it (semantic). The vector arm uses ``ConceptEmbedder``, a deterministic stand-in for an embedding
model: it maps words to concepts through a small synonym table and hashes the concepts into a
vector. It is not a real model; it shows what the fusion does when an arm understands synonyms
that keywords miss. Figures are recall ratios (hits / queries), never timings.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lovia.plugins.memory import Doc, KeywordIndex, VectorIndex  # noqa: E402

NOTES = [
    "Has a dog named Rex, a border collie",
    "Lives in Lisbon, in the Alfama district",
    "Works as a backend engineer at a logistics company",
    "Prefers concise answers without bullet points",
    "Is allergic to peanuts",
    "Drives a 2015 Toyota Corolla",
    "Plays the cello in a community orchestra",
    "Speaks Portuguese, English and some German",
    "Runs a half marathon every spring",
    "Vegetarian since 2019",
    "Daughter Ana starts school in September",
    "Uses Neovim with a custom Lua config",
    "Main laptop is a ThinkPad X1 running Fedora",
    "Deploys services with Kubernetes on Hetzner",
    "Prefers PostgreSQL over MySQL for new projects",
    "Takes the 8:15 train to work on weekdays",
    "Birthday is on 14 March",
    "Wife Marta is a pediatrician",
    "Supports Benfica football club",
    "Reads science fiction, favourite author is Ursula K. Le Guin",
    "Has a mortgage with a fixed rate until 2030",
    "Is learning Japanese on weekends",
    "Brews pour-over coffee every morning",
    "Keeps a vegetable garden with tomatoes and basil",
    "Had knee surgery in 2022 and avoids running downhill",
    "Timezone is Europe/Lisbon",
    "Manager is called Pedro",
    "Team uses GitHub Actions for CI",
    "On call every fourth week",
    "Wants code comments in English",
    "Budget for the new bike is 1500 euros",
    "Flies TAP when travelling to Brazil",
    "Parents live in Porto",
    "Has a cat named Miso",
    "Prefers dark mode in every editor",
    "Writes Python 3.12 and avoids Python 2 idioms",
    "Keeps passwords in Bitwarden",
    "Dentist appointment every six months at Clinica Sorriso",
    "Sister Joana lives in Berlin",
    "Plans a trip to Kyoto next April",
    "Prefers metric units",
    "Drinks no alcohol",
    "Is saving for a sailing course",
    "Favourite food is bacalhau",
    "Uses a standing desk at home",
    "Has two monitors at 27 inch",
    "Studies for the AWS solutions architect exam",
    "Volunteers at the food bank on Saturdays",
    "Son Tiago plays futsal",
    "Reads the news in the morning on the train",
    "Streams music on Spotify",
    "Hates long meetings and prefers written updates",
    "Electric scooter for short trips in the city",
    "Pays taxes in Portugal",
    "Home internet is fiber with MEO",
    "Bank is Millennium BCP",
    "Insurance with Fidelidade for the house",
    "Watches Formula 1 races",
    "Learning to bake sourdough bread",
    "Sleeps badly when drinking coffee after 4pm",
]

QUERIES = [  # (query, index of the answering note); the first half lexical, the second semantic
    ("what is the name of my dog", 0),
    ("which district do I live in", 1),
    ("am I allergic to anything", 4),
    ("what car do I drive", 5),
    ("which instrument do I play in the orchestra", 6),
    ("what editor config do I use", 11),
    ("which club do I support", 18),
    ("where do my parents live", 32),
    ("what is my cat called", 33),
    ("what is the bike budget", 30),
    ("which exam am I studying for", 46),
    ("when is my birthday", 16),
    ("what is my pet's name", 0),
    ("which city is home", 1),
    ("what is my job", 2),
    ("what should I not eat", 4),
    ("what vehicle do I own", 5),
    ("do I eat meat", 9),
    ("where is my brother or sister", 38),
    ("who is my boss", 26),
    ("what is my spouse's profession", 17),
    ("which soccer team do I like", 18),
    ("what do I drink in the morning", 22),
    ("how do I commute", 15),
]

CONCEPTS = {
    "dog": "pet",
    "cat": "pet",
    "pet": "pet",
    "collie": "pet",
    "lisbon": "home",
    "alfama": "home",
    "lives": "home",
    "home": "home",
    "city": "home",
    "live": "home",
    "engineer": "job",
    "works": "job",
    "job": "job",
    "work": "job",
    "company": "job",
    "allergic": "food_risk",
    "peanuts": "food_risk",
    "eat": "food",
    "vegetarian": "food",
    "meat": "food",
    "food": "food",
    "bacalhau": "food",
    "toyota": "car",
    "corolla": "car",
    "drive": "car",
    "drives": "car",
    "car": "car",
    "vehicle": "car",
    "sister": "sibling",
    "brother": "sibling",
    "joana": "sibling",
    "manager": "boss",
    "boss": "boss",
    "pedro": "boss",
    "wife": "spouse",
    "spouse": "spouse",
    "marta": "spouse",
    "pediatrician": "profession",
    "profession": "profession",
    "benfica": "football",
    "football": "football",
    "soccer": "football",
    "club": "football",
    "team": "football",
    "coffee": "drink",
    "drink": "drink",
    "brews": "drink",
    "morning": "morning",
    "train": "commute",
    "commute": "commute",
    "scooter": "commute",
}


class ConceptEmbedder:
    """A deterministic stand-in for an embedding model (see the module docstring)."""

    id = "bench-concepts-64"

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def _one(self, text: str) -> list[float]:
        vec = [0.0] * 64
        for word in re.findall(r"\w+", text.lower()):
            concept = CONCEPTS.get(word)
            if concept is None:
                continue
            slot = int(hashlib.sha256(concept.encode()).hexdigest(), 16) % 64
            vec[slot] += 1.0
        size = math.sqrt(sum(x * x for x in vec))
        return [x / size for x in vec] if size else [1e-6] * 64


async def measure(root: Path) -> dict[str, dict[str, float]]:
    docs = [Doc(f"n{i}", text) for i, text in enumerate(NOTES)]
    keyword = KeywordIndex(root / "archive.db")
    vector = VectorIndex(root / "vectors.db", ConceptEmbedder())
    hybrid = keyword | vector
    await hybrid.add(docs)
    table: dict[str, dict[str, float]] = {}
    half = len(QUERIES) // 2
    for label, index in (("fts only", keyword), ("hybrid (fts | vector)", hybrid)):
        found = []
        for query, target in QUERIES:
            hits = await index.search(query, 5)
            found.append(f"n{target}" in [h.doc.id for h in hits])
        table[label] = {
            "lexical": sum(found[:half]) / half,
            "semantic": sum(found[half:]) / (len(QUERIES) - half),
            "all": sum(found) / len(found),
        }
    keyword.close()
    vector.close()
    return table


def main() -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        table = asyncio.run(measure(Path(tmp)))
    print(f"memory recall@5: {len(NOTES)} notes, {len(QUERIES)} labelled queries ({len(QUERIES) // 2} lexical)")
    print(f"{'index':<24}{'lexical':>9}{'semantic':>10}{'all':>7}")
    for label, row in table.items():
        print(f"{label:<24}{row['lexical']:>9.2f}{row['semantic']:>10.2f}{row['all']:>7.2f}")
    fts, hybrid = table["fts only"]["all"], table["hybrid (fts | vector)"]["all"]
    print(f"ratio hybrid / fts (all queries): {hybrid / fts:.2f}" if fts else "fts found nothing")
    return table


if __name__ == "__main__":
    main()
