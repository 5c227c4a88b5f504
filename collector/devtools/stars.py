"""The fake API's stars: entries of GitHub's star+json list in their real shape and size, made up — explicit ones
(`make_star`, `make_stars`) and the k-th star of a generated history, as an entry or as its JSON text filled into
a template (`generated_star`, `generated_star_json`: a fake page must cost the fake little CPU)."""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta
from importlib import resources

GENERATED_NEWEST = datetime(2026, 1, 1, tzinfo=UTC)


# GitHub's own example repository object (its OpenAPI description; see tests/fixtures/SOURCES.md): every generated
# star has its full shape and size (~5.6 KB), as GitHub's star+json pages do.
_REPOSITORY = resources.files("collector.devtools").joinpath("data/github_repository.json").read_text()


def make_star(repo_id: int, starred_at: datetime) -> dict:
    owner = f"owner{repo_id % 97}"
    text = (
        _REPOSITORY.replace("octocat/Hello-World", f"{owner}/repo{repo_id}")
        .replace("Hello-World", f"repo{repo_id}")
        .replace("octocat", owner)
    )
    repo = json.loads(text)
    repo.update(id=repo_id, description=f"Repository number {repo_id}", created_at="2020-01-01T00:00:00Z")
    repo["owner"].update(id=repo_id % 97 + 1, avatar_url=f"https://avatars.githubusercontent.com/u/{repo_id % 97}")
    return {"starred_at": starred_at.strftime("%Y-%m-%dT%H:%M:%SZ"), "repo": repo}


def make_stars(count: int, seed: int = 0, newest: datetime | None = None, id_pool: int = 100_000) -> list[dict]:
    """`count` distinct stars, newest first, one hour apart, repo ids drawn from a shared pool."""
    newest = newest or GENERATED_NEWEST
    ids = random.Random(seed).sample(range(1, id_pool + 1), count)
    return [make_star(repo_id, newest - timedelta(hours=i)) for i, repo_id in enumerate(ids)]


SENTINEL = 987654321


def _star_template() -> str:
    """A star's JSON text with placeholders, so that a page of generated stars is filled in, not serialised."""
    star = make_star(SENTINEL, GENERATED_NEWEST)
    text = json.dumps(star).replace(star["starred_at"], "@T@")
    text = text.replace(f"owner{SENTINEL % 97}", "@O@").replace(f'"id": {SENTINEL % 97 + 1}', '"id": @OID@')
    return text.replace(f"/u/{SENTINEL % 97}", "/u/@AV@").replace(str(SENTINEL), "@I@")


STAR_PARTS: list[str] = []  # the template cut at its placeholders: literal text, then a placeholder's name, ...


def generated_star_json(seed: int, k: int) -> str:
    """The JSON text of generated_star(seed, k), made by filling the template's pieces (far faster than serialising,
    and than replacing each placeholder through the whole text: a fake page must cost the fake little CPU, which
    the bench's machine shares with the collector)."""
    if not STAR_PARTS:
        STAR_PARTS.extend(re.split("@(T|O|OID|AV|I)@", _star_template()))
    repo_id = 1 + (k * 7919 + seed * 1543) % 1_000_003
    values = {
        "T": (GENERATED_NEWEST - timedelta(minutes=k)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "O": f"owner{repo_id % 97}",
        "OID": str(repo_id % 97 + 1),
        "AV": str(repo_id % 97),
        "I": str(repo_id),
    }
    parts = STAR_PARTS[:]
    parts[1::2] = [values[name] for name in parts[1::2]]
    return "".join(parts)


def generated_star(seed: int, k: int) -> dict:
    """The k-th newest star of a generated history: distinct repo ids for k < 1,000,003, a minute apart."""
    return make_star(1 + (k * 7919 + seed * 1543) % 1_000_003, GENERATED_NEWEST - timedelta(minutes=k))
