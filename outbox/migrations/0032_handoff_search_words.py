"""The handoff search by word starts (issue 39, "Find by what people know"; docs/console.md, "Search by what
people know"): on PostgreSQL a function, `search_text_words(text)`, that makes a search text's words and
each word's starts (up to `outbox.search_text.WORD_START_LENGTH` characters) a tsvector, and a GIN index on it
over `search_text`, built CONCURRENTLY while dispatchers write; then the trigram index of 0024, which the
search no longer reads, dropped CONCURRENTLY.

Why: every typed word is then one exact entry of the index, and GIN's fast scan skips the long list of a
common word ("client") by the short list of a rare one ("5000007"); the trigrams of `LIKE '%client
5000007%'` are all common, so the trigram index intersected lists of millions (6.29x the list page at
10,000,000 handoffs). No column and no rewrite: the index is an expression over `search_text`, so an erasure's
rewrite of the text rewrites its entries too. Not atomic: CONCURRENTLY cannot run in a transaction. SQLite
has no index for it: the search reads the column there (`outbox.search_text.text_search`)."""

from django.db import migrations, router

WORDS_INDEX = "handoff_search_words_idx"
TRIGRAM_INDEX = "handoff_search_trgm_idx"
# A word is a run of characters other than ASCII punctuation, spaces and controls (letters, digits and any
# non-ASCII character), as `outbox.search_text.SEPARATORS` splits it; its starts are indexed up to 24
# characters (`WORD_START_LENGTH`). IMMUTABLE: it reads nothing but its argument, so an index may use it.
WORDS_FUNCTION = r"""
CREATE OR REPLACE FUNCTION search_text_words(search_text text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    word text;
    starts text[] := '{}';
BEGIN
    FOREACH word IN ARRAY regexp_split_to_array(search_text, '[\x01-/:-@\[-`{-\x7f]+') LOOP
        FOR n IN 1 .. least(char_length(word), 24) LOOP
            starts := starts || left(word, n);
        END LOOP;
    END LOOP;
    RETURN array_to_tsvector(starts);
END
$$
"""


def _postgresql(apps, schema_editor, sql: list[str]):
    Handoff = apps.get_model("outbox", "Handoff")  # noqa: N806 - a model class
    connection = schema_editor.connection
    if connection.vendor != "postgresql" or not router.allow_migrate_model(
        connection.alias, Handoff
    ):
        return
    for statement in sql:
        schema_editor.execute(statement)


def add_words_index(apps, schema_editor):
    _postgresql(
        apps,
        schema_editor,
        [
            WORDS_FUNCTION,
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {WORDS_INDEX} ON outbox_handoff "
            "USING gin (search_text_words(search_text))",
            f"DROP INDEX CONCURRENTLY IF EXISTS {TRIGRAM_INDEX}",
        ],
    )


def drop_words_index(apps, schema_editor):
    _postgresql(
        apps,
        schema_editor,
        [
            "CREATE EXTENSION IF NOT EXISTS pg_trgm",
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {TRIGRAM_INDEX} ON outbox_handoff "
            "USING gin (search_text gin_trgm_ops)",
            f"DROP INDEX CONCURRENTLY IF EXISTS {WORDS_INDEX}",
            "DROP FUNCTION IF EXISTS search_text_words(text)",
        ],
    )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("outbox", "0031_drop_replaced_hold_columns")]

    operations = [migrations.RunPython(add_words_index, drop_words_index)]
