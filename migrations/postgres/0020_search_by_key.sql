-- Searching every queue by ordering key, as on SQLite (migrations/0022_search_by_key.sql).
CREATE INDEX dead_letters_by_key ON dead_letters (ordering_key, id) WHERE ordering_key IS NOT NULL;
CREATE INDEX delivered_by_key ON delivered (ordering_key, id) WHERE ordering_key IS NOT NULL;
