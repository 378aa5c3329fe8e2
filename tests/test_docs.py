"""Docs that cannot drift: README.md and docs/*.md are read and checked against the repository.

What is checked, in every markdown file of ``DOCS``:

(a) **Paths.** Candidates are the words of inline code spans (`...`), of fenced code blocks,
    and markdown link targets ``(...)``; a ``key=value`` word is split at ``=`` and each side
    is a candidate. A candidate is a repository path when it ends in one of ``EXTENSIONS``
    (.py .yaml .md .sh .png) or when its first component is a top-level entry of the
    repository (``src/``, ``configs/``, ``docs/``, ``tests/``, ``scripts/``, ``benchmarks/``,
    ...). Such a path must exist: relative to the repository root, or (for a bare file name
    or a path that starts inside a package, such as ``train/loop.py``) as the ending of some
    file or folder of the repository, or, for links, relative to the doc's own folder; a
    name that is the stem of an existing file counts (an output prefix such as
    ``--out docs/bleu_minutes`` for docs/bleu_minutes.png).
    Skipped: URLs (``://``), absolute and home paths (``/``, ``~``, ``$``), run and data
    paths (``outputs/``, ``data/``, ``.venv``), placeholders (a word holding ``<``, ``>``,
    ``...``, ``…``, or a part between ``/ _ . : -`` that is one of ``PLACEHOLDERS`` such as RUN,
    DIR, DATE), glob and brace
    examples (``*``, ``{``, ``}``, ``[``), and the files a run writes (``RUN_OUTPUTS``).
(b) **make targets.** Every ``make <target>`` in a code span or block names a target of the
    Makefile.
(c) **Command lines.** Every ``python train.py|evaluate.py|translate.py|serve.py ...`` (or
    ``torchrun ... train.py ...``) line in a fenced code block composes with Hydra
    (``configs/``, config ``train``/``evaluate``/``translate``/``serve``) and validates:
    ``attnmt.train.run_config.validate_config`` for train.py,
    ``attnmt.cli.common.parse_settings`` with
    the entry point's settings schema (``SETTINGS``) for the others (what their ``run``
    does first). Nothing is trained, prepared or loaded: ``ckpt=RUN`` stays a string, and a
    ``<placeholder>`` in a value is replaced by a plain word first. A multirun (``-m``)
    value list ``a,b,c`` is checked one value at a time.
(d) **Config keys.** Every dotted key of a section (``data.``, ``model.``, ``trainer.``,
    ``decode.``) written in a code span or a code block (``trainer.max_steps``,
    ``decode.beam=5``) is a key of the schema: ``attnmt.train.run_config.setting_keys`` of some
    registered model. A code span quoting an error about an unknown key
    (``trainer.max_stpes: unknown key; ...``) is left out.
(e) **Ratios beside their figures.** A ratio written beside the two figures it compares
    must be their quotient, within the rounding of all three as printed (``103 vs 11.6``
    is anything from 102.5/11.65 to 103.5/11.55; ``8.9×`` anything from 8.85 to 8.95).
    The forms (``RATIO_FORMS``; ``×`` or ``x``, a unit such as ``ms`` or ``sent/s`` may
    follow each figure, lines of a paragraph are joined first):
    ``A vs B: N×``, ``A vs B (N×``, ``N× (A vs B`` and ``N× faster (A against B``, read
    either way round (a speed-up is a quotient of times or of rates); ``A / B = N×``,
    ``A / B ≈ N×`` and ``A / B = N%``, read as written. In a table, a column headed
    ``× <baseline> (<column>)`` holds each row's ``<column>`` over the row whose ratio is
    1 (either way round). A ratio computed otherwise (``make benchmark``'s median of
    per-round ratios) is written in none of these forms.
(f) **Generated figures.** docs/results.md's blocks are what ``python -m
    experiments.results_table docs`` writes from the run folders ``results/results_*/``, and
    every ``mean ± std`` figure another doc states is one of the figures it holds (a
    hand-copied figure that the runs have moved past fails).

``test_the_checker_bites`` plants a broken path, a bad key, an unknown make target and a
command line with an unknown setting into a copy of README.md, and each must be reported;
``test_the_ratio_checker_bites`` and ``test_the_figure_checker_bites`` do the same for (e)
and (f) on strings.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from attnmt.cli.common import parse_settings
from attnmt.cli.evaluate import EvalSettings
from attnmt.cli.translate import TranslateSettings
from attnmt.errors import AttnmtError
from attnmt.models.registry import MODELS
from attnmt.serve.settings import ServeSettings
from attnmt.train.run_config import setting_keys, validate_config

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {"evaluate": EvalSettings, "translate": TranslateSettings, "serve": ServeSettings}
CONFIGS = ROOT / "configs"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

EXTENSIONS = (".py", ".yaml", ".md", ".sh", ".png")
PLACEHOLDERS = ("RUN", "DIR", "DATE", "TIME", "MODEL", "CORPUS", "PATH", "HEAD", "FILE")
SKIP_PREFIXES = ("outputs/", "data/", ".venv", "/", "~", "$", "multirun/")
RUN_OUTPUTS = {"results.png", "compare.md", "compare.png", "avg.pt"}
SECTIONS = ("data", "model", "trainer", "decode")
KEY = re.compile(r"(?<![\w./@-])((?:data|model|trainer|decode)(?:\.[a-z_][a-z0-9_]*)+)")
MAKE = re.compile(r"(?<![\w-])make ([a-z][\w-]*)")
ENTRY = re.compile(r"(?:python3? |torchrun .*?)\b(train|evaluate|translate|serve)\.py\b(.*)")


# --- reading the docs ------------------------------------------------------------------------


def split_markdown(text: str) -> tuple[list[str], list[str], list[str]]:
    """(inline code spans, lines of fenced code blocks, link targets) of a markdown text."""
    spans: list[str] = []
    block_lines: list[str] = []
    prose: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        (block_lines if fenced else prose).append(line)
    body = "\n".join(prose)
    spans = re.findall(r"`([^`\n]+)`", body)
    links = re.findall(r"\]\(([^)\s]+)\)", body)
    return spans, block_lines, links


def words(chunks: list[str]) -> Iterator[str]:
    for chunk in chunks:
        for word in chunk.split():
            word = word.strip("\"'(),;:")
            yield from (part for part in word.split("=") if part)


# --- (a) paths -------------------------------------------------------------------------------


@cache
def repo_entries() -> tuple[frozenset[str], frozenset[str]]:
    """(top-level names, every file and folder path relative to the root), git-ignored
    and hidden build folders left out."""
    skip = {".git", ".venv", "outputs", "__pycache__", ".pytest_cache", ".ruff_cache"}
    top = frozenset(p.name for p in ROOT.iterdir() if p.name not in skip)
    paths: set[str] = set()
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if rel.parts and (rel.parts[0] in skip or "__pycache__" in rel.parts):
            continue
        paths.add(rel.as_posix())
    return top, frozenset(paths)


def is_path_candidate(word: str) -> bool:
    top, _ = repo_entries()
    if "://" in word or word.startswith(SKIP_PREFIXES) or word in RUN_OUTPUTS:
        return False
    if any(c in word for c in "<>*{}[]…") or "..." in word:
        return False
    if re.match(r"[0-9a-f]{7,40}:", word):
        return False  # `git show REV:path`: a file at a commit, not in the tree
    if any(part in PLACEHOLDERS for part in re.split(r"[/_.:-]", word)):
        return False
    if word.endswith(EXTENSIONS) and not word.startswith("-"):
        return True
    return "/" in word and word.split("/", 1)[0] in top


def path_exists(word: str, doc: Path) -> bool:
    _, paths = repo_entries()
    rel = word.rstrip("/").removeprefix("./")
    if rel in paths:
        return True
    if (doc.parent / rel).resolve().exists() and ROOT in (doc.parent / rel).resolve().parents:
        return True
    if any(p.startswith(rel + ".") and "/" not in p[len(rel) :] for p in paths):
        return True  # an output prefix: `--out docs/bleu_minutes` names docs/bleu_minutes.png
    return any(p == rel or p.endswith("/" + rel) for p in paths)


def broken_paths(text: str, doc: Path) -> list[str]:
    spans, block, links = split_markdown(text)
    found = [w for w in words(spans + block) if is_path_candidate(w) and not path_exists(w, doc)]
    for link in links:
        target = link.split("#", 1)[0]
        if target and "://" not in target and not (doc.parent / target).exists():
            found.append(link)
    return found


# --- (b) make targets ------------------------------------------------------------------------


@cache
def make_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return frozenset(re.findall(r"^([A-Za-z][\w-]*):", text, flags=re.M))


def unknown_targets(text: str) -> list[str]:
    spans, block, _ = split_markdown(text)
    named = [t for chunk in spans + block for t in MAKE.findall(chunk)]
    return [t for t in named if t not in make_targets()]


# --- (c) command lines -----------------------------------------------------------------------


def command_lines(text: str) -> list[tuple[str, list[str], bool]]:
    """(entry point, overrides, multirun) of every train/evaluate/translate line in a code
    block; continuation lines (ending in a backslash) are joined first."""
    _, block, _ = split_markdown(text)
    joined: list[str] = []
    carry = ""
    for line in block:
        if line.rstrip().endswith("\\"):
            carry += line.rstrip()[:-1] + " "
            continue
        joined.append(carry + line)
        carry = ""
    found = []
    for line in joined:
        match = ENTRY.search(line.split(" #", 1)[0])
        if not match:
            continue
        rest = re.split(r"\s(?:\||<|>|&&|;)\s?", match.group(2))[0]
        args = [re.sub(r"<[^<>]*>", "PLACEHOLDER", a) for a in shlex.split(rest)]
        multirun = "-m" in args or "--multirun" in args
        found.append((match.group(1), [a for a in args if a not in ("-m", "--multirun")], multirun))
    return found


def expand(overrides: list[str], multirun: bool) -> list[list[str]]:
    """A multirun's value lists, one value at a time (the others at their first value)."""
    if not multirun:
        return [overrides]
    first = [o.split(",")[0] if "," in o else o for o in overrides]
    runs = [first]
    for i, o in enumerate(overrides):
        if "," in o:
            key, _, values = o.partition("=")
            for value in values.split(",")[1:]:
                runs.append([*first[:i], f"{key}={value}", *first[i + 1 :]])
    return runs


