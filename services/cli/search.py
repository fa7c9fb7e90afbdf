"""Search and index: `index` and `query` through the gateway, and how an answer prints."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from google.protobuf.json_format import MessageToDict
from rich.console import Console
from rich.markup import escape

from hybridsearch.cli.base import SAMPLE_CORPUS, SEARCH, app, console, gateway_client, progress_bar


EXIT_NOTHING = 1  # nothing to index
EXIT_SKIPPED = 3  # indexed, but some files (or JSON records) offered were skipped: the summary says which and why
SHOWN_PER_REASON = 20  # skipped files listed under each reason; the rest counted


def target_collection(path: Path, collection: str | None) -> str:
    """The collection `index` writes into: the one named; without -c, `default` for the sample corpus only (a
    user's files never mix with the samples unasked: exit 2 naming the option)."""
    if collection is not None:
        return collection
    if path.resolve() == SAMPLE_CORPUS.resolve() or SAMPLE_CORPUS.resolve() in path.resolve().parents:
        return "default"
    console.print(f"[red]name the collection[/] {escape(str(path))} goes into: [bold]-c NAME[/] (`default` holds the "
                  "sample corpus; `-c default` adds these files to it anyway)", soft_wrap=True)
    raise typer.Exit(2)


@app.command(rich_help_panel=SEARCH)
def index(
    path: Annotated[Path, typer.Argument(exists=True, help="a folder (Markdown, text, reStructuredText, HTML, JSON/JSONL, "
                                                           "PDF, Python/JS/TS/Go/Java source), a file, or a BEIR "
                                                           "corpus.jsonl[.gz] (or its folder)")],
    collection: Annotated[Optional[str], typer.Option("--collection", "-c", help="the collection the files go "
                                                      "into (required but for the sample corpus, which goes into "
                                                      "`default`)")] = None,
    batch_size: int = 64,
    include: Annotated[Optional[list[str]], typer.Option(help="only files matching this glob (path, or name "
                                                              "for a glob without '/'); repeat")] = None,
    exclude: Annotated[Optional[list[str]], typer.Option(help="leave out files matching this glob; repeat")] = None,
    field_map: Annotated[Optional[list[str]], typer.Option(help="JSON records: ROLE=FIELD, ROLE id, title, text or "
                                                                "metadata (default: id/_id, title/name, "
                                                                "text/body/content, metadata or the other fields)")] = None,
    follow_symlinks: Annotated[bool, typer.Option(help="follow symlinks that leave the folder (skipped otherwise)")] = False,
    dry_run: Annotated[bool, typer.Option(help="read and check every file, show what would be indexed and skipped, "
                                               "write nothing")] = False,
    acl: Annotated[Optional[list[str]], typer.Option("--acl", help="readers of every document that names none (a "
                                                     "folder's .acl files and front matter `acl:` name their own): "
                                                     "group:hr, user:ana, !user:bob denies, * everyone; repeat")] = None,
):
    """Index documents through the gateway (read, chunk, embed, write to both stores). Every file is indexed or
    skipped with its reason; exit 3 when some offered file or record was skipped, 1 when nothing was indexed."""
    from hybridsearch.corpus import open_corpus
    from hybridsearch.readers.jsondocs import FieldMap
    from hybridsearch.security.acl import parse_acl

    collection = target_collection(path, collection)
    try:
        fields = FieldMap.parse(field_map or [])
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--field-map") from None
    try:
        readers = parse_acl(acl, "--acl") if acl else None
    except ValueError as err:  # PrincipalError
        raise typer.BadParameter(str(err), param_hint="--acl") from None
    started = time.perf_counter()
    with progress_bar() as progress:
        task = progress.add_task(f"{'reading' if dry_run else 'indexing into'} {collection}")
        advance_files = lambda: progress.advance(task)  # noqa: E731
        corpus = open_corpus(path, include, exclude, fields, on_file=advance_files, follow_symlinks=follow_symlinks,
                             acl=readers)
        progress.update(task, total=corpus.count)
        if dry_run:
            documents = list(corpus.documents)
        else:
            per_batch = None if corpus.unit == "files" else (lambda part: progress.advance(task, part.documents_received))
            total = send(gateway_client(), collection, corpus, batch_size, per_batch)
    seconds = time.perf_counter() - started
    folder = corpus.folder
    if folder is not None:
        print_skips(folder)
    received = len(documents) if dry_run else total.documents_received
    if dry_run:
        files = f" from {len(folder.indexed_files)} files" if folder is not None else ""
        console.print(f"dry run: {received} documents{files} would be indexed into {collection!r}; nothing was written")
    elif received:
        console.print(f"{total.documents_received} documents: {total.documents_written} written, "
                      f"{total.documents_unchanged} unchanged, {total.chunks_written} chunks "
                      f"in {seconds:.1f} s ({total.documents_received / max(seconds, 1e-9):.0f} documents/s)")
    if not received:
        console.print(f"[red]nothing to index[/] under {path}: no file a reader reads"
                      f"{' (see the skipped files above)' if folder is not None and (folder.skips or folder.skipped.total) else ''}")
        raise typer.Exit(EXIT_NOTHING)
    if folder is not None and folder.skips:
        raise typer.Exit(EXIT_SKIPPED)


def send(client, collection: str, corpus, batch_size: int, on_batch=None):
    """The corpus's documents in batches; in a folder, a batch the gateway refuses (INVALID_ARGUMENT) is sent
    again a document at a time, and each document refused alone is skipped with the gateway's reason."""
    from hybridsearch.client import InvalidArgument
    from hybridsearch.client.requests import add_counts
    from hybridsearch.runtime.iterables import batched
    from hybridsearch.v1 import ingest_pb2

    total = ingest_pb2.UpsertResponse()
    for batch in batched(corpus.documents, batch_size):
        try:
            add_counts(total, client.upsert(collection, batch, batch_size, on_batch=on_batch))
            continue
        except InvalidArgument:
            if corpus.folder is None:
                raise
        for doc in batch:
            try:
                add_counts(total, client.upsert(collection, [doc], on_batch=on_batch))
            except InvalidArgument as err:
                corpus.folder.refused(doc.metadata.get("path", doc.id), err.message)
    return total


def print_skips(folder) -> None:
    """Files without a reader by extension; then every file or record offered and skipped, by reason."""
    from collections import defaultdict

    if folder.skipped.total:
        console.print(f"{folder.skipped.line} (no reader)", soft_wrap=True)
    if not folder.skips:
        return
    by_reason = defaultdict(list)
    for skip in folder.skips:
        by_reason[skip.reason].append(skip)
    counts = ", ".join(f"{reason.value} {len(skips)}" for reason, skips in by_reason.items())
    console.print(f"[yellow]{len(folder.skips)} not indexed[/]: {counts}", soft_wrap=True)
    for reason, skips in by_reason.items():
        for skip in skips[:SHOWN_PER_REASON]:
            console.print(f"  {reason.value}: {escape(ascii_safe(skip.where))}: {escape(skip.detail)}", soft_wrap=True)
        if len(skips) > SHOWN_PER_REASON:
            console.print(f"  {reason.value}: … and {len(skips) - SHOWN_PER_REASON} more", soft_wrap=True)


def ascii_safe(where: str) -> str:
    """A path as a terminal can show it: control characters (a newline in a file name) written as escapes."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in where)


def parse_filters(values: list[str]) -> dict:
    """`--filter field=value` (repeat a field for any of its values) and `--filter field!=value`."""
    from hybridsearch.client import Not

    equals: dict[str, list[str]] = {}
    filters: dict = {}
    for item in values:
        negated = "!=" in item
        field, sep, value = item.partition("!=" if negated else "=")
        if not sep or not field:
            raise typer.BadParameter(f"{item!r}: expected field=value or field!=value", param_hint="--filter")
        if negated:
            filters[field] = Not(value)
        else:
            equals.setdefault(field, []).append(value)
    filters.update({f: v[0] if len(v) == 1 else v for f, v in equals.items()})
    return filters


@app.command(rich_help_panel=SEARCH)
def query(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument()],
    collection: Annotated[Optional[list[str]], typer.Option("--collection", "-c", help="repeat to search several collections")] = None,
    mode: Annotated[Optional[str], typer.Option(help="bm25 | vector | hybrid (default hybrid)")] = None,
    effort: Annotated[Optional[str], typer.Option(help="fast | balanced | thorough (default balanced)")] = None,
    n: Annotated[int, typer.Option("-n", help="number of results")] = 10,
    expand: Annotated[Optional[bool], typer.Option("--expand/--no-expand", help="query expansion (default: effort decides)")] = None,
    rerank: Annotated[Optional[bool], typer.Option("--rerank/--no-rerank", help="the reranker (default: effort decides)")] = None,
    graph: Annotated[Optional[bool], typer.Option("--graph/--no-graph", help="link expansion: neighbours of the top hits join a second fusion (default: the collection's setting, off)")] = None,
    min_score: Annotated[float, typer.Option(help="drop hits scoring below this (0-1; 0: the deployment's "
                         "score floor, docs/quality.md)")] = 0.0,
    no_floor: Annotated[bool, typer.Option("--no-floor", help="keep every hit, however low it scores")] = False,
    offset: Annotated[int, typer.Option(help="skip this many hits")] = 0,
    page_token: Annotated[Optional[str], typer.Option(help="the next page of an earlier answer (its next_page_token)")] = None,
    filter_: Annotated[Optional[list[str]], typer.Option("--filter", help="field=value or field!=value; repeat")] = None,
    explain: bool = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    language: Annotated[str, typer.Option(help="the query's language (en, de, ...); default: detected")] = "",
    fuzzy: Annotated[Optional[bool], typer.Option("--fuzzy/--no-fuzzy",
                     help="typo tolerance: fuzzy and prefix terms, a corrected query for the vector leg "
                          "(default: the collection's setting)")] = None,
    context: Annotated[int, typer.Option(help="neighbouring chunks to show before and after each hit (0-5)")] = 0,
    metadata: Annotated[Optional[list[str]], typer.Option("--metadata", "-m", help="a metadata field each hit shows; "
                        "repeat (default: the collection's return_metadata)")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="every leg's state, not only the failed ones")] = False,
):
    """Search one or more collections through the gateway."""
    from hybridsearch.client import HybridSearchError, search_request

    collections = collection or ["default"]
    options = {"collections": collections} if len(collections) > 1 else {"collection": collections[0]}
    try:
        request = search_request(text, top_k=n, mode=mode, effort=effort, rerank=rerank, min_score=min_score,
                                 no_floor=no_floor,
                                 offset=offset, explain=explain, filters=parse_filters(filter_ or []),
                                 context=context, return_metadata=metadata or [], **options)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    if expand is not None:
        request.expand = expand
    if fuzzy is not None:
        request.fuzzy = fuzzy
    if graph is not None:
        request.graph = graph
    if page_token:
        request.page_token = page_token
    if language:
        request.language = language
    try:
        with gateway_client() as client:
            response = client.search(request)
    except HybridSearchError as err:
        console.print(f"[red]{err.code().name}[/]: {err.details()}")
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(MessageToDict(response, preserving_proto_field_name=True), indent=2))
    else:
        following = next_page_command(ctx, response.next_page_token)
        print_response(text, response, following, verbose, tuple(collections))


# What a page token does not carry: the next page's command repeats every other option as given
# (the token belongs to one query: drop `--effort fast` and it is refused as another query's).
PAGE_OPTIONS = ("offset", "page_token")


def next_page_command(ctx: typer.Context, token: str) -> str:
    """The command that reads the next page: this one as parsed (its command path, the query, every option
    that differs from its default, in the command's order), its offset and page token replaced by `token`.
    Empty without a token."""
    if not token:
        return ""
    words = ctx.command_path.split()
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.name in PAGE_OPTIONS or value is None or value == param.default or value in ([], ()):
            continue
        if param.param_type_name == "argument":
            words.append(str(value))
            continue
        flag = next((o for o in param.opts if o.startswith("--")), param.opts[0])
        if param.is_flag:
            if value:
                words.append(flag)
            elif param.secondary_opts:
                words.append(param.secondary_opts[0])
        elif param.multiple:
            words += [w for v in value for w in (flag, str(v))]
        else:
            words += [flag, str(value)]
    return shlex.join([*words, "--page-token", token])


def highlighted(snippet: str, highlights) -> str:
    """The snippet as rich markup, each highlight in bold yellow (offsets from the gateway)."""
    from rich.markup import escape

    out, last = [], 0
    for h in highlights:
        out += [escape(snippet[last:h.start]), f"[bold yellow]{escape(snippet[h.start:h.end])}[/]"]
        last = h.end
    out.append(escape(snippet[last:]))
    return "".join(out)


def citation(hit) -> str:
    """Where a hit sits: "path:12-30 (symbol)", the path alone, or empty when nothing is known."""
    place = hit.path
    if hit.HasField("citation"):
        span = hit.citation.chunk
        place = f"{place or hit.doc_id}:{span.start_line}-{span.end_line}"
    symbol = hit.metadata.get("symbol")
    return f"{place} ({symbol})" if symbol and place else place


def source_line(hit) -> str:
    """Where a hit comes from: "path:12-30 (symbol)  type, modified  field=value …" (empty when nothing is known)."""
    extra = [f"{k}={v}" for k, v in hit.metadata.items() if k != "symbol"]
    about = ", ".join(x for x in (hit.type, hit.modified[:10]) if x)
    return "  ".join(x for x in (citation(hit), about, " ".join(extra)) if x)


def context_lines(hit) -> list[str]:
    """A hit's neighbouring chunks (SearchRequest.context), each one line: "before (lines 3-9): text"."""
    lines = []
    for label, chunks in (("before", reversed(hit.context_before)), ("after", hit.context_after)):
        for chunk in chunks:
            where = f"lines {chunk.span.start_line}-{chunk.span.end_line}" if chunk.HasField("span") else chunk.chunk_id
            lines.append(f"{label} ({where}): {' '.join(chunk.text.split())[:200]}")
    return lines


def print_response(text: str, response, next_page: str = "", verbose: bool = False,
                   searched: tuple[str, ...] = ()) -> None:
    """An answer as lines: hits numbered on from the page's offset (page 2 of ten starts at 11), their
    legs and snippets, tags, `next_page` (the command for the next page), and the explanation; without one,
    the failed legs and notices (every leg's state with `verbose`)."""
    from hybridsearch.client import explain_lines
    from hybridsearch.query import legs as leg_table
    from hybridsearch.v1 import common_pb2, search_pb2

    out = Console(soft_wrap=True)
    counts = f", {response.counts.line}" if response.counts.line else f", {response.total_candidates} candidates"
    where = f"in {', '.join(searched)}, " if searched else ""  # which collection answered: `default` is the samples
    out.print(f"[bold]{text}[/]  ({where}{response.took_ms:.0f} ms{counts}{', DEGRADED' if response.degraded else ''})")
    for i, hit in enumerate(response.hits, response.offset + 1):
        legs = ", ".join(f"{leg_table.name_of(l.leg)}/"
                         f"{common_pb2.QueryKind.Name(l.kind).removeprefix('QUERY_KIND_').lower()}#{l.rank}" for l in hit.legs[:4])
        where = f"{hit.collection}:" if hit.collection else ""
        out.print(f"{i:>2}. [bold]{hit.score:.3f}[/] {where}{hit.doc_id}  [cyan]{hit.title}[/]"
                  f"  (blended {hit.blended_score:.3f}, fusion {hit.fusion_score:.3f}"
                  f"{f', rerank {hit.rerank_score:.3f}' if hit.reranked else ''}; {legs})")
        if where_from := source_line(hit):
            out.print(f"    [green]{escape(where_from)}[/]")
        out.print(f"    {highlighted(hit.snippet, hit.highlights)}")
        for line in context_lines(hit):
            out.print(f"    [dim]{escape(line)}[/]")
    if response.tag_counts:
        out.print("tags: " + ", ".join(f"{tag} {n}" for tag, n in response.tag_counts.items()))
    if response.next_page_token:
        out.print(f"next page: {escape(next_page or '--page-token ' + response.next_page_token)}")
    if response.HasField("explain"):
        out.print("[bold]explain[/]")
        for line in explain_lines(response):
            out.print(f"  {line}")
        e = response.explain
        out.print(f"  fusion order: {list(e.fusion_order[:10])}")
        for rl in (rl for rl in e.leg_lists if rl.leg == common_pb2.LEG_GRAPH):
            out.print(f"  graph added: {[(h.doc_id, round(h.score, 3)) for h in rl.hits[:10]]}")
        for b in e.boosts[:20]:
            out.print(f"  boost {search_pb2.BoostStage.Name(b.stage).removeprefix('BOOST_STAGE_').lower()}: "
                      f"{b.collection}:{b.doc_id} {b.field}={b.value} x{b.factor:.2f}")
        if e.rerank_scores:
            out.print(f"  rerank scores: { {k: round(v, 3) for k, v in list(e.rerank_scores.items())[:10]} }")
    else:
        for line in (explain_lines(response) if verbose else problems(response)):
            out.print(f"  {line}")


def problems(response) -> list[str]:
    """What a plain answer shows beside its hits: the legs that failed (the answer is degraded) and the notices;
    every leg's state is `--explain` or `-v`'s (a skipped rerank or tag leg is no news)."""
    from hybridsearch.client.requests import enum_word
    from hybridsearch.v1 import search_pb2

    failed = [f"{s.name}: {enum_word(search_pb2.LegState, s.state)}{' (' + s.reason + ')' if s.reason else ''}"
              for s in response.legs if s.state == search_pb2.LEG_STATE_FAILED]
    return failed + [f"notice: {n}" for n in response.notices]