def check_command(entry: str, overrides: list[str]) -> str | None:
    """None if the line composes and validates, else the error."""
    try:
        with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
            cfg = compose(entry, overrides=overrides)
        if entry == "train":
            validate_config(cfg)
        else:
            parse_settings(cfg, SETTINGS[entry])
    except (AttnmtError, HydraException, OmegaConfBaseException, ValueError) as err:
        return f"{type(err).__name__}: {err}".splitlines()[0]
    return None


def bad_commands(text: str) -> list[str]:
    bad = []
    for entry, overrides, multirun in command_lines(text):
        for run in expand(overrides, multirun):
            error = check_command(entry, run)
            if error:
                bad.append(f"{entry}.py {' '.join(run)}: {error}")
    return bad


# --- (d) config keys -------------------------------------------------------------------------


@cache
def known_keys() -> frozenset[str]:
    keys: set[str] = set()
    for name in MODELS:
        keys |= setting_keys(name)
    return frozenset(keys)


def unknown_keys(text: str) -> list[str]:
    spans, block, _ = split_markdown(text)
    quoted_errors = [c for c in spans + block if "unknown key" in c]  # a misspelling on purpose
    named = {k for chunk in spans + block if chunk not in quoted_errors for k in KEY.findall(chunk)}
    return sorted(k for k in named if k not in known_keys())


# --- (e) ratios beside their figures ---------------------------------------------------------

NUMBER = r"\d[\d,]*(?:\.\d+)?"
UNIT = r"(?:\s?[A-Za-zµ]+(?:/[a-z]+)?)?"  # " ms", " s", " sent/s", " MB", " words/s"
TIMES = r"\s?[×x](?!\w)"
VERSUS = rf"(?P<a>{NUMBER}){UNIT}\s(?:vs|against)\s(?P<b>{NUMBER}){UNIT}"
RATIO_FORMS = (
    # A vs B: N×, A vs B (N×
    (re.compile(rf"(?<![\w.,]){VERSUS}(?::\s|\s\()\**(?P<n>{NUMBER}){TIMES}"), True),
    # N× (A vs B, N× faster (A against B
    (
        re.compile(rf"(?<![\w.,])(?P<n>{NUMBER}){TIMES}\**(?:\s(?:faster|slower))?\s\({VERSUS}"),
        True,
    ),
    # A / B = N×, A / B ≈ N×, A / B = N%
    (
        re.compile(
            rf"(?<![\w.,/])(?P<a>{NUMBER}){UNIT}\s?/\s?(?P<b>{NUMBER}){UNIT}\s[=≈]\s"
            rf"(?P<n>{NUMBER})(?:(?P<pct>%)|{TIMES})"
        ),
        False,
    ),
)
"""(pattern, either way round) of a ratio written beside its two figures."""
RATIO_HEADER = re.compile(r"^× .*\((?P<column>[^()]+)\)$")


def printed(number: str, scale: float = 1.0) -> tuple[float, float]:
    """(lowest, highest) value that rounds to ``number`` as printed (``2,979``, ``11.6``)."""
    digits = number.replace(",", "")
    half = 0.5 * 10.0 ** -len(digits.partition(".")[2])
    value = float(digits)
    return (value - half) * scale, (value + half) * scale


def quotient_agrees(a: str, b: str, n: str, either_way: bool, scale: float = 1.0) -> bool:
    """Whether the ratio ``n`` (times ``scale``) can be ``a / b`` (or ``b / a``), all three
    rounded as printed."""
    (a_lo, a_hi), (b_lo, b_hi), (n_lo, n_hi) = printed(a), printed(b), printed(n, scale)
    tries = [(a_lo / b_hi, a_hi / b_lo)] if b_lo > 0 else []
    if either_way and a_lo > 0:
        tries.append((b_lo / a_hi, b_hi / a_lo))
    return any(lo <= n_hi + 1e-12 and n_lo <= hi + 1e-12 for lo, hi in tries)


def inline_ratios(text: str) -> list[tuple[str, bool]]:
    """(match, whether its ratio is the quotient of its figures) of every ``RATIO_FORMS``
    match."""
    prose = re.sub(r"\s*\n\s*", " ", text)
    found = []
    for pattern, either_way in RATIO_FORMS:
        for m in pattern.finditer(prose):
            scale = 0.01 if m.groupdict().get("pct") else 1.0
            found.append((m.group(0), quotient_agrees(m["a"], m["b"], m["n"], either_way, scale)))
    return found


def table_cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def first_number(cell: str) -> str | None:
    match = re.search(NUMBER, cell)
    return match.group(0) if match else None


def table_ratios(text: str) -> list[tuple[str, bool]]:
    """(row, whether its ``× <baseline> (<column>)`` cell is its ``<column>`` over the
    baseline row's) of every table row below such a header; the baseline row is the one
    whose ratio is 1."""
    found = []
    for table in re.findall(r"(?:^\|.*\|[ \t]*\n?)+", text, flags=re.M):
        lines = [table_cells(line) for line in table.strip().splitlines()]
        if len(lines) < 3:
            continue
        header, _, *rows = lines
        for k, title in enumerate(header):
            match = RATIO_HEADER.match(title)
            if not match:
                continue
            j = header.index(match["column"]) if match["column"] in header else None
            base = next((r for r in rows if first_number(r[k]) in ("1", "1.0", "1.00")), None)
            if j is None or base is None:
                found.append((f"{title}: no column {match['column']!r} or no row at 1", False))
                continue
            for row in (r for r in rows if r is not base):
                a, b, n = first_number(row[j]), first_number(base[j]), first_number(row[k])
                ok = bool(a and b and n and quotient_agrees(a, b, n, either_way=True))
                found.append((f"{row[0]}: {title} = {row[k]}, {row[j]} against {base[j]}", ok))
    return found


def wrong_ratios(text: str) -> list[str]:
    """The ratios of ``text`` that are not the quotient of the figures beside them."""
    return [match for match, ok in inline_ratios(text) + table_ratios(text) if not ok]


# --- (f) generated figures -------------------------------------------------------------------

MEAN_STD = re.compile(rf"(?<![\w.,]){NUMBER} ± {NUMBER}")


def generated_results(folder: Path) -> str:
    """docs/results.md as ``python -m experiments.results_table docs`` writes it from the run
    folders (into ``folder``, curves included)."""
    from experiments.results_table import write_docs

    with contextlib.redirect_stderr(io.StringIO()):
        out = write_docs(ROOT / "results", folder / "results.md")
    return out.read_text(encoding="utf-8")


def figures_not_generated(text: str, generated: str) -> list[str]:
    """The ``mean ± std`` figures of ``text`` that ``generated`` does not hold."""
    known = set(MEAN_STD.findall(generated))
    return [f for f in MEAN_STD.findall(text) if f not in known]


# --- the tests -------------------------------------------------------------------------------


@pytest.fixture(params=DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def doc(request: pytest.FixtureRequest) -> Path:
    return request.param


def test_the_docs_exist_and_readme_is_short() -> None:
    assert len(DOCS) >= 6
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme) <= 12_000, f"README.md has {len(readme)} characters (at most 12,000)"
    assert "make train" in "\n".join(readme.splitlines()[:40])
    assert "make test" in "\n".join(readme.splitlines()[:40])


def test_every_path_exists(doc: Path) -> None:
    assert broken_paths(doc.read_text(encoding="utf-8"), doc) == []


def test_every_make_target_exists(doc: Path) -> None:
    assert unknown_targets(doc.read_text(encoding="utf-8")) == []


def test_every_command_line_composes_and_validates(doc: Path) -> None:
    assert bad_commands(doc.read_text(encoding="utf-8")) == []


def test_every_config_key_exists(doc: Path) -> None:
    assert unknown_keys(doc.read_text(encoding="utf-8")) == []


def test_the_checker_sees_the_docs() -> None:
    """The rules find what the docs hold (so an empty result above means something)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    spans, block, _ = split_markdown(readme)
    assert "src/attnmt/train/loop.py" in [w for w in words(spans) if is_path_candidate(w)]
    assert {"train", "test"} <= set(MAKE.findall("\n".join(block)))
    assert {e for e, _, _ in command_lines(readme)} == {"train", "evaluate", "translate", "serve"}
    assert "data.tokenizer.vocab_size" in unknown_keys(readme) + sorted(known_keys())


def test_the_checker_bites(tmp_path: Path) -> None:
    """A planted broken path, bad key, unknown target and bad command line each fail."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    planted = tmp_path / "README.md"
    planted.write_text(
        readme
        + "\nSee `src/attnmt/train/no_such_module.py` and [gone](docs/gone.md).\n"
        + "Set `trainer.max_stpes` or `make deploy`.\n"
        + "```bash\npython train.py trainer.lr=0.1 trainer.no_such_key=3\n"
        + "python evaluate.py ckpt=RUN beem=5\n```\n",
        encoding="utf-8",
    )
    text = planted.read_text(encoding="utf-8")
    doc = ROOT / "README.md"  # resolve links as the real README would
    assert broken_paths(text, doc) == ["src/attnmt/train/no_such_module.py", "docs/gone.md"]
    assert unknown_keys(text) == ["trainer.max_stpes", "trainer.no_such_key"]
    assert unknown_targets(text) == ["deploy"]
    bad = bad_commands(text)
    assert len(bad) == 2, bad
    assert "trainer.no_such_key" in bad[0] and "beem" in bad[1]
    assert broken_paths(readme, doc) == [] and unknown_keys(readme) == []


def test_every_ratio_is_the_quotient_of_its_figures(doc: Path) -> None:
    assert wrong_ratios(doc.read_text(encoding="utf-8")) == []


def test_the_ratio_checker_sees_the_docs() -> None:
    """performance.md's quotients are found in every form (so an empty result means
    something)."""
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    inline = {match for match, _ in inline_ratios(text)}
    assert {"103 vs 11.6 sent/s: 8.9×", "1.15 s vs 2.93 s: 2.5×", "683 / 567 = 1.20×"} <= inline
    assert "2,921 / 2,979 tok/s = 98%" in inline
    assert sum("JoeyNMT" in row for row, _ in table_ratios(text)) == 2


def test_the_ratio_checker_bites() -> None:
    """Wrong quotients, in every form, are reported; right ones, rounded, are not."""
    right = (
        "103 vs 11.6 sent/s: 8.9×. 36.6 s vs 1.65 s (22× slower). 1.15 s vs 2.93 s (2.5× "
        "faster). It is 1.20× faster (507 against\n607 ms). 2,921 / 2,979 tok/s = 98%; "
        "1/0.68 ≈ 1.47×; 750 / 75 = 10×. Not a ratio of these: 1.71× (per round).\n"
    )
    table = (
        "| system | sentences/s | × slow (sentences/s) |\n|---|---:|---:|\n"
        "| slow | 8.2 | 1.00 |\n| fast | 380.6 | {} |\n"
    )
    assert wrong_ratios(right + table.format("46.3")) == []
    planted = (
        "103 vs 11.6 sent/s: 7.3×. 683 ms vs 567 ms (1.17×). ~20x (36.6 s vs 1.65 s). "
        "1.18× faster (507 against 607 ms). 2,921 / 2,979 tok/s = 96%; 607 / 507 = 0.84×.\n"
    )
    assert wrong_ratios(planted) == [
        "103 vs 11.6 sent/s: 7.3×",
        "683 ms vs 567 ms (1.17×",
        "20x (36.6 s vs 1.65 s",
        "1.18× faster (507 against 607 ms",
        "2,921 / 2,979 tok/s = 96%",
        "607 / 507 = 0.84×",
    ]
    assert wrong_ratios(table.format("44.0")) == [
        "fast: × slow (sentences/s) = 44.0, 380.6 against 8.2"
    ]


@cache
def generated_alignment() -> str:
    """docs/alignment.md's generated part as ``python -m experiments.alignment_aer table``
    writes it (its baselines computed from toy_align, prepared under data/)."""
    from experiments.alignment_aer import read_runs, table, toy_baselines

    return table(read_runs(), toy_baselines())


@pytest.fixture(scope="session")
def results_md(tmp_path_factory: pytest.TempPathFactory) -> str:
    """docs/results.md as the generator writes it now, made once per session (its
    bootstraps are the slowest step of these tests)."""
    return generated_results(tmp_path_factory.mktemp("results"))


FROZEN = ("recipe.md", "luong_bahdanau.md", "ding_loose.md")
"""The closed studies' final reports: frozen, their generators in git history; their figures
are checked against their records by tests/test_frozen_pages.py."""


@pytest.fixture(scope="session")
def generated(results_md: str) -> str:
    """Every generated page's text (results.md, alignment.md) and the frozen reports'."""
    frozen = "".join((ROOT / "docs" / n).read_text(encoding="utf-8") for n in FROZEN)
    return results_md + generated_alignment() + frozen


def test_alignment_md_is_what_the_generator_writes() -> None:
    """docs/alignment.md holds the alignment records' figures as they are now (then its
    hand-written part, which the generator keeps)."""
    from experiments.alignment_aer import hand_written

    page = ROOT / "docs" / "alignment.md"
    assert page.read_text(encoding="utf-8") == generated_alignment() + hand_written(page)


def test_attention_md_is_what_the_generator_writes(tmp_path: Path) -> None:
    """docs/attention.md's generated blocks hold the run folders' figures and the source's
    code as they are now (`python -m experiments.attention_guide`; its PNGs are drawn here but
    not compared)."""
    from experiments.attention_guide import write_guide

    with contextlib.redirect_stderr(io.StringIO()):
        out = write_guide(ROOT / "results", tmp_path / "attention.md")
    docs = ROOT / "docs"
    assert (docs / "attention.md").read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
    for png in (tmp_path / "attention").glob("*.png"):
        assert (docs / "attention" / png.name).is_file(), f"docs/attention/{png.name} missing"


def test_results_md_is_what_the_generator_writes(results_md: str) -> None:
    """docs/results.md holds the run folders' figures as they are now (`make results-docs`)."""
    assert (ROOT / "docs" / "results.md").read_text(encoding="utf-8") == results_md


def test_other_docs_state_only_generated_figures(doc: Path, generated: str) -> None:
    """A mean ± std restated by hand elsewhere is the generated one."""
    assert figures_not_generated(doc.read_text(encoding="utf-8"), generated) == []


def test_the_figure_checker_bites() -> None:
    generated = "| ding_de_en | transformer | 4.04 ± 0.38 | 22.09 ± 0.69 |\n"
    text = "Seeds 3.78, 4.47, 3.86 (mean 4.04 ± 0.38; chrF 22.10 ± 0.69), about ±1 BLEU.\n"
    assert figures_not_generated(text, generated) == ["22.10 ± 0.69"]


EVAL_FOLDER = re.compile(r"eval/(<[^/`\s]*)/")


def evaluate_folders(text: str) -> list[str]:
    """The ``eval/<...>/`` folder names a text gives evaluate.py."""
    return EVAL_FOLDER.findall(text)


def test_evaluate_folder_is_named_as_evaluate_names_it(doc: Path) -> None:
    """evaluate.py's folder is ``<ckpt>-<split>-beam<k>-<key>`` (``attnmt.cli.evaluate.run``;
    tests/test_evaluate.py reads real ones): no doc leaves out the key."""
    for name in evaluate_folders(doc.read_text(encoding="utf-8")):
        assert re.fullmatch(r"<ckpt>-<split>-beam<k>-<key>", name), name


DOC_POINTER = re.compile(r"docs/(\w+\.md)(?:[,\s(]*\"([^\"]+)\")?")


def doc_pointers(text: str) -> list[tuple[str, str]]:
    """(doc, section or "") of every ``docs/NAME.md`` a text names, with the section when
    a quoted heading follows (``docs/experiments.md ("To be measured")``)."""
    return DOC_POINTER.findall(text)


def missing_pointers(pointers: list[tuple[str, str]]) -> list[str]:
    """The pointers whose doc, or heading in it, does not exist."""
    missing = []
    for name, section in pointers:
        path = ROOT / "docs" / name
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if not text or (section and section not in re.findall(r"^#+ (.+)$", text, flags=re.M)):
            missing.append(f"docs/{name} {section}".strip())
    return missing


def test_code_and_configs_point_at_docs_that_hold_it() -> None:
    """Every docs/NAME.md that a config comment or a module names exists, and so does the
    heading quoted after it."""
    files = [*CONFIGS.rglob("*.yaml"), *(ROOT / "src").rglob("*.py")]
    pointers = [p for f in files for p in doc_pointers(f.read_text(encoding="utf-8"))]
    assert ("experiments.md", "To be measured") in pointers
    assert missing_pointers(pointers) == []
    gone = [("results.md", "to be measured"), ("gone.md", "")]
    assert missing_pointers(gone) == ["docs/results.md to be measured", "docs/gone.md"]


def test_the_precision_comment_says_what_auto_does() -> None:
    """configs/trainer/default.yaml: ``auto`` on a CPU is fp32 unless the timed probe picks
    bf16 (attnmt.train.precision_probe), not bf16 wherever the CPU has native kernels."""
    import torch

    from attnmt.train.precision import resolve_precision

    text = (CONFIGS / "trainer" / "default.yaml").read_text(encoding="utf-8")
    comment = text.split("\nprecision: auto", 1)[1].split("\nprecision_probe:", 1)[0]
    assert "CPU: fp32" in comment and "timed probe" in comment, comment
    assert resolve_precision("auto", torch.device("cpu")).name == "fp32"


def test_training_md_lists_what_may_change_on_resume() -> None:
    """docs/training.md's resume list is MAY_CHANGE (src/attnmt/train/continuation.py)."""
    from attnmt.train.continuation import MAY_CHANGE

    text = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    section = text.split("## Resume", 1)[1].split("\n## ", 1)[0]
    listed = section.split("may differ from the checkpoint", 1)[1].split("Any other", 1)[0]
    keys = set(re.findall(r"`([a-z_]+(?:\.[a-z_]+)*)`", listed))
    if "every `decode` key" in listed:
        keys = {k for k in keys if not k.startswith("decode")} | {"decode.*"}
    assert keys == set(MAY_CHANGE)
